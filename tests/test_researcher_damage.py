"""The damage matrix of a repository index, one table: each damage is named by search (INDEX_DAMAGED and the
one fix) or is work an index run finds by itself, and after `researcher index r` search answers as before the
damage: the same top five documents, the planted identifier first."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.researcher_fixtures import kb, make_repo, next_process, seed_model

PLANTED = "ERRCODE_7712"
DOCS = {
    "a.md": "# Cold caches\n\nThe widget cache is cold after a restart; warm caches answer quickly.\n",
    "b.md": f"# Codes\n\nThe frobnicator reports {PLANTED} when its spool folder is full.\n",
    "c.md": "# Cache sizes\n\nA cold widget cache and a warm widget cache hold the same entries.\n",
    "d.md": "# Spool\n\nThe spool folder of the frobnicator fills when the widget cache is cold.\n",
    "e.md": "# Restarts\n\nA restart empties every cache; the first requests after it are slow.\n",
    "f.md": "# Okapi\n\nThe okapi is a shy forest animal related to the giraffe.\n",
}
QUERY = f"{PLANTED} cold widget cache"
OTHER = {f"o{i}.md": f"# Other {i}\n\nAn unrelated note {i} about sourdough bread and rye flour.\n" for i in range(12)}


def _top5() -> list[str]:
    out = kb("search", QUERY, "--repo", "r", "--documents", "5", "--json")
    assert out.code == 0, out.stdout
    return [d["document_path"] for d in out.json["documents"]]


def _index(name: str = "r") -> dict:
    out = kb("index", name, "--json")
    assert out.code == 0, out.stdout
    return out.json["results"][0]


def _wipe_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{state / 'lexical.sqlite'}{suffix}").unlink(missing_ok=True)


def _empty_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    with sqlite3.connect(state / "lexical.sqlite") as conn:
        conn.execute("DELETE FROM fragments")


def _garble_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    next_process()
    for suffix in ("-wal", "-shm"):
        Path(f"{state / 'lexical.sqlite'}{suffix}").unlink(missing_ok=True)
    (state / "lexical.sqlite").write_bytes(b"not a database " * 400)


def _wipe_vectors(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    shutil.rmtree(state / "chroma")


def _foreign_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """Another repository's keyword index (holding more fragments than this one records) copied in."""
    kb("repo", "add", "o", str(make_repo(tmp / "other", OTHER)), "--json")
    _index("o")
    mark()
    next_process()
    shutil.copy(state.parent / "o" / "lexical.sqlite", state / "lexical.sqlite")


def _foreign_vectors(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """The vector store of an earlier index of the same name (another repository id) copied back in."""
    next_process()
    shutil.copytree(state / "chroma", tmp / "chroma-earlier")
    assert kb("repo", "remove", "r", "--json").code == 0
    assert kb("repo", "add", "r", str(root), "--json").code == 0
    _index()
    mark()
    next_process()
    shutil.rmtree(state / "chroma")
    shutil.copytree(tmp / "chroma-earlier", state / "chroma")


def _older_record(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """The state record restored from an older copy, the stores newer (a file edited in between)."""
    shutil.copy(state / "state.jsonl", tmp / "state.jsonl")
    (root / "e.md").write_text(DOCS["e.md"] + "\nRestarts are rare.\n")
    _index()
    mark()
    shutil.copy(tmp / "state.jsonl", state / "state.jsonl")


def _older_folder(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """The whole state folder restored from an older copy; files added and edited since."""
    next_process()
    shutil.copytree(state, tmp / "state-earlier")
    (root / "e.md").write_text(DOCS["e.md"] + "\nRestarts are rare.\n")
    (root / "g.md").write_text("# Giraffe\n\nThe giraffe is tall.\n")
    _index()
    mark()
    next_process()
    shutil.rmtree(state)
    shutil.copytree(tmp / "state-earlier", state)


Damage = Callable[[Path, Path, Path, Callable], None]  # calls its last argument just before it harms
MATRIX: list[tuple[str, Damage, str | None]] = [  # (damage, what search says before the repair: None = answers)
    ("keyword index deleted", _wipe_keywords, "is missing"),
    ("keyword index emptied", _empty_keywords, "holds 0 of the"),
    ("keyword index garbled", _garble_keywords, "is damaged"),
    ("vector store deleted", _wipe_vectors, "holds 0 of the"),
    ("another repository's keyword index copied in", _foreign_keywords, "belongs to another index"),
    ("an earlier index's vector store copied in", _foreign_vectors, "belongs to another index"),
    ("state record restored from an older copy", _older_record, "is newer than the state record"),
    ("state folder restored from an older copy", _older_folder, None),
]


@pytest.mark.parametrize("harm, named", [row[1:] for row in MATRIX], ids=[row[0] for row in MATRIX])
def test_every_damage_is_named_then_repaired_by_the_index_run(tmp_path, home, harm, named):
    seed_model()
    root = make_repo(tmp_path / "repo", DOCS)
    assert kb("repo", "add", "r", str(root), "--json").code == 0
    _index()
    state = home / "repositories" / "r"
    before: list[str] = []
    harm(state, root, tmp_path, lambda: before.extend(_top5()))
    next_process()

    diagnosed = kb("search", QUERY, "--repo", "r", "--json")
    status = kb("status", "r", "--json").json["repositories"][0]
    repaired = _index()
    next_process()

    if named is None:
        assert diagnosed.code == 0 and status["damaged"] is None, diagnosed.stdout
    else:
        error = diagnosed.json["error"]
        assert error["code"] == "INDEX_DAMAGED" and named in error["message"], error
        assert error["suggestions"][0].startswith("Run: researcher index r"), error
        assert status["damaged"] and "researcher index r" in status["damaged"], status
    assert repaired["documents_failed"] == 0, repaired
    assert _top5() == before and before[0] == "b.md"
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None
