"""gsd-research: research tools for coding agents, called through Bash."""

__version__ = "0.1.0"
