"""install.sh against hostile input and faults: odd but valid JSON, unexpected errors, two runs at once, runs killed
mid-write, hard links and extended attributes, typed edits, immutable folders, relative paths, the embedding
model it seeds, --gsd-project given oddly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.install_fixtures import (
    GSD_CONFIG,
    INSTALL,
    SETTINGS_REL,
    USER_SETTINGS,
    assert_registered,
    copy_checkout,
    install,
    snapshot,
)

DATA_REL = Path(".local") / "share" / "gsd-research"


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr


def _settings_home(text: str | bytes) -> tuple[Path, Path]:
    user = Path(os.environ["HOME"])
    path = user / SETTINGS_REL
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return user, path


# -- valid JSON Python cannot write back naively ---------------------------------------------------------------

def test_lone_surrogates_in_settings_are_kept_as_escapes(home):
    raw = b'{"a": "\\ud800", "\\udc80key": ["x\\udfff"], "ok": "\\ud83d\\ude00"}'
    user, path = _settings_home(raw)
    before = snapshot(user)

    first = install("--skip-venv", "--no-demo")

    assert first.returncode == 0, first.stderr
    _no_traceback(first)
    written = path.read_bytes()
    written.decode("utf-8")  # valid UTF-8 (a raw surrogate is not)
    merged = json.loads(written)
    assert merged["a"] == "\ud800" and merged["\udc80key"] == ["x\udfff"] and merged["ok"] == "\U0001f600"
    assert_registered(user, merged)
    removed = install("--uninstall")
    assert removed.returncode == 0 and "exactly as it was" in removed.stderr, removed.stderr
    assert snapshot(user) == before


def test_a_gsd_config_with_a_lone_surrogate_is_wired_and_restored(user_home, tmp_path):
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    config = project / ".planning" / "config.json"
    config.write_bytes(b'{"mode": "\\udbff yolo"}')
    before, project_before = snapshot(user_home), snapshot(project)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(project))

    assert proc.returncode == 0, proc.stderr
    _no_traceback(proc)
    wired = json.loads(config.read_bytes().decode("utf-8"))
    assert wired["mode"] == "\udbff yolo" and "global:research-tools" in wired["agent_skills"]["gsd-phase-researcher"]
    assert install("--uninstall").returncode == 0
    assert snapshot(user_home) == before and snapshot(project) == project_before


@pytest.mark.parametrize("levels", [990, 5000])
def test_nesting_deeper_than_the_limit_is_refused_before_any_change(home, levels):
    user, path = _settings_home('{"a": ' + "[" * levels + "]" * levels + "}")
    before = snapshot(user)

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 1, proc.stderr
    assert "more than 200 levels deep" in proc.stderr and "Nothing was changed" in proc.stderr, proc.stderr
    _no_traceback(proc)
    assert snapshot(user) == before


def test_nesting_in_a_gsd_config_is_refused_before_any_change(user_home, tmp_path):
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text('{"x": ' + "[" * 3000 + "]" * 3000 + "}")
    before, project_before = snapshot(user_home), snapshot(project)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(project))

    assert proc.returncode == 1 and "more than 200 levels deep" in proc.stderr, proc.stderr
    _no_traceback(proc)
    assert snapshot(user_home) == before and snapshot(project) == project_before


def test_nesting_within_the_limit_is_merged_and_restored(home):
    user, path = _settings_home('{"a": ' + "[" * 150 + "]" * 150 + "}\n")
    before = snapshot(user)

    assert install("--skip-venv", "--no-demo").returncode == 0
    assert_registered(user, json.loads(path.read_text()))
    removed = install("--uninstall")
    assert removed.returncode == 0 and "exactly as it was" in removed.stderr
    assert snapshot(user) == before


def test_an_unexpected_error_after_changes_rolls_back_with_a_message(user_home, tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    main = checkout / "installer" / "main.py"  # a fault no check foresees, after files and settings were written
    main.write_text(main.read_text().replace(
        "def save_manifest(journal: Journal, manifest: dict) -> None:\n",
        "def save_manifest(journal: Journal, manifest: dict) -> None:\n    raise RuntimeError('disk gremlin')\n"))
    before = snapshot(user_home)

    proc = install("--skip-venv", "--no-demo", script=checkout / "install.sh", env={"GSD_RESEARCH_VENV": sys.prefix})

    assert proc.returncode == 1
    assert "install failed (unexpected RuntimeError: disk gremlin); every change was rolled back" in proc.stderr, \
        proc.stderr
    assert "registered hooks and permissions" in proc.stderr  # it got that far
    _no_traceback(proc)
    assert snapshot(user_home) == before


# -- typed comparison: the user's edit of true to 1 is an edit ---------------------------------------------------

@pytest.mark.parametrize("before_value, edited", [(True, 1), (1, 1.0), (0, False)], ids=["true->1", "1->1.0", "0->false"])
def test_a_users_edit_that_python_calls_equal_is_kept(home, before_value, edited):
    user, path = _settings_home(json.dumps({"flag": before_value, "model": "opus"}))
    assert install("--skip-venv", "--no-demo").returncode == 0
    settings = json.loads(path.read_text())
    settings["flag"] = edited
    path.write_text(json.dumps(settings))

    removed = install("--uninstall")

    assert removed.returncode == 0
    assert "exactly as it was" not in removed.stderr and "your later changes kept" in removed.stderr, removed.stderr
    assert path.read_text() == json.dumps({"flag": edited, "model": "opus"}, indent=2) + "\n"


# -- two runs at once ----------------------------------------------------------------------------------------------

def _popen(script: Path, *args: str, log: Path | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "CLAUDE_CONFIG_DIR", "GSD_RESEARCH_BIN_DIR")}
    env["GSD_RESEARCH_VENV"] = sys.prefix
    err = open(log, "w") if log else subprocess.PIPE  # noqa: SIM115 - closed with the process
    return subprocess.Popen(["bash", str(script), *args], env=env, stdout=subprocess.DEVNULL, stderr=err,
                            text=True, start_new_session=True)


def _wait_for(predicate, timeout: float = 30, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


def _serve_fifo(fifo: Path, stop: threading.Event) -> None:
    """Give every reader of the fifo one short agent file (a reader blocks until then)."""
    while not stop.is_set():
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader yet
            time.sleep(0.02)
            continue
        os.write(fd, b"# gsd research\n")
        os.close(fd)
        time.sleep(0.2)


def test_a_second_install_waits_for_the_first_instead_of_rolling_it_back(user_home, tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    fifo = checkout / "agents" / "zz-blocks.md"
    os.mkfifo(fifo)  # run A stops in the middle of copying (reading it blocks) while it holds its journal
    before = snapshot(user_home)
    journal = user_home / DATA_REL / "install-journal.json"
    a_log, b_log = tmp_path / "a.log", tmp_path / "b.log"
    stop = threading.Event()
    a = _popen(checkout / "install.sh", "--skip-venv", "--no-demo", log=a_log)
    b = None
    try:
        assert _wait_for(lambda: (user_home / ".claude" / "agents" / "research-scout.md").exists()), "A never started"
        b = _popen(checkout / "install.sh", "--skip-venv", "--no-demo", log=b_log)
        assert _wait_for(lambda: "waiting for it to finish" in b_log.read_text()), b_log.read_text()
        assert journal.is_file() and a.poll() is None and b.poll() is None
        threading.Thread(target=_serve_fifo, args=(fifo, stop), daemon=True).start()  # A goes on, then B
        a.wait(timeout=60)
        b.wait(timeout=60)
    finally:
        stop.set()
        for p in (a, b):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    a_err, b_err = a_log.read_text(), b_log.read_text()
    assert a.returncode == 0 and b.returncode == 0, (a_err, b_err)
    assert "rolled back" not in a_err + b_err, (a_err, b_err)
    assert not journal.exists()
    settings = json.loads((user_home / SETTINGS_REL).read_text())
    assert_registered(user_home, settings)
    manifest = json.loads((user_home / DATA_REL / "install-manifest.json").read_text())
    assert manifest["settings"]["backup"] and str(user_home / ".claude" / "agents" / "zz-blocks.md") in manifest["files"]
    removed = install("--uninstall", script=checkout / "install.sh")
    assert removed.returncode == 0 and "exactly as it was" in removed.stderr, removed.stderr
    assert snapshot(user_home) == before


def test_a_journal_whose_run_is_alive_is_not_rolled_back(user_home, tmp_path):
    data = user_home / DATA_REL
    data.mkdir(parents=True)
    fake = tmp_path / "installer" / "main.py"  # a live install.sh run, as the process table shows it
    fake.parent.mkdir()
    fake.write_text("import time\ntime.sleep(60)\n")
    live = subprocess.Popen([sys.executable, str(fake)])
    try:
        journal = data / "install-journal.json"
        mine = user_home / ".claude" / "agents"
        mine.mkdir()
        journal.write_text(json.dumps({"pid": live.pid, "steps": [{"op": "mkdir", "path": str(mine)}]}))
        before = snapshot(user_home)

        proc = install("--skip-venv", "--no-demo")
    finally:
        live.kill()
        live.wait()

    assert proc.returncode == 1 and f"another install.sh run (process {live.pid}) is still working" in proc.stderr
    _no_traceback(proc)
    assert snapshot(user_home) == before  # its journal and what it made are left to it
    again = install("--skip-venv", "--no-demo")  # once it is gone, its journal is rolled back
    assert again.returncode == 0 and "rolled back an install that was interrupted" in again.stderr, again.stderr


# -- killed mid-write: no temporary copy of the user's settings survives ------------------------------------------------

def test_temporary_files_of_a_killed_run_are_removed_by_the_next(user_home):
    data = user_home / DATA_REL
    data.mkdir(parents=True)
    settings = user_home / SETTINGS_REL
    leftovers = [settings.parent / ".settings.json.gsd-research-install.tmp",  # the copy it was writing
                 data / ".install-journal.json.gsd-research-install.tmp"]  # the journal's next version
    for p in leftovers:
        p.write_text(USER_SETTINGS)
    (data / "install-journal.json").write_text(json.dumps(
        {"pid": 2 ** 22 + 7, "steps": [{"op": "create", "path": str(settings.parent / "settings.json")}]}))
    settings.unlink()  # a killed first install had been creating settings.json
    settings.write_text("{}")

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 0 and "rolled back an install that was interrupted" in proc.stderr, proc.stderr
    assert [p for p in leftovers if p.exists()] == []
    assert [p for p in user_home.rglob("*.tmp")] == []


def test_a_run_killed_while_writing_a_large_settings_file_leaves_nothing_after_recovery(home, tmp_path):
    # ~8 MB: the run spends ~0.3 s (far longer under load) between journaling and committing the write
    big = json.dumps({"env": {f"K{i}": "v" * 100 for i in range(70_000)}}).encode()
    user, path = _settings_home(big)
    checkout = copy_checkout(tmp_path / "checkout")
    journal = user / DATA_REL / "install-journal.json"
    proc = _popen(checkout / "install.sh", "--skip-venv", "--no-demo", log=tmp_path / "killed.log")
    try:
        # the journal holds the settings' old bytes once their write begins: kill right then
        assert _wait_for(lambda: journal.is_file() and journal.stat().st_size > len(big), 60, 0.001), \
            (tmp_path / "killed.log").read_text()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    again = install("--skip-venv", "--no-demo", script=checkout / "install.sh", env={"GSD_RESEARCH_VENV": sys.prefix})

    assert again.returncode == 0 and "rolled back an install that was interrupted" in again.stderr, again.stderr
    assert [str(p) for p in user.rglob("*.tmp")] == []
    assert install("--uninstall", script=checkout / "install.sh").returncode == 0
    assert path.read_bytes() == big and [str(p) for p in user.rglob("*.tmp")] == []


# -- the same file: hard links, extended attributes ------------------------------------------------------------------

def _can_xattr(path: Path) -> bool:
    try:
        os.setxattr(path, "user.gsd-test", b"1")
        os.removexattr(path, "user.gsd-test")
        return True
    except (OSError, AttributeError):
        return False


def test_a_hard_linked_settings_file_keeps_its_links_and_attributes(user_home):
    path = user_home / SETTINGS_REL
    twin = user_home / "dotfiles-settings.json"
    os.link(path, twin)
    xattr = _can_xattr(path)
    if xattr:
        os.setxattr(path, "user.origin", b"dotfiles")
    inode = path.stat().st_ino
    before = snapshot(user_home)

    assert install("--skip-venv", "--no-demo").returncode == 0
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2
    assert_registered(user_home, json.loads(twin.read_text()))  # one file: the other name sees the merge
    if xattr:
        assert os.getxattr(path, "user.origin") == b"dotfiles"

    removed = install("--uninstall")
    assert removed.returncode == 0 and "exactly as it was" in removed.stderr, removed.stderr
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2 and twin.read_text() == USER_SETTINGS
    if xattr:
        assert os.getxattr(path, "user.origin") == b"dotfiles"
    assert snapshot(user_home) == before


def test_exactly_is_not_claimed_for_a_file_that_is_no_longer_the_same(user_home):
    path = user_home / SETTINGS_REL
    twin = user_home / "dotfiles-settings.json"
    os.link(path, twin)
    assert install("--skip-venv", "--no-demo").returncode == 0
    merged = path.read_bytes()
    path.unlink()  # an editor saved it as a new file: the hard link is gone
    path.write_bytes(merged)

    removed = install("--uninstall")

    assert removed.returncode == 0 and "exactly as it was" not in removed.stderr, removed.stderr
    assert "it differs in: a new file (inode" in removed.stderr and "1 hard link(s) (was 2)" in removed.stderr
    assert path.read_text() == USER_SETTINGS


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="no extended attributes on this system")
def test_exactly_is_not_claimed_when_an_extended_attribute_was_lost(user_home):
    path = user_home / SETTINGS_REL
    if not _can_xattr(path):
        pytest.skip("the file system holds no user extended attributes")
    os.setxattr(path, "user.origin", b"dotfiles")
    assert install("--skip-venv", "--no-demo").returncode == 0
    os.removexattr(path, "user.origin")

    removed = install("--uninstall")

    assert "exactly as it was" not in removed.stderr and "extended attributes (user.origin)" in removed.stderr


# -- immutable folders and files -------------------------------------------------------------------------------------

def _chattr(flag: str, path: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("chattr"):
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture
def gsd_app(tmp_path):
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text(GSD_CONFIG)
    yield project
    for p in (project / ".planning" / "config.json", project / ".planning"):
        _chattr("-i", p)


def test_an_immutable_planning_folder_still_gets_its_config_wired(user_home, gsd_app):
    if not _chattr("+i", gsd_app / ".planning"):
        pytest.skip("chattr +i needs root and a file system that supports it")
    project_before = snapshot(gsd_app)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_app))

    assert proc.returncode == 0 and "not undone" not in proc.stderr, proc.stderr
    assert "global:research-tools" in (gsd_app / ".planning" / "config.json").read_text()
    removed = install("--uninstall")
    assert removed.returncode == 0 and "not undone" not in removed.stderr
    assert snapshot(gsd_app) == project_before


def test_an_immutable_config_is_refused_without_a_false_not_undone(user_home, gsd_app):
    if not _chattr("+i", gsd_app / ".planning" / "config.json"):
        pytest.skip("chattr +i needs root and a file system that supports it")
    before, project_before = snapshot(user_home), snapshot(gsd_app)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_app))

    assert proc.returncode == 1 and "every change was rolled back" in proc.stderr, proc.stderr
    assert "not undone" not in proc.stderr and "Operation not permitted" in proc.stderr
    _no_traceback(proc)
    assert snapshot(user_home) == before and snapshot(gsd_app) == project_before


# -- relative paths -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("var", ["CLAUDE_CONFIG_DIR", "GSD_RESEARCH_BIN_DIR"])
def test_a_relative_path_variable_is_refused_before_any_change(user_home, tmp_path, var):
    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    before = snapshot(user_home)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "CLAUDE_CONFIG_DIR", "GSD_RESEARCH_VENV",
                                                            "GSD_RESEARCH_BIN_DIR")}
    env[var] = "rel/dir"

    proc = subprocess.run(["bash", str(Path(__file__).parent.parent / "install.sh"), "--skip-venv", "--no-demo"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60)

    assert proc.returncode == 1 and f"{var}=rel/dir is a relative path" in proc.stderr, proc.stderr
    assert snapshot(user_home) == before and list(cwd.iterdir()) == []


# -- Chroma's embedding model: removed on uninstall only when install.sh put it there ---------------------------------

@pytest.fixture
def models(tmp_path) -> Path:
    src = tmp_path / "models" / "all-MiniLM-L6-v2" / "onnx"
    src.mkdir(parents=True)
    for name, blob in (("model.onnx", b"\x08onnx" * 1000), ("tokenizer.json", b"{}"), ("vocab.txt", b"a\nb\n")):
        (src / name).write_bytes(blob)
    return tmp_path / "models"


def test_the_seeded_embedding_model_is_removed_on_uninstall(user_home, models):
    dest = user_home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"

    proc = install("--skip-venv", "--no-demo", "--models-from", str(models))

    assert proc.returncode == 0 and "seeded Chroma's embedding model" in proc.stderr, proc.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["model.onnx", "tokenizer.json", "vocab.txt"]
    assert install("--uninstall").returncode == 0
    assert not (user_home / ".cache").exists()


def test_a_model_that_was_there_before_is_never_removed(user_home, models):
    dest = user_home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    dest.mkdir(parents=True)
    (dest / "model.onnx").write_bytes(b"the user's own model")
    before = snapshot(user_home / ".cache")

    assert install("--skip-venv", "--no-demo", "--models-from", str(models)).returncode == 0
    assert install("--uninstall").returncode == 0

    assert snapshot(user_home / ".cache") == before


def test_model_files_identical_to_ones_already_there_are_not_taken_over(user_home, models):
    dest = user_home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    dest.mkdir(parents=True)
    (dest / "tokenizer.json").write_bytes(b"{}")  # the user's, identical to the copy; model.onnx is missing

    assert install("--skip-venv", "--no-demo", "--models-from", str(models)).returncode == 0
    assert (dest / "model.onnx").is_file()
    assert install("--uninstall").returncode == 0

    assert sorted(p.name for p in dest.iterdir()) == ["tokenizer.json"]


def test_the_model_is_found_beside_the_checkout_without_models_from(tmp_path):
    """With no --models-from, the copy comes from a shared/models/chroma folder beside the checkout (in process:
    a real run would copy the real 90 MB model)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("chroma_model", INSTALL.parent / "installer" / "chroma_model.py")
    chroma_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chroma_model)
    src = tmp_path / "shared" / "models" / "chroma" / "all-MiniLM-L6-v2" / "onnx"
    src.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        (src / name).write_bytes(b"{}")

    planned = chroma_model.planned(tmp_path / "home", "", tmp_path / "checkout", print)

    dest = tmp_path / "home" / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    assert planned == [(src / n, dest / n) for n in ("model.onnx", "tokenizer.json")]


