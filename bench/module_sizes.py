"""Module sizes of lib/gsd_research, largest first: a report to read, not a gate (split by idea, not by lines).

Usage: python bench/module_sizes.py [--top N]
"""

from __future__ import annotations

import argparse
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lib" / "gsd_research"


def sizes(package: Path = PACKAGE) -> list[tuple[str, int]]:
    """(module path, lines) for every module, largest first."""
    rows = [(str(p.relative_to(package)), len(p.read_text(encoding="utf-8").splitlines()))
            for p in package.rglob("*.py")]
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=0, help="only the N largest modules (0: all)")
    args = parser.parse_args()
    rows = sizes()
    shown = rows[: args.top] if args.top else rows
    width = max(len(name) for name, _ in shown)
    for name, lines in shown:
        print(f"{name:<{width}}  {lines:>5}")
    packages: dict[str, int] = {}
    for name, lines in rows:
        package = name.split("/")[0] if "/" in name else "(top level)"
        packages[package] = packages.get(package, 0) + lines
    print(f"\n{'package':<{width}}  {'lines':>5}")
    for name, lines in sorted(packages.items(), key=lambda r: -r[1]):
        print(f"{name:<{width}}  {lines:>5}")
    print(f"\n{len(rows)} modules, {sum(n for _, n in rows)} lines")


if __name__ == "__main__":
    main()
