"""A keyword index deleted, emptied or cut short by hand: search names it (INDEX_DAMAGED, with the fix) instead of
answering by meaning alone, which buried exact identifiers without a word; status reports it; no read creates an
empty index in its place; the advice works when followed literally; `index` repairs it."""

from __future__ import annotations

import re
import shlex
import sqlite3
from pathlib import Path

import pytest

from tests.researcher_fixtures import kb, make_repo, recorded, seed_model
from tests.test_researcher_vectors_lost import next_process

# the identifier sits in a document whose words say little; its neighbours say more about "cold caches"
DOCS = {
    "a.md": "# Cold caches\n\nThe widget cache is cold after a restart; warm caches answer quickly.\n",
    "b.md": "# Codes\n\nThe frobnicator reports ERRCODE_7712 when its spool folder is full.\n",
    "c.md": "# Cache sizes\n\nA cold widget cache and a warm widget cache hold the same entries.\n",
}
QUERY = "ERRCODE_7712 cold widget cache"


@pytest.fixture
def indexed(tmp_path, home):
    seed_model()
    assert kb("repo", "add", "r", str(make_repo(tmp_path / "repo", DOCS)), "--json").code == 0
    assert kb("index", "r", "--json").json["results"][0]["documents_indexed"] == 3
    assert _top(kb("search", QUERY, "--repo", "r", "--json")) == "b.md"
    return home / "repositories" / "r" / "lexical.sqlite"


def _top(result) -> str:
    assert result.code == 0, result.stdout
    return result.json["documents"][0]["document_path"]


def _hurt(db: Path, kind: str) -> None:
    next_process()  # the commands before have let go of it, as their processes would have
    if kind == "deleted":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        return
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM fragments" + ("" if kind == "emptied" else " WHERE document_path = 'b.md'"))
    conn.close()


def _followed(suggestion: str) -> list[str]:
    """The command a "Meanwhile: researcher search …" advice names, as a user would type it."""
    command = suggestion.split("Meanwhile: ", 1)[1].split(" (", 1)[0]
    words = shlex.split(command)
    assert words[:2] == ["researcher", "search"], suggestion
    return words[1:]


@pytest.mark.parametrize("kind", ["deleted", "emptied", "cut_short"])
def test_a_lost_keyword_index_is_named_by_search_and_status_then_indexed_again(indexed, kind):
    _hurt(indexed, kind)

    hybrid = kb("search", QUERY, "--repo", "r", "--json")
    error = hybrid.json["error"]
    assert hybrid.code != 0 and error["code"] == "INDEX_DAMAGED" and str(indexed) in error["message"], hybrid.stdout
    assert ("is missing" if kind == "deleted" else f"holds {2 if kind == 'cut_short' else 0} of the 3") \
        in error["message"]
    run, meanwhile = error["suggestions"]
    assert run.startswith("Run: researcher index r ")
    by_meaning = kb(*_followed(meanwhile), QUERY, "--json")  # the advice, literally, with the query
    assert by_meaning.code == 0 and by_meaning.json["metadata"]["mode"] == "vector", by_meaning.stdout
    lexical = kb("search", QUERY, "--repo", "r", "--mode", "lexical", "--json").json["error"]
    assert lexical["code"] == "INDEX_DAMAGED" and lexical["suggestions"] == [run]  # no store it has not checked
    status = kb("status", "r", "--json").json["repositories"][0]
    assert status["damaged"] and str(indexed) in status["damaged"] and "researcher index r" in status["damaged"]
    human = kb("search", QUERY, "--repo", "r")
    assert human.code != 0 and "INDEX_DAMAGED" in human.stderr and "researcher index r" in human.stderr
    if kind == "deleted":
        assert not indexed.exists()  # neither search nor status created an empty one

    repaired = kb("index", "r", "--json").json["results"][0]

    assert "keyword index" in repaired["repaired"] and repaired["documents_indexed"] == (1 if kind == "cut_short"
                                                                                        else 3), repaired
    next_process()
    assert _top(kb("search", QUERY, "--repo", "r", "--json")) == "b.md"
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None


