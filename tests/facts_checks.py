"""The one-voice checker: reads every text a user or an agent is shown (docs, agent, skills with all their files,
slash commands, hooks and their JSON, plugin manifests, every `--help`, the CLI's messages and suggestions),
normalizes it, and finds each figure or rule stated about a fact of lib/gsd_research/data/facts.yaml that is
not that fact. `violations(texts)` is what tests/test_facts.py asserts empty, on the real texts and (mutation
tests) on copies with a contradiction written in."""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path

import yaml

from tests.conftest import ROOT

FACTS = yaml.safe_load((ROOT / "lib" / "gsd_research" / "data" / "facts.yaml").read_text())
TEXT_SUFFIXES = {".md", ".json", ".txt", ".yaml", ".yml", ".py"}


# -- what is read ---------------------------------------------------------------------------------------------

def _text_files(root: Path) -> list[Path]:
    files = [root / "README.md", root / "plugin.json", *sorted((root / ".claude-plugin").glob("[!.]*.json"))]
    for folder in ("agents", "commands", "skills", "hooks", "docs"):
        files += sorted(p for p in (root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts
                        and p.suffix in TEXT_SUFFIXES)
    return [p for p in files if p.is_file()]


def file_texts(root: Path = ROOT) -> dict[str, str]:
    """Every shipped text file under `root` by its relative path."""
    out = {}
    for p in _text_files(root):
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        out[str(p.relative_to(root))] = python_strings(text) if p.suffix == ".py" else text
    return out


def python_strings(source: str) -> str:
    """A module's strings as a model or a user reads them (the hooks' context, messages, docstrings), one per
    paragraph: the source splits a text over lines and quotes."""
    return "\n\n".join(n.value for n in ast.walk(ast.parse(source))
                        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) > 20)


def message_texts(package: Path = ROOT / "lib" / "gsd_research") -> dict[str, str]:
    """The CLI's own strings (messages, suggestions, help, docstrings), per module, one per paragraph."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        strings = python_strings(p.read_text(encoding="utf-8"))
        if strings:
            out[f"strings:{p.relative_to(package.parent)}"] = strings
    return out


def help_texts() -> dict[str, str]:
    """`--help` of every command and sub-command of gsd-research and researcher, as click prints it."""
    import click

    from gsd_research.cli import cli as gsd
    from gsd_research.researcher.cli import cli as researcher

    out = {}

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=100)
        out["help: " + " ".join(path)] = command.get_help(ctx)
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name], ctx)

    walk(gsd, ["gsd-research"], None)
    walk(researcher, ["researcher"], None)
    return out


def all_texts() -> dict[str, str]:
    return {**file_texts(), **message_texts(), **help_texts()}


# -- normalizing ----------------------------------------------------------------------------------------------

def normalize(text: str) -> str:
    """Unicode folded (full-width digits, non-breaking spaces), dashes and minus signs as '-', Markdown emphasis
    and code marks and HTML tags dropped: a claim reads the same however it is typeset."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub("[\u2010-\u2015\u2212\ufe58\ufe63]", "-", text)
    text = text.replace("\u00a0", " ").replace("\u2009", " ").replace("\u202f", " ")
    text = re.sub(r"<[^>\n]{1,40}>", " ", text)
    text = re.sub(r"(?<!`)`(?!`)", "", text).replace("**", "").replace("__", "")  # ``` fences stay
    return re.sub(r"(?<![\w*(])\*(?=\S)|(?<=\S)\*(?![\w*)])", "", text)


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _statement_pattern(statement: str) -> re.Pattern:
    return re.compile(r"\s+".join(re.escape(w) for w in normalize(statement).split()))


STATEMENTS = [_statement_pattern(f["statement"]) for f in FACTS.values() if "statement" in f]


def without_statements(text: str) -> str:
    """The normalized text with every fact's own statement taken out, however it is wrapped (what remains must
    not restate a fact otherwise)."""
    out = normalize(text)
    for pattern in STATEMENTS:
        out = pattern.sub("\n\n", out)
    return out