# -- --gsd-project given oddly ------------------------------------------------------------------------------------

def test_uninstall_of_a_project_that_does_not_exist_says_so(user_home, gsd_app):
    assert install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_app)).returncode == 0

    gone = install("--uninstall", "--gsd-project", "/nonexistent/app")
    other = install("--uninstall", "--gsd-project", str(gsd_app.parent))

    assert gone.returncode == 1 and "/nonexistent/app does not exist" in gone.stderr, gone.stderr
    assert other.returncode == 0 and "not wired by gsd-research" in other.stderr, other.stderr
    assert "global:" in (gsd_app / ".planning" / "config.json").read_text()  # neither touched the wired one
    assert install("--uninstall").returncode == 0
    assert (gsd_app / ".planning" / "config.json").read_text() == GSD_CONFIG


def test_uninstall_of_a_project_without_any_install_says_so(home):
    proc = install("--uninstall", "--gsd-project", "/nonexistent/app")
    assert proc.returncode == 1 and "/nonexistent/app does not exist" in proc.stderr, proc.stderr


def test_the_same_project_given_twice_is_wired_once(user_home, gsd_app):
    before = snapshot(gsd_app)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_app), "--gsd-project", f"{gsd_app}/")

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(f"into {gsd_app / '.planning' / 'config.json'}") == 1, proc.stderr
    skills = json.loads((gsd_app / ".planning" / "config.json").read_text())["agent_skills"]["gsd-phase-researcher"]
    assert len(skills) == len(set(skills))
    assert install("--uninstall").returncode == 0
    assert snapshot(gsd_app) == before
