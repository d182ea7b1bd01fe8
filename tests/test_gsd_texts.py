"""Every command line the agent, the skills, the slash commands and the hook texts show runs against the fake
providers and answers one JSON document (never a usage error); every field a text names for a command (the
`cmd` -> `field` notes of SubagentStart, the research-tools table) is in that command's answer."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.deep_fixtures import configure

sys.path.insert(0, str(ROOT / "hooks"))
from gsd_research_hooks import subagent_start  # noqa: E402

sys.path.remove(str(ROOT / "hooks"))

FILES = sorted([*ROOT.glob("agents/*.md"), *ROOT.glob("skills/*/SKILL.md"), *ROOT.glob("commands/*.md")])
HOOK_TEXTS = {"SubagentStart": subagent_start.STRATEGY, "SubagentStart (GSD Core)": subagent_start.PROVIDERS}
TEXTS = {**{str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in FILES}, **HOOK_TEXTS}
NEEDS_ARGS = {"docs", "deep", "fetch", "search", "verify", "web", "recall", "summarize", "analyze", "image"}
TEMPLATES = ("<task>", "[...]")  # a shape to fill in, not a command line


def command_lines(text: str) -> list[str]:
    lines = [m for block in re.findall(r"```bash\n(.*?)```", text, re.S) for m in block.splitlines()]
    lines += re.findall(r"`((?:gsd-research|researcher) [^`\n]+)`", text)
    out = []
    for line in lines:
        line = line.split("  #")[0].strip()
        words = line.split()
        if not line.startswith(("gsd-research ", "researcher ")) or any(t in line for t in TEMPLATES):
            continue
        if len(words) == 2 and words[1] in NEEDS_ARGS | {"search"}:
            continue  # a command's name in prose, not a line to run
        out.append(line)
    return out


LINES = sorted({(line, rel) for rel, text in TEXTS.items() for line in command_lines(text)})
JOB_WORDS = {"ID", "JOB_ID", "CONVERSATION_ID"}


@pytest.fixture
def stage(fake, home, monkeypatch, tmp_path):
    """Keys for every provider (pointed at the fakes), local pages allowed, the files texts name, a project cwd;
    deep research polls fast and `jobs wait` runs the job itself (no background worker outlives the test)."""
    configure(home)
    for name, value in (("PERPLEXITY_API_KEY", "pplx-canary-1234567890"), ("TAVILY_API_KEY", "tvly-canary-12345678"),
                        ("GEMINI_API_KEY", "AIza-canary-1234567890")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.chdir(tmp_path)
    page = fake.url + "/pages/article"
    research = f"# Research\n\nLifespan events run at startup [CITED: {page}].\n"
    for rel in ("FILE", "diff.txt", "notes.md", ".planning/research/STACK.md",
                ".planning/phases/03-auth/03-RESEARCH.md", "<the file above>"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(research)
    (tmp_path / "queries.jsonl").write_text('{"id": "1", "query": "lifespan"}\n')
    (tmp_path / "screenshot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    return page


def _words(line: str, page: str, job: str) -> list[str]:
    words = shlex.split(line)
    if "--page" in words:  # a later part needs a page longer than one part
        page = page.replace("/pages/article", "/pages/huge")
    out = []
    for word in words[1:]:
        if word in ("URL", "<url>") or word.startswith(("http://", "https://")):
            word = page
        elif word in JOB_WORDS:
            word = job
        elif word in ("LIB", "LIBRARY"):
            word = "react"
        elif word in ("NAME",):
            word = "notes"
        elif word in ("PATH", "/path/to/folder"):
            word = str(Path.cwd())
        out.append(word)
    return out


def _run(cli, run_bin, line: str, page: str, job: str):
    args = _words(line, page, job)
    if line.startswith("researcher "):
        return run_bin("researcher", *args, timeout=120)
    return cli(*args)


@pytest.mark.parametrize("line, where", LINES, ids=[f"{w}: {ln}"[:90] for ln, w in LINES])
def test_every_command_line_in_the_texts_runs(stage, cli, run_bin, line, where):
    job = cli("deep", "what is fastapi", "--async").json["conversation_id"] if JOB_WORDS & set(line.split()) else ""

    result = _run(cli, run_bin, line, stage, job)

    doc = result.json  # exactly one JSON document, success or failure
    assert result.code != 2 or doc.get("error", {}).get("code") not in ("USAGE_ERROR", None), (line, doc)
    assert "Traceback" not in result.stderr


def named_fields() -> list[tuple[str, str, str]]:
    """(command line, field, where) for every `cmd` -> `field` note and every research-tools table row."""
    out = []
    arrow = re.compile(r"`((?:gsd-research|researcher) [^`]+)` -> ((?:`[^`]+`(?:, )?)+)")
    for rel, text in TEXTS.items():
        for cmd, fields in arrow.findall(text):
            out += [(cmd, f, rel) for f in re.findall(r"`([^`]+)`", fields)]
        for cmd, fields in re.findall(r"\| `((?:gsd-research|researcher) [^`]+)` \| ((?:`[^`]+`(?:, )?)+) \|", text):
            out += [(cmd, f, rel) for f in re.findall(r"`([^`]+)`", fields)]
    return sorted(set(out))


FIELDS = named_fields()
FIELDS_BY_LINE = {line: sorted((f, w) for c, f, w in FIELDS if c == line) for line in sorted({c for c, _, _ in FIELDS})}


def _has(doc, path: str) -> bool:
    node = [doc]
    for part in path.split("."):
        many = part.endswith("[]")
        key = part[:-2] if many else part
        node = [n[key] for n in node if isinstance(n, dict) and key in n]
        if many:
            node = [item for n in node if isinstance(n, list) for item in n] or [
                {} for n in node if isinstance(n, list)]
    return bool(node)


def test_the_texts_name_fields_for_every_tool():
    assert {cmd.split()[1] for cmd, _, _ in FIELDS if cmd.startswith("gsd-research")} >= {
        "docs", "search", "fetch", "deep", "jobs", "web", "verify"}


@pytest.mark.parametrize("line", list(FIELDS_BY_LINE), ids=[line[:90] for line in FIELDS_BY_LINE])
def test_each_field_a_text_names_is_in_the_answer(stage, cli, run_bin, line):
    """One run of each command line the texts name fields for; every field each text names is in its answer."""
    job = ""
    if JOB_WORDS & set(line.split()):
        job = cli("deep", "what is fastapi", "--async").json["conversation_id"]
    if line.startswith("researcher search"):
        from tests.researcher_fixtures import kb, seed_model

        seed_model()
        assert kb("repo", "add", "notes", str(Path.cwd()), "--json").code == 0
        assert kb("index", "notes", "--json").code == 0

    doc = _run(cli, run_bin, line, stage, job).json

    assert doc.get("success") is not False, (line, doc.get("error"))
    missing = [f"{where}: `{line}` -> `{field}`" for field, where in FIELDS_BY_LINE[line] if not _has(doc, field)]
    assert not missing, f"fields named but not in the answer: {missing} (keys: {sorted(doc)})"
