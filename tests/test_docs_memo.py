"""docs/answer_memo: a cached docs call prints the answer kept for exactly its inputs, and never another."""

from __future__ import annotations

import json
import os
import stat

import pytest

from gsd_research.docs import answer_memo
from gsd_research.docs import command as docs_command


@pytest.fixture
def counted(monkeypatch):
    """How many times a docs answer was worked out (not taken from the memo)."""
    calls = []
    real = docs_command.answer

    def answer(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(docs_command, "answer", answer)
    return calls


def kept_files():
    return sorted(answer_memo.memo_dir().glob("*.json"))


def test_a_cached_call_prints_the_kept_answer_which_is_the_answer_worked_out(cli, fake, counted):
    first = cli("docs", "react", "useEffect cleanup")  # reaches Context7: worked out, not kept
    assert first.json["metadata"]["cache_hit"] is False and counted == ["useEffect cleanup"] and not kept_files()
    second = cli("docs", "react", "useEffect cleanup")  # from the HTTP cache: worked out and kept
    assert second.json["metadata"]["cache_hit"] is True and len(counted) == 2 and len(kept_files()) == 1
    third = cli("docs", "react", "useEffect cleanup")  # the kept answer
    assert len(counted) == 2 and third.stdout == second.stdout and third.code == 0

    [path] = kept_files()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0
    answer_memo.clear()
    fourth = cli("docs", "react", "useEffect cleanup")
    assert len(counted) == 3 and fourth.stdout == third.stdout


@pytest.mark.parametrize("other", [("--max-tokens", "900"), ("--json-pretty",), ("--no-cache",)])
def test_another_budget_layout_or_no_cache_works_the_answer_out(cli, fake, counted, other):
    cli("docs", "react", "useEffect cleanup")
    cli("docs", "react", "useEffect cleanup")
    assert len(counted) == 2

    result = cli("docs", "react", "useEffect cleanup", *other)

    assert len(counted) == 3 and result.code == 0
    if other[0] == "--max-tokens":
        assert result.json["metadata"]["max_tokens"] == 900


def test_another_query_or_library_is_its_own_answer(cli, fake, counted):
    for args in (("react", "useEffect cleanup"), ("react", "useEffect cleanup")):
        cli("docs", *args)
    other = cli("docs", "react", "useEffect  cleanup", "dependencies")
    cli("docs", "react", "useEffect  cleanup", "dependencies")
    again = cli("docs", "react", "useEffect  cleanup", "dependencies")
    assert other.json["query"] != "useEffect cleanup" and again.json["query"] == other.json["query"]
    assert len(counted) == 4 and len(kept_files()) == 2  # each query: a miss, a kept answer, then the memo


def test_every_input_and_the_code_change_the_key(monkeypatch):
    base = {"library": "react", "query": "q", "max_tokens": 2000, "pretty": False, "library_id": "/a/b",
            "served_id": "/a/b", "match": ["/a/b", "React"], "pin": {}, "authenticated": False,
            "body": {"codeSnippets": [{"codeTitle": "t"}]}}
    keys = {answer_memo.key(**base)}
    for name, value in (("library", "react@18"), ("query", "q2"), ("max_tokens", 2001), ("pretty", True),
                        ("library_id", "/a/c"), ("served_id", "/a/c"), ("match", ["/a/b", "Other"]),
                        ("pin", {"project_version": "18.2.0"}), ("authenticated", True),
                        ("body", {"codeSnippets": [{"codeTitle": "t2"}]})):
        keys.add(answer_memo.key(**dict(base, **{name: value})))
    assert len(keys) == 11
    monkeypatch.setattr(answer_memo, "code_stamp", lambda: "another version of the code")
    assert answer_memo.key(**base) not in keys


def test_a_change_of_a_loaded_module_changes_the_code_stamp(tmp_path, monkeypatch):
    import sys
    import types

    module = types.ModuleType("gsd_research._memo_probe")
    module.__file__ = str(tmp_path / "probe.py")
    (tmp_path / "probe.py").write_text("A = 1\n")
    monkeypatch.setitem(sys.modules, "gsd_research._memo_probe", module)
    before = answer_memo.code_stamp()
    (tmp_path / "probe.py").write_text("A = 22\n")  # another size
    assert answer_memo.code_stamp() != before


@pytest.mark.parametrize("planted", ["not json", json.dumps({"format": 1, "key": "another", "answer": {"metadata": {}}}),
                                     json.dumps({"format": 1, "key": "SELF", "answer": ["a list"]}),
                                     json.dumps({"format": 99, "key": "SELF", "answer": {"metadata": {}}}),
                                     "symlink"])
def test_a_damaged_or_planted_entry_is_ignored_and_replaced(cli, fake, counted, planted, tmp_path):
    cli("docs", "react", "useEffect cleanup")
    good = cli("docs", "react", "useEffect cleanup").stdout
    [path] = kept_files()
    memo_key = path.stem
    path.unlink()
    outside = tmp_path / "outside.json"
    if planted == "symlink":
        outside.write_text(json.dumps({"format": 1, "key": memo_key, "answer": {"metadata": {}, "forged": 1}}))
        os.symlink(outside, path)
    else:
        path.write_text(planted.replace("SELF", memo_key))

    result = cli("docs", "react", "useEffect cleanup")

    assert result.stdout == good and len(counted) == 3 and "forged" not in result.stdout
    recorded = json.loads(path.read_text())["expires"]
    assert not path.is_symlink() and answer_memo.get(memo_key, recorded) is not None  # a good entry in its place
    if planted == "symlink":
        assert "forged" in outside.read_text()  # the link's target is left as it was


def test_cache_clear_removes_kept_answers(cli, fake):
    cli("docs", "react", "useEffect cleanup")
    cli("docs", "react", "useEffect cleanup")
    assert kept_files()

    assert cli("cache", "clear", "--expired").json["docs_answers_removed"] == 0
    assert kept_files()  # its HTTP answers are fresh: kept (see test_docs_memo_expiry.py for expired ones)
    assert cli("cache", "clear").json["docs_answers_removed"] == 1
    assert not kept_files()


def test_the_oldest_entries_go_beyond_the_limit_and_known_keys_are_scrubbed(monkeypatch):
    from gsd_research.core import secrets

    monkeypatch.setattr(answer_memo, "MAX_ENTRIES", 3)
    monkeypatch.setattr(secrets, "known_secrets", lambda config=None: ["ctx7sk-canary-0123456789"])
    for n in range(5):
        answer_memo.put(f"k{n}", {"metadata": {"note": f"n{n} ctx7sk-canary-0123456789"}}, None)
        os.utime(answer_memo.memo_dir() / f"k{n}.json", (1000 + n, 1000 + n))
    assert [p.stem for p in kept_files()] == ["k2", "k3", "k4"]
    assert "canary" not in (answer_memo.memo_dir() / "k4.json").read_text()
    assert answer_memo.get("k4", None) == {"metadata": {"note": "n4 ***"}}


def test_a_lone_surrogate_in_context7s_answer_is_kept_and_printed_like_the_first_time(cli, fake, counted):
    fake.state["context7.body"] = (b'{"codeSnippets":[{"codeTitle":"T \\ud800 x","codeDescription":"desc",'
                                   b'"codeLanguage":"py","codeId":"https://github.com/a/b#_snippet_0",'
                                   b'"pageTitle":"P","codeList":[{"language":"py","code":"x=1"}]}],"infoSnippets":[]}')
    outputs = [cli("docs", "react", "hooks") for _ in range(3)]

    assert [o.code for o in outputs] == [0, 0, 0] and outputs[1].stdout == outputs[2].stdout
    assert "\ufffd" in outputs[2].json["results"][0]["title"] and len(kept_files()) == 1 and len(counted) == 2


def test_a_symlink_in_place_of_the_memo_folder_is_never_followed(cli, fake, tmp_path):
    project = tmp_path / "elsewhere"
    project.mkdir()
    (project / "package.json").write_text("{}")
    folder = answer_memo.memo_dir()
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(project, target_is_directory=True)

    cli("docs", "react", "useEffect cleanup")
    second = cli("docs", "react", "useEffect cleanup")  # kept: the link was removed and a folder made
    assert second.code == 0 and not folder.is_symlink() and len(kept_files()) == 1
    assert sorted(p.name for p in project.iterdir()) == ["package.json"]

    answer_memo.clear()
    folder.rmdir()
    folder.symlink_to(project, target_is_directory=True)
    assert cli("cache", "clear").json["docs_answers_removed"] == 0
    assert not folder.exists() and (project / "package.json").exists()


@pytest.mark.parametrize("how", ["group-writable folder", "another user's file", "fifo", "envelope keys"])
def test_an_entry_others_could_have_written_or_that_is_not_a_docs_answer_is_not_printed(cli, fake, counted, how):
    cli("docs", "react", "useEffect cleanup")
    good = cli("docs", "react", "useEffect cleanup").stdout
    [path] = kept_files()
    forged = json.dumps({"format": 1, "key": path.stem, "answer": {"metadata": {}, "results": [], "query": "PLANTED"}})
    if how == "group-writable folder":
        path.write_text(forged)
        path.parent.chmod(0o770)
    elif how == "another user's file":
        if os.geteuid() != 0:
            pytest.skip("needs root to give a file to another user")
        path.write_text(forged)
        os.chown(path, 65534, 65534)
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path, 0o600)
    else:
        path.write_text(json.dumps({"format": 1, "key": path.stem,
                                    "answer": {"metadata": {}, "success": False, "exit_code": 9}}))

    import threading

    box = []
    reader = threading.Thread(target=lambda: box.append(answer_memo.get(path.stem, None)), daemon=True)
    reader.start()
    reader.join(5)
    assert box == [None]  # read at once (a FIFO does not block) and refused
    result = cli("docs", "react", "useEffect cleanup")
    assert result.stdout == good and "PLANTED" not in result.stdout and len(counted) == 3
