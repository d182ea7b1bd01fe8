"""Every command line README.md shows runs as written, against the fake providers.

Each ```bash block is run line by line in a fresh project folder (holding the files the examples name) with its
own state: `export NAME=VALUE` sets the variable, a `gsd-research` or `researcher` line runs the installed
console script. A line succeeds unless its comment names the failure (`CODE, exit N`), which must then be
exactly that. The JSON block after a bash block is real output, trimmed: every key it shows must occur in
what the block printed. Three substitutions stand for what a test cannot reach: `https://example.com/guide`
is the fake server's article page (allowed by GSD_RESEARCH_ALLOW_HOSTS), `~` is the test's HOME, and
`JOB_ID` is the `conversation_id` the block printed last. The set-up commands (`./install.sh`, which writes
into the real home, and `./test.sh`, the whole suite) cannot run here: they are checked to exist, be
executable and parse as bash.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest

from tests.conftest import BIN, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"```bash\n(.*?)```\n(?:```json\n(.*?)```)?", re.S)
FAILS = re.compile(r"\b([A-Z][A-Z0-9_]{3,}), exit (\d+)\b")
SETUP = {"./install.sh", "./test.sh"}
FAST_CONFIG = "deep:\n  poll_interval: 0.05\n  autostart: false\n"  # jobs wait runs the job itself, promptly


def blocks() -> list[tuple[list[str], str]]:
    return [([line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")], shown or "")
            for body, shown in BLOCK.findall(README)]


BLOCKS = blocks()
EXAMPLES = [b for b in BLOCKS if not any(line.split()[0] in SETUP for line in b[0])]


def command_and_comment(line: str) -> tuple[list[str], str]:
    """The words as the shell splits them, and the trailing `# comment` (a `#` inside a word is no comment)."""
    comment = re.search(r"\s#\s.*$", line)
    return shlex.split(line, comments=True), comment.group(0) if comment else ""


def keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys(v)}
    return set()


@pytest.fixture
def project(tmp_path, fake, home, monkeypatch):
    """The folder the examples run in, with the files they name, and the page they read."""
    from tests.researcher_fixtures import seed_model

    seed_model()
    page = fake.url + "/pages/article"
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    (home / "config.yaml").write_text((home / "config.yaml").read_text() + FAST_CONFIG)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.md").write_text("# Release notes\n\nVersion 4.2 drops Python 3.9. Risk: Windows needs a compiler.\n")
    (folder / "diff.txt").write_text("-GET /v1/users\n+GET /v2/users\n")
    (folder / "screenshot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    (folder / "RESEARCH.md").write_text(f"# Research\n\nWindows support is experimental [CITED: {page}].\n")
    notes = tmp_path / "user-home" / "notes"
    notes.mkdir()
    (notes / "widget.md").write_text("# Widget service\n\nThe widget service fails with ERR_WIDGET_4711 after the "
                                     "upgrade to 4.2 when its cache folder is read-only.\n")
    (notes / "deploy.md").write_text("# Deploy\n\nDeploys run from the main branch every Tuesday.\n")
    return folder, {"https://example.com/guide": page}


def run_block(lines: list[str], folder, urls: dict[str, str]) -> list[tuple[str, dict | None]]:
    env, printed, job_id = dict(os.environ), [], None
    for line in lines:
        words, comment = command_and_comment(line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value
            continue
        assert words[0] in ("gsd-research", "researcher"), f"the README shows a command this test cannot run: {line}"
        args = [urls.get(w, os.path.expanduser(w)) for w in words]
        args = [job_id if a == "JOB_ID" else a for a in args]
        proc = subprocess.run([str(BIN / args[0]), *args[1:]], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=120)
        doc = json.loads(proc.stdout) if proc.stdout.lstrip().startswith("{") else None
        expected = FAILS.search(comment)
        if expected:
            assert (proc.returncode, doc["error"]["code"]) == (int(expected[2]), expected[1]), line
        else:
            assert proc.returncode == 0, f"{line}\n{proc.stdout[-600:]}\n{proc.stderr[-600:]}"
        job_id = (doc or {}).get("conversation_id", job_id)
        printed.append((line, doc))
    return printed


def test_the_readme_shows_its_two_commands_first():
    first_lines, _ = BLOCKS[0]
    assert [line.split()[0] for line in first_lines] == ["./install.sh", "./test.sh"]
    assert len(README.splitlines()) <= 200


@pytest.mark.parametrize("script", sorted(SETUP))
def test_each_setup_command_exists_and_parses(script):
    path = ROOT / script
    assert path.is_file() and os.access(path, os.X_OK), script
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, script


@pytest.mark.parametrize("lines, shown", EXAMPLES, ids=[b[0][-1].split("#")[0].strip()[:40] for b in EXAMPLES])
def test_each_readme_example_runs_as_written(project, lines, shown):
    folder, urls = project

    printed = run_block(lines, folder, urls)

    real = set().union(*(keys(doc) for _, doc in printed if doc))
    shown_keys = set(re.findall(r'"([A-Za-z_]\w*)":', shown))
    assert shown_keys <= real, f"keys shown but not printed: {shown_keys - real}"


LINK = re.compile(r"\]\(([^)\s]+)\)")
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS, *sorted((ROOT / "skills").glob("*/SKILL.md")), *sorted((ROOT / "agents").glob("*.md"))]


def anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_reaches_its_page_and_heading(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        headings = re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), re.M) if dest.is_file() else []
        if not dest.exists() or (fragment and fragment not in {anchor(h) for h in headings}):
            broken.append(target)
    assert broken == [], f"{page}: {broken}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(README)}
    assert [p.name for p in DOCS if p.resolve() not in linked] == []
