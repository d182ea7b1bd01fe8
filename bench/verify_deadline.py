"""`verify --timeout` on a big GSD research file: does the answer come within the deadline, scoring included?

One RESEARCH.md of 300 claims in GSD's tags: quotes and paraphrases of AEB news pages served on 127.0.0.1
([CITED: url], built as in bench/citations.py), package claims ([VERIFIED: npm registry | PyPI | crates.io])
against the fake registries, and [ASSUMED] claims. `verify --no-llm --timeout T` runs as a real process
in a fresh home (sources fetched: cold), then again (sources from the memory: warm); wall time, verify's
own elapsed time and the verdict counts are printed. `--full` adds the same runs with a deadline too long
to bind (the baseline: how long the whole check takes).

Usage: python bench/verify_deadline.py [--claims 300] [--timeout 10] [--full]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pages import articles, english, serve  # noqa: E402
from citations import BIN, bench_env, build, quote_figures  # noqa: E402

# (tag, package cell, the verdict it deserves against tests/fakes/registries.py)
PACKAGES = [("npm registry", "`react` 19.1.0", "registry_confirmed"), ("npm registry", "`react` 21.0.0", "version_not_found"),
            ("npm registry", "`reactt-x` 1.0.0", "package_not_found"), ("PyPI", "pydantic 2.6", "registry_confirmed"),
            ("PyPI", "`requests` 2.99.0", "version_not_found"), ("crates.io", "`serde` 1.0.200", "registry_confirmed"),
            ("crates.io", "`tokio`", "registry_confirmed")]


def research_file(claims: list[dict], n: int, folder: Path) -> tuple[Path, dict[int, dict]]:
    """GSD's RESEARCH.md layout: a Standard Stack table of registry claims, then cited and assumed claims;
    and line -> what each claim is ({"kind", "quote"?} as citations.build made it, or {"expected"})."""
    rng = random.Random(25)
    n_registry, n_assumed = n // 10, n // 20
    lines = ["# Phase 1: Bench - Research", "", "**Researched:** 2026-11-28", "", "## Standard Stack", "",
             "| Library | Version | Source |", "|---|---|---|"]
    truth: dict[int, dict] = {}
    for i in range(n_registry):
        tag, package, expected = PACKAGES[i % len(PACKAGES)]
        lines.append(f"| {package} | item {i} | [VERIFIED: {tag}] |")
        truth[len(lines)] = {"kind": "registry", "expected": expected}
    lines += ["", "## Architecture Patterns", ""]
    for c in rng.sample(claims, min(len(claims), n - n_registry - n_assumed)):
        text = f'The article reports that "{c["quote"]}"' if "quote" in c else c["text"].rstrip(".")
        lines.append(f"- {text} [CITED: {c['url']}].")
        truth[len(lines)] = dict(c)
    for i in range(n_assumed):
        lines.append(f"- Widget pattern {i} is the usual choice [ASSUMED].")
        truth[len(lines)] = {"kind": "assumed", "expected": "unverified"}
    path = folder / "RESEARCH.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, truth


def accuracy(truth: dict[int, dict], verdicts: dict[int, str]) -> dict:
    """Quote recall/precision (citations.quote_figures) and registry/assumption verdicts as deserved."""
    quotes = [dict(c, result={"verdict": verdicts[line]}) for line, c in truth.items() if "quote" in c]
    tagged = [(c["expected"], verdicts[line]) for line, c in truth.items() if "expected" in c]
    figures = quote_figures(quotes)
    return {"quotes": {k: figures[k] for k in ("quotes", "altered_or_foreign", "flagged", "recall", "precision")},
            "registry_and_assumed": {"claims": len(tagged), "as_deserved": sum(e == v for e, v in tagged)}}


def run(path: Path, env: dict, timeout: float) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([str(BIN / "gsd-research"), "verify", str(path), "--no-llm", "--timeout", f"{timeout:g}",
                           "--max-tokens", "400000"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if not proc.stdout.strip():
        raise SystemExit(f"verify printed nothing (exit {proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout)
    meta = doc.get("metadata", {})
    return {"exit": proc.returncode, "wall_s": round(wall, 2), "elapsed_s": round(meta.get("elapsed_ms", 0) / 1000, 2),
            "claims": meta.get("claims"), "counts": meta.get("counts"), "tags": meta.get("tags"),
            "verdicts": {c["line"]: c["verdict"] for c in doc.get("claims", [])}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--full", action="store_true", help="also run with a deadline too long to bind")
    args = parser.parse_args()
    from tests.fakes.server import make_server

    data = articles()
    eligible = sorted(k for k, v in data.items() if 1500 < len(v["articleBody"]) < 15000 and english(v["articleBody"]))
    random.Random(7).shuffle(eligible)
    pages = eligible[: max(2, args.claims // 8)]
    base, server = serve()
    registries = make_server("registries")
    work = Path(tempfile.mkdtemp(prefix="bench-verify-deadline-"))
    figures: dict = {"claims_asked": args.claims, "pages": len(pages), "timeout_s": args.timeout}
    try:
        path, truth = research_file(build(pages, {k: data[k]["articleBody"] for k in pages}, base), args.claims, work)
        for label, timeout in [("bound", args.timeout)] + ([("unbound", 900.0)] if args.full else []):
            env = bench_env(work / f"home-{label}")
            env.update({"GSD_RESEARCH_NPM_REGISTRY_URL": registries.url + "/npm",
                        "GSD_RESEARCH_PYPI_URL": registries.url + "/pypi",
                        "GSD_RESEARCH_CRATES_URL": registries.url + "/crates"})
            figures[label] = {"cold": run(path, env, timeout), "warm": run(path, env, timeout)}
            if label == "unbound":  # every claim checked: how right the verdicts are
                figures["accuracy_unbound_cold"] = accuracy(truth, figures[label]["cold"]["verdicts"])
            for runs in figures[label].values():
                runs.pop("verdicts")
    finally:
        server.shutdown()
        registries.stop()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