STRUCTURE = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|\||>|```)")


def units(text: str) -> list[str]:
    """The text in claim-sized pieces: each table row and code line on its own, paragraphs and list items
    split into sentences (a sentence wrapped over lines is one piece)."""
    pieces: list[str] = []
    block: list[str] = []

    def close() -> None:
        if block:
            pieces.extend(s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[$/-])", flat(" ".join(block))) if s.strip())
            block.clear()

    in_code = False
    for line in normalize(text).splitlines():
        if line.strip().startswith("```"):
            close()
            in_code = not in_code
            continue
        if in_code or line.strip().startswith("|"):
            close()
            pieces.append(line.strip())
        elif not line.strip():
            close()
        else:
            if STRUCTURE.match(line):
                close()
            block.append(line)
    close()
    return pieces


# -- money --------------------------------------------------------------------------------------------------------

MONEY = re.compile(r"(?<![\w{])\$\s?(\d+(?:\.\d+)?)(?:\s?-\s?\$?(\d+(?:\.\d+)?))?"
                   r"|(\d+(?:\.\d+)?)\s?(?:USD|US\$|dollars?)\b"
                   r"|(\d+(?:\.\d+)?)\s?(?:cents?\b|¢)", re.I)
EFFORT = re.compile(r"\b(low|medium|high)\b", re.I)


def _cost() -> tuple[set[float], tuple[float, float]]:
    cost = FACTS["deep_cost"]
    low, high = (float(x) for x in re.findall(r"\$(\d+\.\d+)", cost["range"]))
    return {*cost["usd"].values(), float(cost["warning_usd"])}, (low, high)


def _effort_near(piece: str, start: int, end: int) -> str | None:
    after = EFFORT.search(piece[end:end + 22])
    if after:
        return after.group(1).lower()
    before = list(EFFORT.finditer(piece[max(0, start - 22):start]))
    return before[-1].group(1).lower() if before else None


def money_problems(piece: str) -> list[str]:
    lone, (range_low, range_high) = _cost()
    usd = FACTS["deep_cost"]["usd"]
    problems = []
    for m in MONEY.finditer(piece):
        if m.group(1) and m.group(2):  # a range
            if (float(m.group(1)), float(m.group(2))) != (range_low, range_high):
                problems.append(f"cost range {m.group(0)!r}")
            continue
        value = float(m.group(1) or m.group(3)) if not m.group(4) else float(m.group(4)) / 100
        if value not in lone:
            problems.append(f"cost {m.group(0)!r}")
            continue
        effort = _effort_near(piece, m.start(), m.end())
        if effort and value in usd.values() and usd[effort] != value:
            problems.append(f"cost {m.group(0)!r} next to effort {effort!r} (the fact: ${usd[effort]})")
    return problems


# -- deep calls per session -----------------------------------------------------------------------------------------

NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                           "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
COUNT = re.compile(r"(?<![\w.$])(?<![A-Za-z]-)(\d+|" + "|".join(NUMBER_WORDS) + r")(?![\w.%]|\s?(?:s|ms|sec|seconds?|min|minutes?|"
                   r"h|hours?|days?|tokens?|MB|KB|GB|cents?|USD|dollars?)\b)"
                   r"(?=(?:\W+\w+){0,3}?\W+(?:deep|calls?\b(?!')|quer(?:y|ies)|research))", re.I)  # counts of calls
SESSION = re.compile(r"\bsessions?\b", re.I)
DEEP_CALLS = re.compile(r"\bdeep\b|\bcalls?\b|\bquer(?:y|ies)\b", re.I)
NOT_COUNTS = re.compile(r"\$\s?\d+(?:\.\d+)?|--\w[\w-]*\s+\d+|exit(?: code| status)?\s*\d|\b(?:19|20)\d\d\b|\[\d+\]"
                        r"|\b\d{3}\b(?=[/ ]\d?xx|/\d{3})"
                        r"|\b(?:\d+|" + "|".join(NUMBER_WORDS) + r")\s+(?=sessions?\b)", re.I)  # counts sessions


