"""`researcher search` human output (no --json) holds --max-tokens as printed, like the JSON answer, with the same
exit status; when nothing found fits, one short line says so, naming the budget and how to raise it."""

from __future__ import annotations

import os
import sys

import pytest

from tests.researcher_fixtures import DOCS, indexed_copy, kb

QUERY = "ERR_WIDGET_4711 install the widget toolkit"
LONG = {f"long/part{i}.md": f"# Widget part {i}\n\n" + " ".join(
    f"The widget toolkit install step {i}.{n} checks ERR_WIDGET_4711 and the cache folder before it runs."
    for n in range(40)) + "\n" for i in range(4)}


@pytest.fixture
def indexed(tmp_path, home):
    indexed_copy(tmp_path, home, "docs", {**DOCS, **LONG}, folder="docs")


def both(budget: int, *args: str):
    return (kb("search", QUERY, "--max-tokens", str(budget), *args),
            kb("search", QUERY, "--json", "--max-tokens", str(budget), *args))


@pytest.mark.parametrize("budget", [1, 5, 20, 50, 90, 120, 200])  # from 90: the envelope fits, no passage does
def test_a_budget_the_answer_cannot_have_fails_like_the_json_answer_naming_it(indexed, cl100k, budget):
    human, machine = both(budget)

    assert human.code == machine.code == 2 and machine.json["error"]["code"] == "USAGE_ERROR"
    assert human.stdout == "" and f"--max-tokens {budget}" in human.stderr and "Use --max-tokens" in human.stderr


@pytest.mark.parametrize("columns", ["30", "80", "200"])
@pytest.mark.parametrize("budget", [250, 300, 400, 600, 2000])
def test_the_human_answer_holds_the_budget_as_printed_with_the_json_exit_status(indexed, cl100k, monkeypatch,
                                                                                 columns, budget):
    monkeypatch.setenv("COLUMNS", columns)  # how wide rich draws the table and the rules

    human, machine = both(budget, "--fragments", "20", "--documents", "8")

    assert human.code == machine.code == 0, human.stderr
    assert len(cl100k.encode(human.stdout, disallowed_special=())) <= budget, human.stdout
    found = machine.json["documents"] or machine.json["fragments"]
    if not found:  # no passage fits as the table prints it: one short line naming the budget and how to raise it
        assert human.stdout.count("\n") == 1 and f"--max-tokens {budget}" in human.stdout
        assert "raise it" in human.stdout
    elif machine.json["metadata"]["truncated"]:
        assert "larger --max-tokens" in human.stdout


def test_a_generous_budget_prints_every_passage_whole(indexed, cl100k):
    human, machine = both(20000, "--fragments", "3")

    assert human.code == machine.code == 0 and machine.json["metadata"]["truncated"] is False
    assert "larger --max-tokens" not in human.stdout and "…" not in human.stdout
    assert len(machine.json["fragments"]) == 3
    for f in machine.json["fragments"]:
        assert f["document_path"] in human.stdout


# -- the renderer alone: answers whose human form would not fit (a narrow terminal, colours) ---------------
WORDS = "The widget toolkit install step checks ERR_WIDGET_4711 and the cache folder before it runs again. "


def payload(budget: int, n_docs: int, n_frags: int, words: int = 30) -> dict:
    docs = [{"document_path": f"guide/part-{i}-with-a-rather-long-name.md", "repository": "docs", "score": 1 - i / 100,
             "top_fragments": [{"fragment_id": f"f{i}", "fragment_index": 0, "score": 1.0, "text": WORDS * words}]}
            for i in range(n_docs)]
    frags = [{"fragment_id": f"f{i}", "document_path": docs[i]["document_path"], "repository": "docs",
              "fragment_index": 0, "score": 1 - i / 100, "match": "both", "see": f"documents[{i}].top_fragments[0]"}
             for i in range(n_frags)]
    return {"query": "q", "documents": docs, "fragments": frags,
            "metadata": {"max_tokens": budget, "truncated": False, "tokens_used": budget}}


