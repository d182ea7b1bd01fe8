"""The version of a library the project in the working directory uses, read from its lockfiles.

npm (package-lock.json), pnpm (pnpm-lock.yaml), Yarn classic and Berry (yarn.lock), uv (uv.lock), Poetry
(poetry.lock), pip (requirements*.txt, `==` pins), Cargo (Cargo.lock) and Go modules (go.mod). The TOML
lockfiles are read line by line (their `[[package]]` blocks are machine-written), so Python 3.10 needs no
TOML library. A lockfile that cannot be read is skipped with a note: the documentation is served without a
version. Names match exactly per ecosystem (npm names with their scope, and a scoped package only when the
library asked for is scoped; PEP 503 names; crate names; Go module paths by their last elements), and a
version or name that is not shaped like one (a planted path or instruction) is dropped with a note, never
repeated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from gsd_research.core.errors import GsdError
from gsd_research.core.input_files import read_file

MAX_BYTES = 20_000_000  # a lockfile larger than this is skipped with a note, never read whole
ORDER = ("package-lock.json", "pnpm-lock.yaml", "yarn.lock", "uv.lock", "poetry.lock", "requirements*.txt",
         "Cargo.lock", "go.mod")
NPM = ("package-lock.json", "pnpm-lock.yaml", "yarn.lock")
MAX_VERSION = 64
VERSION_RE = re.compile(r"^[vV]?\d+(?:\.\d+)*[0-9A-Za-z.+!_~-]*$")
NAME_RE = re.compile(r"^@?[A-Za-z0-9][A-Za-z0-9._~/-]{0,213}$")
REQUIREMENTS_RE = re.compile(r"^requirements[A-Za-z0-9._-]{0,60}\.txt$")


@dataclass
class Pinned:
    """A library's version as a lockfile of the project pins it."""

    name: str
    version: str
    lockfile: str


def norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def version_shaped(version: str) -> bool:
    """A version a lockfile may pin (1.2.3, v1.2.3-rc.1, 0.0.0-2023..., 2.0.0.post1), bounded in length."""
    return 0 < len(version) <= MAX_VERSION and bool(VERSION_RE.match(version))


def name_keys(name: str) -> set[str]:
    """The spellings a library name may take in a lockfile: next.js ~ nextjs ~ next, vercel/next.js ~ next.
    A scoped npm name (@scope/pkg) is only itself: @types/react is not react."""
    base = name.strip().lower()
    keys = {norm(base)} if base.startswith("@") else {norm(base), norm(base.rsplit("/", 1)[-1])}
    keys |= {k[:-2] for k in list(keys) if k.endswith("js") and len(k) > 4}
    return {k for k in keys if k}


def _npm_lock(text: str) -> dict[str, str]:
    data = json.loads(text)
    out: dict[str, str] = {}
    for key, entry in (data.get("packages") or {}).items():
        if key.startswith("node_modules/") and "/node_modules/" not in key and isinstance(entry, dict):
            out.setdefault(key[len("node_modules/"):], str(entry.get("version") or ""))
    for name, entry in (data.get("dependencies") or {}).items():  # lockfile v1
        if isinstance(entry, dict):
            out.setdefault(name, str(entry.get("version") or ""))
    return out


def _pnpm_lock(text: str) -> dict[str, str]:
    import yaml

    data = yaml.safe_load(text) or {}
    out: dict[str, str] = {}
    importers = data.get("importers") or {".": data}
    root = importers.get(".") or {}
    for section in ("dependencies", "devDependencies", "optionalDependencies"):
        for name, entry in (root.get(section) or {}).items():
            version = entry.get("version") if isinstance(entry, dict) else entry
            out.setdefault(name, str(version or "").split("(", 1)[0])
    for key in data.get("packages") or {}:
        match = re.match(r"^/?(@?[^@/]+(?:/[^@/]+)?)[@/](\d[^(/]*)", str(key))
        if match:
            out.setdefault(match.group(1), match.group(2))
    return out


def _yarn_lock(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    names: list[str] = []
    for line in text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":") and not line.startswith("#"):
            names = []
            for spec in line.rstrip()[:-1].split(","):
                spec = spec.strip().strip('"')
                name = spec.rsplit("@", 1)[0] if spec.rfind("@") > 0 else spec
                if name and name != "__metadata":
                    names.append(name)
            continue
        match = re.match(r'^\s+version:?\s+"?([^"\s]+)"?', line)
        if match and names:
            for name in names:
                out.setdefault(name, match.group(1))
            names = []
    return out


def _toml_packages(text: str) -> dict[str, str]:
    """`[[package]]` blocks' name and version (uv.lock, poetry.lock, Cargo.lock)."""
    out: dict[str, str] = {}
    for block in text.split("[[package]]")[1:]:
        name = re.search(r'(?m)^name\s*=\s*"([^"]+)"', block)
        version = re.search(r'(?m)^version\s*=\s*"([^"]+)"', block)
        if name and version:
            out.setdefault(name.group(1), version.group(1))
    return out