def session_problems(piece: str, deep_scoped: bool = False) -> list[str]:
    """Every count said of deep calls within reach of "session" is one of the fact's bounds (in a text about deep
    research, or a sentence about deep calls or a research session)."""
    if not (deep_scoped or DEEP_CALLS.search(piece) or re.search(r"research sessions?", piece, re.I)):
        return []
    text = NOT_COUNTS.sub(lambda m: " " * len(m.group(0)), piece)
    fact = FACTS["deep_calls_per_session"]
    wrong = []
    for session in SESSION.finditer(text):
        window = text[max(0, session.start() - 60):session.end() + 25]
        counts = [int(c) if c.isdigit() else NUMBER_WORDS[c.lower()] for c in COUNT.findall(window)]
        wrong += [c for c in counts if c not in (fact["min"], fact["max"])]
    return [f"deep calls per session: {wrong} in {piece[:120]!r}"] if wrong else []


# -- the year in queries --------------------------------------------------------------------------------------------

YEAR = r"(?:\byears?\b|\b(?:19|20)\d\d\b)"
ADVICE = r"\b(?:include|add|append|put|insert|use|mention|attach|prefix|suffix|tack|specify|give)\w*\b"
YEAR_ADVICE = re.compile(rf"{ADVICE}[^.;]{{0,40}}{YEAR}[^.;]{{0,40}}\b(?:quer(?:y|ies)|search(?:es)?)\b"
                         rf"|{YEAR}s? in (?:the |your |every |each |all )?(?:quer|search)", re.I)
NEGATED = re.compile(rf"\b(?:never|not|n't|no need to|avoid(?:ing)?)\s+(?:\w+\s+){{0,2}}?{ADVICE}", re.I)
EXAMPLE = re.compile(r"(?:gsd-research\s+(?:search|deep|web)\b|WebSearch\s*\(|/research:(?:search|deep|web)\b)"
                     r"([^\n|]*)")


def year_problems(piece: str) -> list[str]:
    problems = []
    advice = YEAR_ADVICE.search(piece)
    if advice and not NEGATED.search(piece[:advice.end()]):
        problems.append(f"year advice {piece[:120]!r}")
    for m in EXAMPLE.finditer(piece):
        args = re.sub(r"--[\w-]+(?:[ =]\S+)?", " ", m.group(1))  # options (a --since date) are not the query
        if re.search(r"\b(?:19|20)\d\d\b", args):
            problems.append(f"example query with a year {m.group(0)[:100]!r}")
    return problems


# -- confidence ---------------------------------------------------------------------------------------------------

LEVEL = re.compile(r"\b(MEDIUM-HIGH|HIGH|MEDIUM|LOW)\b")
SUBJECTS = [  # (subject, pattern), the nearest one to a level names what the level is claimed for
    ("verified", r"(?<!until )\b(?:verified|confirmed|checked|cross-checked) (?:against|by|with|in)\b"),
    ("search", r"gsd-research (?:search|web)\b|\bWebSearch\b|\bweb search(?:es)?\b|\bsearch results?\b"
               r"|\bgrounded web answers?\b|\bweb answers?\b|\bsearch(?:es)?\b"),
    ("docs", r"gsd-research docs\b|\bContext7\b|\bofficial (?:docs|documentation)\b|\bregistr(?:y|ies)\b"),
    ("deep", r"gsd-research deep\b|\bdeep research\b"),
]
EXCLUDED = re.compile(r"researcher search|knowledge[- ]base|user's (?:own )?documents", re.I)


def _claims(piece: str, default: str | None = None) -> list[tuple[str, str]]:
    """(subject, level) for each confidence level in `piece`: the nearest subject within reach, else the text's
    own subject `default` when the level is said as a confidence."""
    if EXCLUDED.search(piece):
        return []  # the user's documents: their confidence is the document's
    marks = [(m.start(), m.end(), name) for name, pattern in SUBJECTS for m in re.finditer(pattern, piece, re.I)]
    checks = [e for _, e, name in marks if name == "verified"]
    # "verified against the official docs": the docs there verify, the claim is about what was verified
    marks = [(s, e, name) for s, e, name in marks if name == "verified" or not any(0 <= s - c <= 25 for c in checks)]
    claims = []
    for level in LEVEL.finditer(piece):
        near = [(min(abs(level.start() - e), abs(s - level.end())), -len(name), name) for s, e, name in marks
                if min(abs(level.start() - e), abs(s - level.end())) <= 80]
        if near:
            claims.append((min(near)[2], level.group(1)))
        elif default and re.search(r"\bconfidence\b", piece, re.I):
            claims.append((default, level.group(1)))
    return claims


