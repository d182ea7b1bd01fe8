"""Injection detection and fencing (core.untrusted) on the corpora of tests/injection and on held-out text.

    .venv/bin/python bench/injection.py

Prints, as Markdown tables: the detection rate on the hostile corpus (each variant alone and hidden in
the middle of an ordinary page), per technique; on the held-out variants (never tuned on); the
false-positive rate on the hand-written clean pages and on held-out ordinary text from shared/bench
(AEB news and blog articles, the FastAPI docs, the mixed-formats text files); how many fenced outputs are
sound (no closing-marker spelling inside); and the time scan + fence takes per page.
Targets: detection >= 95 %, false positives <= 5 %, every fence sound.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict

from _common import SHARED  # also puts the checkout on sys.path (tests.injection)
from tests.injection import corpus

from gsd_research.core import untrusted
from gsd_research.injection import detect

OPENS = (untrusted.FENCE_OPEN_FLAGGED + "\n", untrusted.FENCE_OPEN + "\n")


def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100.0 * part / max(1, whole):.1f} %)"


def clean_sets() -> dict[str, list[str]]:
    sets = {"hand-written clean pages (tests/injection/clean)": [c["text"] for c in corpus.clean()]}
    articles = corpus.aeb_articles()
    if articles:
        sets["AEB ground-truth articles (held out)"] = [a["text"] for a in articles]
    fastapi = sorted((SHARED / "bench" / "corpora" / "fastapi-docs").rglob("*.md"))
    if fastapi:
        sets["FastAPI docs pages (looked at once)"] = [p.read_text(errors="replace") for p in fastapi]
    mixed = [p for p in sorted((SHARED / "bench" / "corpora" / "mixed-formats").rglob("*"))
             if p.suffix in (".md", ".txt", ".html", ".htm")]
    if mixed:
        sets["mixed-formats text files (held out)"] = [p.read_text(errors="replace") for p in mixed]
    return sets


def detection() -> tuple[int, int]:
    hostile, pages = corpus.hostile(), [c["text"] for c in corpus.clean()]
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for i, item in enumerate(hostile):
        row = per[item["technique"]]
        row[0] += 1
        row[1] += bool(untrusted.scan(item["text"]))
        row[2] += bool(untrusted.scan(corpus.embedded(item["text"], pages[i % len(pages)])))
    print("| technique | variants | detected alone | detected inside a page |\n|---|---|---|---|")
    for technique, (n, alone, inside) in sorted(per.items()):
        print(f"| {technique} | {n} | {pct(alone, n)} | {pct(inside, n)} |")
    total = [sum(r[k] for r in per.values()) for k in range(3)]
    print(f"| **all** | {total[0]} | {pct(total[1], total[0])} | {pct(total[2], total[0])} |")
    missed = [h["id"] for h in hostile if not untrusted.scan(h["text"])]
    if missed:
        print(f"\nmissed: {', '.join(missed)}")
    return min(total[1], total[2]), total[0]


def held_out() -> tuple[int, int, int]:
    items = [json.loads(line) for line in (corpus.HERE / "heldout.jsonl").read_text().splitlines() if line]
    found = sum(bool(untrusted.scan(i["text"])) for i in items)
    sound = sum(corpus.fence_is_sound(untrusted.fence(i["text"]), OPENS, "\n" + untrusted.FENCE_CLOSE)
                for i in items)
    print(f"\nheld-out variants (tests/injection/heldout.jsonl, written after tuning, never tuned on): "
          f"detected {pct(found, len(items))}; fenced soundly {pct(sound, len(items))}")
    held_out_round_4()
    return found, sound, len(items)


def held_out_round_4() -> None:
    """tests/injection/heldout4.jsonl: written before the fourth tuning round (never tuned on), per technique;
    fence-close variants also count whether their marker was neutralized."""
    items = [json.loads(line) for line in (corpus.HERE / "heldout4.jsonl").read_text().splitlines() if line]
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for item in items:
        per[item["technique"]][0] += 1
        per[item["technique"]][1] += bool(untrusted.scan(item["text"]))
    markers = [i for i in items if i["technique"] == "fence_close"]
    removed = sum(untrusted.MARKER_REMOVED in untrusted.fence(i["text"]) for i in markers)
    rows = ", ".join(f"{t} {pct(d, n)}" for t, (n, d) in sorted(per.items()))
    print(f"held-out round 4 (tests/injection/heldout4.jsonl): detected "
          f"{pct(sum(d for _, d in per.values()), len(items))} ({rows}); markers neutralized {pct(removed, len(markers))}")


def false_positives() -> list[tuple[int, int]]:
    print("\n| ordinary text | pages | flagged (false positives) |\n|---|---|---|")
    out = []
    for name, texts in clean_sets().items():
        flagged = sum(bool(untrusted.scan(t)) for t in texts)
        print(f"| {name} | {len(texts)} | {pct(flagged, len(texts))} |")
        out.append((flagged, len(texts)))
    return out


def soundness() -> int:
    hostile = corpus.hostile()
    unsound = [h["id"] for h in hostile
               if not corpus.fence_is_sound(untrusted.fence(h["text"]), OPENS, "\n" + untrusted.FENCE_CLOSE)]
    print(f"\nfenced hostile variants with no closing-marker spelling inside: {pct(len(hostile) - len(unsound), len(hostile))}")
    return len(unsound)


def speed() -> None:
    texts = [t for ts in clean_sets().values() for t in ts]
    times = []
    for text in texts:
        detect._CACHE.clear()
        started = time.perf_counter()
        untrusted.fence(text)
        times.append(time.perf_counter() - started)
    size = sum(len(t) for t in texts)
    times.sort()
    print(f"\nscan + fence of {len(texts)} ordinary pages ({size / 1e6:.1f} MB): median "
          f"{statistics.median(times) * 1000:.2f} ms, p95 {times[int(0.95 * len(times))] * 1000:.1f} ms, "
          f"max {times[-1] * 1000:.0f} ms, {size / sum(times) / 1e6:.2f} MB/s")


def main() -> int:
    print("## Detection (tests/injection/hostile.jsonl)\n")
    detected, hostile = detection()
    held_out()
    fps = false_positives()
    unsound = soundness()
    speed()
    fp_clean = fps[0][0] / fps[0][1]
    ok = detected / hostile >= 0.95 and fp_clean <= 0.05 and unsound == 0
    print(f"\ndetection {100.0 * detected / hostile:.1f} % (target >= 95), false positives on the clean corpus "
          f"{100.0 * fp_clean:.1f} % (target <= 5), unsound fences {unsound} (target 0)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
