"""The token estimator and cutter against cl100k (tiktoken, offline BPE files from ../shared)."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from gsd_research.core.tokens import count_tokens, cut_to_tokens, raw_estimate, word_count
from tests.conftest import SHARED


def real(enc, text: str) -> int:
    return len(enc.encode(text, disallowed_special=()))


PROSE = ("The quick brown fox jumps over the lazy dog. Researchers measured olanzapine and calcitriol "
         "levels in 1,234 patients (p < 0.001)! Was the effect real? Yes: it held across cohorts.\n\n")
CODE = '''def fetch(url: str, *, timeout: float = 10.0) -> dict:
    """Fetch `url` and return its JSON."""
    resp = requests.get(url, timeout=timeout)
    if resp.status_code != 200:
        raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:200]!r}")
    return resp.json()
'''
UNICODE = "Größenordnung naïve café — 東京都は日本の首都です。Привет, мир! 🚀🔥 ∑x² ≤ ∞ \u200b tab\there"


@pytest.mark.parametrize("text", [PROSE, CODE, UNICODE, json.dumps({"a": [1, 2, 3], "b": "x\ny"}), "   \n\n\t",
                                  "a" * 500, "0123456789" * 40, "https://example.com/a/b?c=d&e=f#g"])
def test_estimate_is_never_below_cl100k(cl100k, text):
    assert count_tokens(text) >= real(cl100k, text)


@pytest.mark.parametrize("text", [PROSE, CODE, "Hello, world! " * 50])
def test_raw_estimate_is_exact_on_ascii(cl100k, text):
    assert raw_estimate(text) == real(cl100k, text)


def test_estimate_holds_on_scientific_abstracts(cl100k):
    path = SHARED / "bench" / "scifact" / "corpus.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} not available")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for _, line in zip(range(300), fh, strict=False)]

    texts = {d["_id"]: d["title"] + "\n\n" + d["text"] for d in docs}
    over = [key for key, text in texts.items() if count_tokens(text) < real(cl100k, text)]

    assert over == []


def test_empty_text_is_zero():
    assert count_tokens("") == 0 and raw_estimate("") == 0


def test_estimate_grows_with_text():
    assert count_tokens(PROSE * 2) > count_tokens(PROSE) > 0


def test_text_that_fits_is_returned_whole():
    assert cut_to_tokens(PROSE, 1000) == (PROSE, False)


@pytest.mark.parametrize("budget", [5, 17, 40, 90, 200])
def test_cut_is_never_over_budget(cl100k, budget):
    text = (PROSE + CODE + UNICODE) * 5

    cut, truncated = cut_to_tokens(text, budget)

    assert truncated
    assert count_tokens(cut) <= budget
    assert real(cl100k, cut) <= budget
    assert text.startswith(cut)


def test_cut_ends_on_a_sentence_boundary_when_one_fits():
    text = " ".join(f"Sentence number {i} says something useful about caching." for i in range(100))

    cut, _ = cut_to_tokens(text, 60)

    assert cut.endswith("caching.")
    assert count_tokens(cut) <= 60
    assert count_tokens(cut) >= 60 * 0.6  # the budget is used, not wasted


def test_cut_prefers_paragraphs_too():
    text = "First paragraph without a full stop\n\nSecond paragraph also without one\n\n" + "word " * 400

    cut, _ = cut_to_tokens(text, 30)

    assert cut.endswith("without one") or cut.endswith("word")


def test_cut_falls_back_to_lines_in_code():
    code = "\n".join(f"    value_{i} = compute({i}, name='x')" for i in range(200))

    cut, _ = cut_to_tokens(code, 50)

    assert code.startswith(cut) and code[len(cut)] == "\n"
    assert count_tokens(cut) <= 50


def test_cut_falls_back_to_words_when_a_sentence_would_waste_the_budget():
    text = "Short. " + "averyveryverylongword " * 300

    cut, _ = cut_to_tokens(text, 100)

    assert cut != "Short."
    assert count_tokens(cut) <= 100 and count_tokens(cut) >= 60


def test_cut_of_text_without_spaces_still_fits():
    text = "x" * 5000

    cut, truncated = cut_to_tokens(text, 10)

    assert truncated and 0 < len(cut) and count_tokens(cut) <= 10


def test_cut_with_zero_budget_is_empty():
    assert cut_to_tokens(PROSE, 0) == ("", True)
    assert cut_to_tokens("", 0) == ("", False)


def test_cut_with_a_custom_measure_respects_it():
    text = 'He said "hi".\n' * 200

    cut, _ = cut_to_tokens(text, 50, measure=lambda s: count_tokens(json.dumps(s)))

    assert count_tokens(json.dumps(cut)) <= 50


def test_cut_of_a_megabyte_of_text_fits_the_budget_and_keeps_its_words():
    text = (PROSE + CODE) * 2000  # ~1 MB

    cut, _ = cut_to_tokens(text, 2000)

    assert count_tokens(cut) <= 2000 and len(re.findall(r"\S+", cut)) > 500


@pytest.mark.parametrize("text, words", [
    ("The widget toolkit installs with pip.", 6),
    ("foo-bar 3.10 e.g. -", 4),  # whitespace separates words where the script uses spaces
    ("缓冲区的默认大小", 8),  # Chinese: a word per character, as word processors count
    ("バッファのサイズは4096バイトです", 15),
    ("该库支持Linux和macOS", 7),
    ("한국어 문장", 2),  # Korean puts spaces between words
    ("", 0),
])
def test_words_are_counted_in_any_script(text, words):
    assert word_count(text) == words