def text_subject(rel: str, texts: dict[str, str]) -> str | None:
    """The one tool a text is about (a skill or slash command allowed a single gsd-research command, a command's
    --help): a level stated there with no subject near it is claimed for that tool."""
    help_of = re.match(r"help: gsd-research (\w+)", rel)
    if help_of:
        names = {help_of.group(1)}
    else:
        skill = re.match(r"skills/([^/]+)/", rel)
        source = texts.get(f"skills/{skill.group(1)}/SKILL.md", "") if skill else texts.get(rel, "")
        tools = re.search(r"^allowed-tools:(.*)$", source, re.M)
        names = set(re.findall(r"gsd-research (\w+)", tools.group(1))) if tools else set()
    found = {s for s in (_subject_of(n) for n in names) if s}
    return found.pop() if len(found) == 1 else None


def _subject_of(command: str) -> str | None:
    return {"search": "search", "web": "search", "docs": "docs", "deep": "deep", "jobs": "deep"}.get(command)


def _allowed(subject: str, level: str) -> bool:
    return level == FACTS["confidence"][subject].split()[0]


def confidence_problems(piece: str, default: str | None = None) -> list[str]:
    claims = _claims(piece, default)
    if piece.startswith("|"):  # a table row: the level cell against the subject cells
        cells = [c.strip().strip("*_ ") for c in piece.strip().strip("|").split("|")]
        levels = [c for c in cells if LEVEL.match(c)]
        if levels:
            rest = " ".join(c for c in cells if c not in levels)
            claims = [(s, LEVEL.match(levels[0]).group(1)) for s, _ in _claims(f"{rest} {levels[0]}")[:1]]
    return [f"confidence {lvl} for {s}: {piece[:120]!r}" for s, lvl in claims if not _allowed(s, lvl)]


RAISE = re.compile(r"\b(?:rais|upgrad|promot|increas|boost|bump)\w*\b[^.;]{0,30}\b(?:confidence|level)"
                   r"|\b(?:confidence|level)\b[^.;]{0,20}\b(?:rais|upgrad|promot|increas|go(?:es)? up)\w*"
                   r"|\bagree\w*\b[^.;]{0,40}(?:\bconfidence\b|\bMEDIUM\b|\bHIGH\b|\braise)", re.I)


def verification_problems(piece: str) -> list[str]:
    """Only verification against an official source raises a finding (the confidence fact)."""
    m = RAISE.search(piece)
    if m and not re.search(r"\bofficial\b", piece, re.I):
        return [f"confidence raised without an official source: {piece[:120]!r}"]
    return []


# -- the jobs wait loop and interrupted deep calls -----------------------------------------------------------------

CODE = re.compile(r"\b(JOB_RUNNING|JOB_FAILED|JOB_CANCELLED|JOB_DONE|STILL_RUNNING|TIMEOUT)\b")
EXIT = re.compile(r"\bexit(?:s|ed)?(?:\s+(?:code|status))?\s*[:=]?\s*(\d+)\b", re.I)
ACTIONS = {"stop": re.compile(r"\bstop\w*|\bgive up|\breport it", re.I),
           "wait again": re.compile(r"\bagain\b|\bkeep waiting|\bwait\b|\bpoll", re.I),
           "read the report": re.compile(r"\bread\b", re.I)}


def _exit_problems(piece: str, codes: list[re.Match]) -> list[str]:
    """Each exit status against the code written next to it."""
    outcomes = FACTS["jobs_wait"]["outcomes"]
    problems = []
    for e in EXIT.finditer(piece):
        near = sorted((min(abs(c.start() - e.end()), abs(e.start() - c.end())), c.group(1)) for c in codes)
        if not near or near[0][0] > 30:
            continue
        code = near[0][1]
        if code in outcomes and outcomes[code]["exit"] != int(e.group(1)):
            problems.append(f"{code} exit {e.group(1)} (the fact: {outcomes[code]['exit']})")
        elif code == "TIMEOUT" and re.search(r"jobs wait", piece):
            problems.append(f"jobs wait answering TIMEOUT (exit {e.group(1)}): {piece[:120]!r}")
    return problems


