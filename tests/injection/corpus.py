"""The injection corpora and the measurements shared by tests/test_injection_corpus.py and bench/injection.py.

- hostile.jsonl: instruction-like variants, one JSON object a line (`id`, `technique`, `text`; invisible
  characters as \\u escapes): invisible characters, homoglyphs and case, Markdown and HTML hiding,
  fence-close spellings, instructions split over lines, role tags, multilingual.
- clean/*.md: ordinary technical pages (install steps with sudo and rm -rf, secrets handling, chat API
  examples with a system message, a support transcript, a recipe's "Instructions" …): nothing to flag.

`fence_is_sound` checks an output the way a reader would, independently of gsd_research's own folding:
the opening marker first, the closing marker last, and no marker spelling between them once the text
is NFKC-normalized with HTML character references decoded, stripped of format characters and markup, mapped
through look-alikes of a few scripts and read letters-only, forwards and backwards.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
AEB = Path(__file__).resolve().parents[2].parent / "shared" / "bench" / "aeb" / "ground-truth.json"


def hostile() -> list[dict]:
    lines = (HERE / "hostile.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def clean() -> list[dict]:
    return [{"id": p.stem, "text": p.read_text(encoding="utf-8")} for p in sorted((HERE / "clean").glob("*.md"))]


def aeb_articles(aeb: Path = AEB) -> list[dict]:
    """News and blog article bodies of the extraction benchmark's ground truth (when shared/ is present)."""
    if not aeb.is_file():
        return []
    data = json.loads(aeb.read_text(encoding="utf-8"))
    return [{"id": key[:12], "text": value.get("articleBody") or ""} for key, value in sorted(data.items())
            if (value.get("articleBody") or "").strip()]


def embedded(variant: str, page: str) -> str:
    """The variant hidden in the middle of an ordinary page, as an attacker would place it."""
    paragraphs = page.split("\n\n")
    middle = len(paragraphs) // 2
    return "\n\n".join([*paragraphs[:middle], variant, *paragraphs[middle:]])


_LOOKALIKE = str.maketrans("ЕЕНОРСТХУАКМеорсхуакітпѕ" "ꓮꓐꓚꓓꓰꓝꓖꓧꓲꓙꓗꓡꓟꓠꓳꓑꓣꓢꓔꓴꓦꓪꓫꓬꓜ" "ᎪᎠᎬᏀᎻᏦᎷᏢᎡᏚᎢᏙᏔ" "ՍᑌƱⲈⲚⲦⲬ",
                           "EEHOPCTXYAKMeopcxyakitns" "ABCDEFGHIJKLMNOPRSTUVWXYZ" "ADEGHKMPRSTVW" "UUUENTX")
_FORMAT = re.compile(r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f"
                     r"\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f]")


def reader_letters(text: str) -> str:
    """What a careful reader (or a model) would read: NFKC, no format characters, look-alikes mapped,
    markup and punctuation gone, letters only, lower case."""
    text = _FORMAT.sub("", unicodedata.normalize("NFKC", html.unescape(text))).translate(_LOOKALIKE)
    text = re.sub(r"<[^>]{0,200}>|[*_~`]", "", text)
    return re.sub(r"[^a-z]", "", text.lower())


def marker_like(text: str) -> int:
    """How many fence-marker spellings a reader would see in `text` (END UNTRUSTED …, UNTRUSTED TEXT …)."""
    letters = reader_letters(text)
    marker = r"end(?:of)?(?:the)?untrusted|untrusted(?:text|content|data)"
    return len(re.findall(marker, letters)) + len(re.findall(marker, letters[::-1]))  # RTL override: backwards


def fence_is_sound(output: str, open_markers: tuple[str, ...], close_marker: str) -> bool:
    """`output` is one fence: an opening marker first, the closing marker last, nothing marker-like between."""
    head = next((m for m in open_markers if output.startswith(m)), None)
    if head is None or not output.endswith(close_marker) or len(output) < len(head) + len(close_marker):
        return False
    return marker_like(output[len(head): len(output) - len(close_marker)]) == 0


def answer_fence(doc: dict) -> tuple[str, str] | None:
    """(inside, outside) of an answer's one fence as an agent reads the printed JSON: the `untrusted` key (the
    opening marker and notice) opens it, the one `untrusted_end` key closes it, and nothing between them spells
    a fence marker. None when that does not hold."""
    from gsd_research.core.untrusted import END_KEY, FENCE_CLOSE, NOTICE

    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    opening = '"untrusted":' + json.dumps(NOTICE, ensure_ascii=False)
    closing = f'"{END_KEY}":' + json.dumps(FENCE_CLOSE)
    if text.count(opening) != 1 or text.count(closing) != 1:
        return None
    start, end = text.index(opening) + len(opening), text.index(closing)
    if end < start or marker_like(text[start:end]):
        return None
    return text[start:end], text[:start] + text[end:]


def in_fence(doc: dict, value) -> bool:
    """Whether `value` (a string or any JSON value of `doc`) is printed inside the answer's sound fence."""
    fence = answer_fence(doc)
    return fence is not None and json.dumps(value, ensure_ascii=False, separators=(",", ":")) in fence[0]