def test_a_search_of_all_repositories_leaves_it_out_and_names_it(indexed, tmp_path):
    kb("repo", "add", "ok", str(make_repo(tmp_path / "ok", {"o.md": "# O\n\nA cold widget cache, again.\n"})))
    assert kb("index", "ok", "--json").code == 0
    _hurt(indexed, "deleted")

    found = kb("search", QUERY, "--json")

    assert found.code == 0 and {d["repository"] for d in found.json["documents"]} == {"ok"}, found.stdout
    [left_out] = found.json["metadata"]["skipped_repositories"]
    assert left_out["repository"] == "r" and left_out["fix"] == "researcher index r" and str(indexed) in \
        left_out["message"]
    assert found.json["metadata"]["repositories"] == ["ok"]


def test_an_mcp_client_and_the_resident_process_are_told_too(indexed):
    from gsd_research.researcher import resident
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.resident_server import Server
    from gsd_research.researcher.service_factory import ServiceFactory

    server = Server()
    assert server.warm() is not None
    _hurt(indexed, "emptied")  # emptied in place: the file stays, the warm process is not stale

    tools = KnowledgeBaseTools(ServiceFactory())
    damaged = tools.search_documents(QUERY, "r")
    assert damaged["error"]["code"] == "INDEX_DAMAGED" and any('mode "vector"' in s for s in
                                                                damaged["error"]["suggestions"])
    assert tools.search_documents(QUERY, "r", mode="vector")["success"] is True
    reply, stop = server.answer({"query": QUERY, "repo": "r", "n_fragments": 5, "n_documents": 5, "mode": "hybrid",
                                 "max_tokens": 2000, "v": resident.PROTOCOL, "key": server.key})
    assert stop is False and "ok" not in reply and "fallback" in reply, reply  # the caller's own search names it


def test_a_healthy_index_and_a_memory_style_partial_write_are_not_taken_for_damage(indexed):
    """More keyword rows than the index records (research memory writes them ahead of the embedding) is no damage;
    nor is a repository never indexed."""
    conn = sqlite3.connect(indexed)
    with conn:
        conn.execute("INSERT INTO fragments (fragment_id, text, document_path, fragment_index, breadcrumb) "
                     "VALUES ('x:0', 'a note written ahead', 'x.md', 0, '')")
    conn.close()
    next_process()

    assert _top(kb("search", QUERY, "--repo", "r", "--json")) == "b.md"
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None


def _garbled(db: Path) -> None:
    next_process()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"not a database " * 400)


@pytest.mark.parametrize("kind", ["garbled", "deleted"])
def test_writing_one_document_into_a_damaged_index_refuses_instead_of_emptying_the_repository(indexed, kind):
    """Regression: `researcher remove` or the MCP `add_to_index` on a repository whose keyword index was damaged
    set it aside and reset the whole repository, then wrote (or removed) one document: every other document was
    gone from both stores, and status and search said nothing."""
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    home = indexed.parent.parent.parent
    checksums = recorded(indexed.parent)
    _garbled(indexed) if kind == "garbled" else _hurt(indexed, "deleted")

    removed = kb("remove", "r", "a.md", "--json")
    added = KnowledgeBaseTools(ServiceFactory()).add_to_index("r", "c.md")

    for error in (removed.json["error"], added["error"]):
        assert error["code"] == "INDEX_DAMAGED" and str(indexed) in error["message"], error
        assert error["suggestions"][0].startswith("Run: researcher index r "), error
    assert recorded(indexed.parent) == checksums  # nothing forgotten
    assert kb("status", "r", "--json").json["repositories"][0]["total_documents"] == 3
    assert not list(indexed.parent.glob("lexical.sqlite.damaged-*"))  # set aside by the index run only
    assert kind == "garbled" or not indexed.exists()

    repaired = kb("index", "r", "--json").json["results"][0]

    assert repaired["repaired"] and repaired["documents_indexed"] == 3, repaired
    next_process()
    assert _top(kb("search", QUERY, "--repo", "r", "--json")) == "b.md"
    assert kb("remove", "r", "a.md", "--json").code == 0
    assert kb("status", "r", "--json").json["repositories"][0]["total_documents"] == 2
    assert not (home / "logs" / "errors.log").exists()