def _action_problems(piece: str, codes: list[re.Match]) -> list[str]:
    """What each code is said to mean (stop, wait again, read) against the fact's action."""
    outcomes = FACTS["jobs_wait"]["outcomes"]
    problems = []
    for i, c in enumerate(codes):
        if c.group(1) not in outcomes:
            continue
        after = piece[c.end():codes[i + 1].start() if i + 1 < len(codes) else len(piece)]
        said = {name for name, pattern in ACTIONS.items() if pattern.search(after)}
        expected = outcomes[c.group(1)]["action"]
        if said and expected not in said:
            problems.append(f"{c.group(1)} = {sorted(said)} (the fact: {expected}): {piece[:120]!r}")
    return problems


def jobs_problems(piece: str) -> list[str]:
    codes = list(CODE.finditer(piece))
    problems = _exit_problems(piece, codes) + _action_problems(piece, codes)
    if "STILL_RUNNING" in piece:
        problems.append("STILL_RUNNING is not a code")
    if re.search(r"still running", piece, re.I) and "TIMEOUT" in piece:
        problems.append(f"the wait described with TIMEOUT: {piece[:120]!r}")
    timeouts = {int(t) for t in re.findall(r"jobs wait \S+[^\n|]*?--timeout[ =](\d+)", piece)}
    if timeouts - {FACTS["jobs_wait"]["timeout"]}:
        problems.append(f"jobs wait --timeout {sorted(timeouts)}")
    return problems


NON_DEEP = re.compile(r"\b(?:docs|search|fetch|web|summarize|analyze|image|researcher|other)\b", re.I)


def interrupted_deep_problems(piece: str, deep_scoped: bool) -> list[str]:
    """A deep call that ends in TIMEOUT (or JOB_RUNNING) names its job: the advice is to wait on it, not to retry
    or fall back (facts: deep_interrupted)."""
    if not re.search(r"\bTIMEOUT\b|\bJOB_RUNNING\b", piece):
        return []
    if piece.startswith("|"):
        cells = [c.strip() for c in piece.strip().strip("|").split("|")]
        first, action = cells[0], " ".join(cells[1:])
        if not re.search(r"\bTIMEOUT\b|\bJOB_RUNNING\b", first) or re.search(r"\bwait\b", action, re.I):
            return []
        if NON_DEEP.search(first) and not re.search(r"\bdeep\b", first, re.I):
            return []  # a row scoped to the other tools
        return [f"TIMEOUT/JOB_RUNNING of deep answered by {action[:60]!r}, not by waiting on its job"]
    if deep_scoped and re.search(r"\bretry\b|\bfall back\b", piece, re.I) and not re.search(r"\bwait\b", piece, re.I):
        return [f"TIMEOUT of deep answered by retrying: {piece[:120]!r}"]
    return []


# -- all of it ----------------------------------------------------------------------------------------------------

DEEP_SCOPED = re.compile(r"deep|jobs")


def text_problems(rel: str, text: str, texts: dict[str, str] | None = None) -> list[str]:
    """Every contradiction of a fact in one text (`texts`: all of them, where a skill's SKILL.md is found)."""
    problems = []
    deep_scoped = bool(DEEP_SCOPED.search(rel))
    subject = text_subject(rel, {**(texts or {}), rel: text})
    for piece in units(without_statements(text)):
        problems += money_problems(piece) + session_problems(piece, deep_scoped) + confidence_problems(piece, subject) + \
            jobs_problems(piece) + interrupted_deep_problems(piece, deep_scoped) + year_problems(piece) + \
            verification_problems(piece)
    return problems


def problems(texts: dict[str, str]) -> dict[str, list[str]]:
    """Contradictions inside each text (texts without any are left out)."""
    out = {rel: text_problems(rel, text, texts) for rel, text in texts.items()}
    return {rel: p for rel, p in out.items() if p}


def statement_problems(texts: dict[str, str]) -> list[str]:
    return [f"{rel} lacks the {name} statement" for name, fact in FACTS.items() for rel in fact.get("stated_in", [])
            if flat(normalize(fact["statement"])) not in flat(normalize(texts.get(rel, "")))]


def violations(texts: dict[str, str]) -> dict[str, list[str]]:
    """Every contradiction of the facts, by text: inside each, and a statement missing where it is listed."""
    out = problems(texts)
    for problem in statement_problems(texts):
        out.setdefault(problem.split(" lacks ")[0], []).append(problem)
    return out
