"""Shared helpers for the benchmarks: paths, the bench corpora, cl100k, a fake server, small statistics."""

from __future__ import annotations

import glob
import gzip
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GSD_SHARED_DIR", ROOT.parent / "shared"))
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tokenizers" / "tiktoken"))
if str(ROOT) not in sys.path:  # the fake servers live in tests/ (not part of the installed package)
    sys.path.insert(0, str(ROOT))


def cl100k():
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(enc.encode(text, disallowed_special=()))


def fastapi_pages() -> list[str]:
    folder = SHARED / "bench" / "corpora" / "fastapi-docs"
    return [p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.rglob("*.md"))]


def aeb_articles() -> list[str]:
    data = json.loads((SHARED / "bench" / "aeb" / "ground-truth.json").read_text(encoding="utf-8"))
    return [v["articleBody"] for _, v in sorted(data.items()) if (v.get("articleBody") or "").strip()]


def scifact_abstracts(limit: int = 1500) -> list[str]:
    out = []
    with gzip.open(SHARED / "bench" / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            out.append(f"{doc['title']}\n\n{doc['text']}")
            if len(out) >= limit:
                break
    return out


def python_sources(limit: int = 150) -> list[str]:
    """Python modules of the venv's pure-Python libraries (requests, click, urllib3, jinja2, ...)."""
    site = Path(sys.prefix) / "lib"
    files = []
    for lib in ("requests", "requests_cache", "click", "urllib3", "jinja2", "yaml"):
        files += sorted(glob.glob(str(site / "python3*" / "site-packages" / lib / "**" / "*.py"), recursive=True))
    texts = [Path(f).read_text(encoding="utf-8", errors="replace") for f in files]
    return [t for t in texts if t.strip()][:limit]


def corpora(quick: bool = False) -> dict[str, list[str]]:
    n = 3 if quick else 1
    return {"fastapi-docs (Markdown)": fastapi_pages()[::n], "AEB articleBody (prose)": aeb_articles()[::n],
            "SciFact abstracts (scientific prose)": scifact_abstracts(1500 // n),
            "Python code (venv)": python_sources(150 // n)}


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def compile_bytecode() -> str:
    """Compile the measured gsd_research package to bytecode, as pip does when it installs it, and return its
    folder. Start-up figures of a checkout otherwise depend on whether earlier runs left `__pycache__`
    behind (none is written under PYTHONDONTWRITEBYTECODE, or in a tree exported with `git archive`), and a
    cached `docs` call then compiles ~40 modules from source on every run (~30 ms)."""
    import compileall

    import gsd_research

    package = Path(gsd_research.__file__).resolve().parent
    compileall.compile_dir(str(package), quiet=1)
    return str(package)


def start_fake_server(*providers: str):
    from tests.fakes.server import make_server

    return make_server(*providers)


def write_cl100k_extra(path: Path = ROOT / "lib" / "gsd_research" / "data" / "cl100k_extra.txt") -> int:
    """Regenerate the estimator's list of cl100k entries missing from cl100k_vocab.txt (not valid UTF-8
    on their own, or holding the file's NUL separator), from tiktoken's offline BPE file; checks that the
    two files together give back every rank. `python bench/_common.py --write-cl100k-extra`."""
    import tiktoken

    from gsd_research.core.tokens import _byte_ranks, _ranks

    ranks = tiktoken.get_encoding("cl100k_base")._mergeable_ranks
    texts = set(_ranks())
    extra = []
    for data, rank in ranks.items():
        try:
            if data.decode("utf-8") in texts:
                continue
        except UnicodeDecodeError:
            pass
        extra.append((rank, data))
    lines = ["# cl100k_base entries missing from cl100k_vocab.txt (not valid UTF-8 on their own): rank<TAB>hex bytes"]
    path.write_text("\n".join(lines + [f"{r}\t{d.hex()}" for r, d in sorted(extra)]) + "\n", encoding="utf-8")
    _byte_ranks.cache_clear()
    assert _byte_ranks() == ranks, "vocabulary files do not reproduce cl100k's ranks"
    return len(extra)


if __name__ == "__main__" and "--write-cl100k-extra" in sys.argv:
    print(f"{write_cl100k_extra()} entries written")
