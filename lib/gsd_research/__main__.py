"""Run the gsd-research CLI with `python -m gsd_research`."""

from gsd_research.cli import main

main()