def _requirements(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([A-Za-z0-9.+!_-]+)$", line)
        if match:
            out.setdefault(match.group(1), match.group(2))
    return out


def _go_mod(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    block = False
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("require ("):
            block = True
            continue
        if block and line == ")":
            block = False
            continue
        match = re.match(r"^(?:require\s+)?(\S+)\s+(v\d\S*)$", line) if block or line.startswith("require ") else None
        if match:
            out.setdefault(match.group(1), match.group(2).removesuffix("+incompatible"))
    return out


PARSERS = {"package-lock.json": _npm_lock, "pnpm-lock.yaml": _pnpm_lock, "yarn.lock": _yarn_lock,
           "uv.lock": _toml_packages, "poetry.lock": _toml_packages, "Cargo.lock": _toml_packages, "go.mod": _go_mod}


def _files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for pattern in ORDER:
        paths = sorted(p for p in folder.glob(pattern) if p.is_file())
        if pattern == "requirements*.txt":  # the main file first, then the others in name order
            paths = sorted((p for p in paths if REQUIREMENTS_RE.match(p.name)), key=lambda p: p.name != "requirements.txt")
        found += paths
    return found


def _keys_of(package: str, lockfile: str) -> set[str]:
    """A lockfile entry's spellings in its ecosystem: npm, Python and crate names whole (an npm scope kept);
    a Go module path also by its last one and two elements, a major-version suffix (/v5) aside."""
    if lockfile != "go.mod":
        return {norm(package)}
    parts = [p for p in package.split("/") if p]
    if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]):
        parts = parts[:-1]
    keys = {norm(package), norm("/".join(parts)), norm(parts[-1])} if parts else set()
    if len(parts) >= 3:  # github.com/gin-gonic/gin ~ gin-gonic/gin
        keys.add(norm("/".join(parts[-2:])))
    return keys


def _wanted(names: list[str], scoped: bool) -> list[set[str]]:
    """Each name's keys, in order of preference; for scoped npm entries only the scoped names count."""
    return [name_keys(n) if n.strip().startswith("@") or not scoped else set() for n in names if n]


def _best(packages: dict[str, str], names: list[str], lockfile: str) -> tuple[int, str, str] | None:
    """The entry matching the most preferred of `names` (the library asked for first), or None."""
    plain, scoped = _wanted(names, False), _wanted(names, True)
    best = None
    for package, version in packages.items():
        wanted = scoped if lockfile in NPM and package.startswith("@") else plain
        keys = _keys_of(package, lockfile)
        rank = next((i for i, k in enumerate(wanted) if k & keys), None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, package, version)
    return best


@dataclass
class Lookup:
    """The pinned version found (or None) and notes on lockfiles that could not be used."""

    pinned: Pinned | None
    notes: list[str]


def lookup(names: list[str], folder: Path | None = None) -> Lookup:
    """The version the project's first lockfile listing one of `names` pins (requirements files: the main
    one, a disagreement said), with notes on unreadable lockfiles and values that are not versions."""
    notes: list[str] = []
    found: list[Pinned] = []
    for path in _files(folder or Path.cwd()):
        if found and not (found[0].lockfile.startswith("requirements") and path.name.startswith("requirements")):
            break
        parse = PARSERS.get(path.name, _requirements)
        try:
            text = read_file(path, MAX_BYTES, what="lockfile", shown=path.name).decode("utf-8", "replace")
        except GsdError as exc:
            notes.append(f"{exc.message}; it was skipped")
            continue
        try:
            packages = parse(text)
        except Exception:  # noqa: BLE001 - a broken lockfile is skipped with a note, never a failed docs call
            notes.append(f"{path.name} could not be read (not valid for its format); it was skipped")
            continue
        best = _best(packages, names, path.name)
        if best is None:
            continue
        _, package, version = best
        if not (NAME_RE.match(package) and version_shaped(version)):
            notes.append(f"{path.name} pins the library at a value that is not a version; it was ignored")
            continue
        found.append(Pinned(package, version, path.name))
    if len(found) > 1 and len({p.version for p in found}) > 1:
        notes.append(f"{found[0].lockfile} and {', '.join(p.lockfile for p in found[1:])} pin different "
                     f"versions; {found[0].lockfile} was used")
    return Lookup(found[0] if found else None, notes)


def project_version(names: list[str], folder: Path | None = None) -> Pinned | None:
    """The version the project's first lockfile listing one of `names` pins, or None."""
    return lookup(names, folder).pinned


def _bare(version: str) -> str:
    """'v1.9.1', 'tokio-1.38.0', '1.9.1' -> '1.9.1' (Context7 lists versions as the project tags them)."""
    return re.sub(r"^[^\d]*", "", version.strip())


def served(pinned: Pinned, versions: list[str]) -> str | None:
    """The Context7 version string that is the pinned version (a tag prefix such as v aside), or None."""
    want = _bare(pinned.version)
    return next((v for v in versions if want and _bare(v) == want), None)
