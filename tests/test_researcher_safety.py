"""researcher safety: no path escapes a repository or GSD_RESEARCH_HOME, MCP errors are marked, two indexers
serialize, and the index (the user's private documents) is readable by its owner only."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.researcher_fixtures import kb, make_repo, seed_model

BIN = Path(sys.executable).parent
SECRET = "hunter2-correct-horse-battery"


@pytest.fixture
def model(home):
    return seed_model()


def _write_config(home: Path, repos: list[dict]) -> None:
    import yaml

    (home / "researcher.yaml").write_text(yaml.safe_dump({"repositories": repos}))


@pytest.mark.parametrize("bad", ["../../x", "..", "a/b", "/abs", ".hidden", "x" * 80])
def test_a_repository_name_from_the_config_file_is_validated(tmp_path, home, bad):
    victim = tmp_path / "x"
    victim.mkdir()
    (victim / "keep.txt").write_text("must survive")
    docs = make_repo(tmp_path / "docs", {"a.md": "# A\n\nalpha\n"})
    _write_config(home, [{"name": bad, "path": str(docs)}])

    for args in (("repo", "remove", bad), ("index",), ("index", bad), ("repo", "list"), ("status",),
                 ("search", "alpha"), ("remove", bad, "a.md")):
        res = kb(*args, "--json")

        assert res.code == 2, (args, res.stdout)
        assert res.json["error"]["code"] == "USAGE_ERROR"
        assert "researcher.yaml" in res.json["error"]["message"]
    assert (victim / "keep.txt").read_text() == "must survive"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["docs", "gsd-home", "user-home", "x"])


def test_repository_names_are_validated_on_every_command(tmp_path, home):
    (tmp_path / "x").mkdir()
    for args in (("index", "../x"), ("status", "../x"), ("remove", "../x", "a.md"), ("repo", "remove", "../x"),
                 ("search", "q", "--repo", "../x"), ("config", "set", "repositories.../x.path", "/tmp")):
        res = kb(*args, "--json")

        assert res.code in (2, 4), args
        assert res.json["error"]["code"] in ("USAGE_ERROR", "REPOSITORY_NOT_FOUND")
    assert (tmp_path / "x").is_dir()


def test_symlinks_out_of_the_repository_are_skipped_and_named(tmp_path, model):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\nThe password is {SECRET}.\n")
    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nThe axolotl regrows limbs.\n",
                                         "sub/b.md": "# B\n\nThe password policy is documented here.\n"})
    (root / "leak.md").symlink_to(outside / "secret.md")
    (root / "sub" / "leakdir").symlink_to(outside, target_is_directory=True)
    (root / "inside.md").symlink_to(root / "a.md")  # a link that stays inside is fine
    kb("repo", "add", "r", str(root), "--json")

    out = kb("index", "r", "--json").json["results"][0]

    assert out["skipped"] == [{"document_path": "leak.md", "reason": "outside"},
                              {"document_path": "sub/leakdir", "reason": "outside"}]
    assert out["documents_indexed"] == 3
    answer = kb("search", SECRET, "--json", "--fragments", "20", "--documents", "20").json
    assert SECRET not in json.dumps([answer["documents"], answer["fragments"]])
    assert {d["document_path"] for d in answer["documents"]} <= {"a.md", "sub/b.md", "inside.md"}
    status = kb("status", "r", "--json").json["repositories"][0]
    assert status["total_documents"] == 3


def test_a_symlink_swapped_in_after_the_walk_is_not_read(tmp_path, model):
    from gsd_research.researcher.gateways.filesystem_gateway import FilesystemGateway, OutsideRepository

    outside = tmp_path / "secret.md"
    outside.write_text(SECRET)
    root = make_repo(tmp_path / "repo", {"a.md": "alpha"})
    fs = FilesystemGateway(root)
    (root / "a.md").unlink()
    (root / "a.md").symlink_to(outside)

    for call in (lambda: fs.absolute("a.md"), lambda: fs.compute_checksum("a.md"), lambda: fs.absolute("../secret.md"),
                 lambda: fs.absolute("/etc/passwd")):
        with pytest.raises(OutsideRepository):
            call()
    assert not fs.includes("a.md", ["md"])


def test_mcp_add_and_remove_refuse_paths_outside_the_repository(tmp_path, home, model):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nalpha\n"})
    (tmp_path / "outside.md").write_text(f"# Outside\n\n{SECRET}\n")
    (root / "link.md").symlink_to(tmp_path / "outside.md")
    kb("repo", "add", "r", str(root), "--json")
    kb("index", "r", "--json")
    tools = KnowledgeBaseTools(ServiceFactory())

    for path in ("../outside.md", str(tmp_path / "outside.md"), "link.md", "sub/../../outside.md", "/etc/passwd"):
        res = tools.add_to_index("r", path)

        assert res["success"] is False, path
        assert res["error"]["code"] in ("DOCUMENT_NOT_FOUND", "USAGE_ERROR"), res
    for path in ("../outside.md", "../../etc/passwd"):
        assert tools.remove_from_index("r", path)["success"] is False
    assert tools.add_to_index("../..", "a.md")["error"]["code"] == "USAGE_ERROR"
    assert SECRET not in json.dumps(tools.search_fragments(SECRET, None, 20)["fragments"])
    assert tools.add_to_index("r", "a.md")["success"] is True


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_index_state_is_private(tmp_path, home, model):
    os.umask(0o022)  # a permissive umask, as on many desktops
    kb("repo", "add", "p", str(make_repo(tmp_path / "repo")), "--json")
    assert kb("index", "p", "--json").code == 0

    repo_dir = home / "repositories" / "p"
    assert _mode(home / "repositories") == 0o700
    assert _mode(repo_dir) == 0o700
    for name in ("lexical.sqlite", "state.jsonl"):
        assert _mode(repo_dir / name) == 0o600, name
    chroma = repo_dir / "chroma"
    assert _mode(chroma) == 0o700
    for path in chroma.rglob("*"):
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
    for path in repo_dir.rglob("*"):
        assert not _mode(path) & 0o077, path


def test_a_second_indexer_waits_for_the_first(tmp_path, home, model):
    docs = {f"n{i:02d}.md": f"# Note {i}\n\n" + " ".join(f"word{i}x{k}" for k in range(60)) + "\n" for i in range(40)}
    kb("repo", "add", "busy", str(make_repo(tmp_path / "repo", docs)), "--json")
    cmd = [str(BIN / "researcher"), "index", "busy", "--json"]

    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    outs = [p.communicate(timeout=300) for p in (first, second)]

    results = [json.loads(out)["results"][0] for out, _ in outs]
    assert sum(r["documents_indexed"] for r in results) == 40  # embedded once, not twice
    assert sorted(r["documents_skipped"] for r in results) == [0, 40]
    assert any("waiting" in err for _, err in outs)


def test_a_held_lock_names_its_holder(tmp_path, home, model):
    kb("repo", "add", "held", str(make_repo(tmp_path / "repo")), "--json")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom gsd_research.researcher.gateways.lock_gateway import RepositoryLock\n"
         "with RepositoryLock(sys.argv[1], 'test holder').hold(wait=0):\n    print('held', flush=True)\n    time.sleep(60)\n",
         str(home / "repositories" / "held")], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        res = kb("index", "held", "--json", "--wait", "1")
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()

    assert (res.code, res.json["error"]["code"]) == (1, "LOCKED")
    assert str(holder.pid) in res.json["error"]["message"] and "test holder" in res.json["error"]["message"]
    assert 1 <= waited < 10
    assert kb("index", "held", "--json").json["results"][0]["documents_indexed"] == 4  # the lock died with it


def test_state_files_planted_as_symlinks_are_not_followed(tmp_path, home, model):
    """index.lock is truncated by its holder and lexical.sqlite written: a symlink put in their place must not make
    the indexer truncate or write the file it points at."""
    kb("repo", "add", "s", str(make_repo(tmp_path / "repo")), "--json")
    state = home / "repositories" / "s"
    state.mkdir(parents=True)
    victims = {}
    for name in ("index.lock", "lexical.sqlite"):
        victims[name] = tmp_path / f"victim-{name}"
        victims[name].write_text(f"precious {name}")
        (state / name).symlink_to(victims[name])

    out = kb("index", "s", "--json")

    assert out.code == 0 and out.json["results"][0]["documents_indexed"] == 4
    for name, victim in victims.items():
        assert victim.read_text() == f"precious {name}", name
        assert not (state / name).is_symlink(), name