def printed(capsys, doc: dict) -> str:
    from gsd_research.researcher.render import render

    render("search", doc)
    return capsys.readouterr().out


@pytest.mark.parametrize("columns", ["24", "40", "120"])
def test_the_last_passage_is_cut_then_left_out_until_the_answer_fits(capsys, cl100k, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    budget = 400

    out = printed(capsys, payload(budget, n_docs=3, n_frags=3))

    assert len(cl100k.encode(out, disallowed_special=())) <= budget
    assert "larger --max-tokens (now 400)" in out
    assert columns == "24" or "part-0" in out.replace("\n", "").replace(" ", "")  # 24: rich shortens the names
    assert "ERR_WIDGET_4711" in out and "…" in out  # the first passage, cut


def test_documents_are_left_out_last_and_nothing_fitting_is_said_in_one_line(capsys, cl100k):
    rows = printed(capsys, payload(150, n_docs=12, n_frags=0))
    assert len(cl100k.encode(rows, disallowed_special=())) <= 150 and "part-0" in rows and "part-11" not in rows

    nothing = printed(capsys, payload(40, n_docs=2, n_frags=2))
    assert nothing == "Nothing found fits within --max-tokens 40: raise it, e.g. --max-tokens 500\n"


def test_colours_on_a_terminal_are_not_counted_and_never_cut_into(cl100k, monkeypatch):
    import re
    import select

    from gsd_research.researcher.render import render

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")
    master, slave = os.openpty()
    terminal = os.fdopen(slave, "w", encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", terminal)
    try:
        render("search", payload(300, n_docs=3, n_frags=3))
        terminal.flush()
        chunks = []
        while select.select([master], [], [], 0.5)[0]:
            chunks.append(os.read(master, 65536))
    finally:
        terminal.close()
        os.close(master)
    out = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")

    plain = re.sub("\x1b\\[[0-9;?]*[A-Za-z]", "", out)
    assert "\x1b[" in out and len(cl100k.encode(plain, disallowed_special=())) <= 300 and "…" in plain
    assert len(cl100k.encode(out, disallowed_special=())) > 300  # the colours alone would not have fitted


def test_colours_forced_into_a_pipe_are_counted_as_they_are_received(capsys, cl100k, monkeypatch):
    """FORCE_COLOR set where an agent reads the output (a pipe): the escapes it receives are within the budget."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")

    out = printed(capsys, payload(300, n_docs=3, n_frags=3))

    assert "\x1b[" in out and len(cl100k.encode(out, disallowed_special=())) <= 300 and "…" in out


@pytest.mark.parametrize("columns", ["0", "-3", "abc", "5000", "100000"])
def test_a_width_rich_cannot_use_well_still_prints_the_answer_within_the_budget(capsys, cl100k, monkeypatch, columns):
    """Regression: COLUMNS=0 printed nothing at all; COLUMNS=5000 drew rules of thousands of tokens each, so the
    cutting loop ran for seconds before printing one line."""
    monkeypatch.setenv("COLUMNS", columns)

    out = printed(capsys, payload(400, n_docs=3, n_frags=3))

    assert "ERR_WIDGET_4711" in out and "part-0" in out and "larger --max-tokens (now 400)" in out
    assert len(cl100k.encode(out, disallowed_special=())) <= 400
    assert max(len(line) for line in out.splitlines()) <= 200


def test_a_known_key_in_a_document_or_an_error_is_never_printed(indexed, monkeypatch, capsys):
    """The human output is scrubbed like the JSON answer: a document holding the user's own key (a .env pasted in
    notes) shows *** in both, before rich can wrap the key across two lines."""
    monkeypatch.setenv("TAVILY_API_KEY", "ERR_WIDGET_4711")
    monkeypatch.setenv("COLUMNS", "40")

    human, machine = both(2000)
    failed = kb("search", QUERY, "--repo", "no-such-ERR_WIDGET_4711")

    assert human.code == machine.code == 0 and failed.code != 0 and failed.stderr
    for text in (human.stdout, machine.stdout, failed.stdout + failed.stderr):
        assert "4711" not in text and "***" in text, text