@pytest.mark.parametrize("kind", ["folder", "link", "foreign"])
def test_something_else_in_place_of_the_keyword_index_is_named_never_written_and_moved_aside(indexed, tmp_path, kind):
    """A folder there made every command of every repository fail with STATE_NOT_WRITABLE and advice that repaired
    nothing; a link was replaced by an empty index; another SQLite database was written into."""
    _hurt(indexed, "deleted")
    target = tmp_path / "elsewhere.sqlite"
    if kind == "folder":
        indexed.mkdir()
    else:
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE notes (x)")
        conn.commit()
        conn.close()
        indexed.symlink_to(target) if kind == "link" else indexed.write_bytes(target.read_bytes())
    before = target.read_bytes() if kind == "link" else None

    alone = kb("search", QUERY, "--repo", "r", "--json").json["error"]
    status = kb("status", "--json").json["repositories"][0]["damaged"]

    assert alone["code"] == "INDEX_DAMAGED" and str(indexed) in alone["message"], alone
    assert ("another SQLite database" if kind == "foreign" else "not a regular file") in alone["message"], alone
    assert status and "researcher index r" in status
    repaired = kb("index", "r", "--json").json["results"][0]
    assert repaired["documents_indexed"] == 3 and repaired["repaired"], repaired
    next_process()
    assert _top(kb("search", QUERY, "--repo", "r", "--json")) == "b.md"
    aside = list(indexed.parent.glob("lexical.sqlite.damaged-*"))
    if kind == "link":
        assert target.read_bytes() == before  # the link's target never written
        assert [p.is_symlink() for p in aside] == [True]
    if kind == "foreign":  # moved aside as it was: no keyword index written into it
        assert len(aside) == 1 and aside[0].read_bytes() == target.read_bytes()


def test_a_recorded_count_edited_by_hand_is_corrected_by_the_index_run_its_advice_names(indexed):
    meta = indexed.parent / "state.jsonl"
    meta.write_text(re.sub(r'"fragments": ?3\b', '"fragments": 999999', meta.read_text(), count=1))
    assert "999999" in meta.read_text()
    next_process()
    damaged = kb("search", QUERY, "--repo", "r", "--json").json["error"]
    assert damaged["code"] == "INDEX_DAMAGED" and damaged["suggestions"][0].startswith("Run: researcher index r")

    assert kb("index", "r", "--json").code == 0

    assert _top(kb("search", QUERY, "--repo", "r", "--json")) == "b.md" and "999999" not in meta.read_text()


def test_the_human_answer_names_the_repositories_left_out_even_when_nothing_found_fits(indexed, tmp_path):
    kb("repo", "add", "ok", str(make_repo(tmp_path / "ok", {"o.md": "# O\n\n" + "A cold widget cache. " * 80})))
    assert kb("index", "ok", "--json").code == 0
    _hurt(indexed, "deleted")

    seen = 0
    for budget in range(150, 400, 25):
        human = kb("search", "cold widget cache", "--max-tokens", str(budget))
        flat = " ".join(human.stdout.split())
        if human.code != 0 or "Nothing found fits" not in flat:
            continue
        seen += 1
        assert "left out r (INDEX_DAMAGED)" in flat and "Run: researcher index r" in flat, human.stdout
    assert seen, "no budget left nothing that fits"


def test_the_human_answer_names_a_repository_not_indexed_that_a_search_of_all_left_out(indexed, tmp_path):
    kb("repo", "add", "later", str(make_repo(tmp_path / "later", {"l.md": "# L\n\nA cold widget cache.\n"})))

    human = kb("search", QUERY)
    machine = kb("search", QUERY, "--json")

    assert machine.json["metadata"]["not_indexed"] == ["later"]
    flat = " ".join(human.stdout.split())
    assert human.code == 0 and "not indexed, left out: later. Run: researcher index later" in flat, human.stdout


def test_many_damaged_repositories_are_named_briefly_and_leave_room_for_the_answer(indexed, tmp_path):
    """Regression: ten damaged repositories with long names took the whole budget (USAGE_ERROR "envelope alone
    needs 848" at --max-tokens 800, no documents at 900)."""
    names = [f"damaged-repository-with-a-long-name-{i:02d}" for i in range(10)]
    for name in names:
        kb("repo", "add", name, str(make_repo(tmp_path / name, {"x.md": f"# X\n\nNothing about {name}.\n"})))
        assert kb("index", name, "--json").code == 0
        _hurt(indexed.parent.parent / name / "lexical.sqlite", "deleted")

    found = kb("search", QUERY, "--json", "--max-tokens", "800")
    human = kb("search", QUERY, "--max-tokens", "800")

    assert found.code == 0 and found.json["documents"][0]["document_path"] == "b.md", found.stdout
    left_out = found.json["metadata"]["skipped_repositories"]
    assert sorted(s["repository"] for s in left_out) == names
    assert all(s["fix"] == f"researcher index {s['repository']}" and "message" not in s for s in left_out)
    flat = " ".join(human.stdout.split())
    assert human.code == 0 and f"left out {names[0]} (INDEX_DAMAGED). Run: researcher index {names[0]}" in flat
    roomy = kb("search", QUERY, "--json", "--max-tokens", "6000").json["metadata"]["skipped_repositories"]
    assert all("message" in s for s in roomy)  # told in full where the budget has room


def test_with_every_repository_damaged_the_error_names_them_all_and_one_index_run_repairs_them(indexed, tmp_path):
    kb("repo", "add", "ok", str(make_repo(tmp_path / "ok", {"o.md": "# O\n\nA cold widget cache, again.\n"})))
    assert kb("index", "ok", "--json").code == 0
    _hurt(indexed, "deleted")
    _garbled(indexed.parent.parent / "ok" / "lexical.sqlite")

    error = kb("search", QUERY, "--json").json["error"]

    assert error["code"] == "INDEX_DAMAGED" and "ok too" in error["message"], error
    assert error["suggestions"] == ["Run: researcher index (repairs every repository's index)"]
    assert kb("index", "--json").code == 0  # the advice, literally
    next_process()
    found = kb("search", QUERY, "--json")
    assert found.code == 0 and found.json["documents"][0]["document_path"] == "b.md", found.stdout
    assert "skipped_repositories" not in found.json["metadata"]


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_file_or_a_link_in_place_of_a_repository_state_folder_is_moved_aside_by_index(indexed, tmp_path, kind):
    """Regression: `researcher index r` failed with STATE_NOT_WRITABLE and advice to make the home writable."""
    state = indexed.parent
    elsewhere = tmp_path / "elsewhere"
    next_process()
    state.rename(elsewhere)
    state.write_text("hi\n") if kind == "file" else state.symlink_to(elsewhere, target_is_directory=True)
    before = sorted(p.name for p in elsewhere.iterdir())

    if kind == "file":
        assert kb("search", QUERY, "--json").json["error"]["code"] == "NOT_FOUND"  # "Not indexed yet"

    out = kb("index", "r", "--json")

    assert out.code == 0 and "moved aside" in out.json["results"][0]["repaired"], out.stdout
    assert state.is_dir() and not state.is_symlink() and sorted(p.name for p in elsewhere.iterdir()) == before
    next_process()
    assert _top(kb("search", QUERY, "--repo", "r", "--json")) == "b.md"
