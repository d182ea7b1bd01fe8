"""Markdown reports: Jinja2 templates (packaged, or a user dir that overrides them), safe slugs and paths."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

from gsd_research.core.errors import ReportFailed, UsageError

SLUG_MAX = 60
MAX_NAME_BYTES = 200  # of each part of a report path: room for the -999.md a name may get, under NAME_MAX
MAX_COLLISIONS = 999
REPORT_SUFFIX = ".md"
_WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


# -- paths ------------------------------------------------------------------------------------------
def slugify(text: str, max_len: int = SLUG_MAX) -> str:
    """A file-name-safe slug: ASCII letters, digits and dashes only, bounded, never empty or reserved."""
    ascii_text = unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    slug = slug[:max_len].rstrip("-")
    if len(slug) < 3 or slug in _WINDOWS_RESERVED:
        digest = hashlib.sha256((text or "").encode("utf-8")).hexdigest()[:8]
        slug = f"{slug}-{digest}" if slug else f"search-{digest}"
    return slug


def default_report_dir(cwd: Path | None = None) -> Path:
    """`.planning/research/` inside a GSD project (a `.planning/` folder exists), else `research/`."""
    cwd = Path.cwd() if cwd is None else cwd
    return cwd / ".planning" / "research" if (cwd / ".planning").is_dir() else cwd / "research"


def plan_report_path(requested: str | None, query: str, cwd: Path | None = None, *,
                     anywhere: bool = False) -> tuple[Path, str]:
    """(directory, file stem) for a report; checked before any search runs so a bad path costs nothing.

    `requested` empty: the default directory and the query's slug. A directory (existing, or ending in
    a slash): that directory and the slug. Otherwise a `.md` file path without `..` parts. The folder
    must lie, symlinks resolved, inside the project (`cwd`) or GSD_RESEARCH_HOME unless `anywhere`.
    """
    cwd = Path.cwd() if cwd is None else cwd
    directory, stem = _report_target(requested, query, cwd)
    if not anywhere:
        check_inside(directory, cwd)
    check_writable(directory)
    return directory, stem


def _inside(real: Path, cwd: Path) -> bool:
    from gsd_research.core.config import home

    roots = [Path(os.path.realpath(cwd)), Path(os.path.realpath(home()))]
    return any(real == root or root in real.parents for root in roots)


def check_inside(directory: Path, cwd: Path) -> None:
    """Refuse a report folder outside the project and the research home (symlinks followed)."""
    if not _inside(Path(os.path.realpath(directory)), cwd):
        raise UsageError(f"Report folder {directory} is outside the project folder ({cwd}) and "
                         "GSD_RESEARCH_HOME", suggestions=["Pass a path inside the project, e.g. --report research/",
                                                           "Or add --allow-outside to write there anyway"])


def check_writable(directory: Path) -> None:
    """Fail now, before a search is paid for, when the report folder cannot be created or written:
    its nearest existing ancestor must be a folder this process may write into."""
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ReportFailed(f"Cannot create the report folder {directory}: {probe} is not a folder",
                           suggestions=["Pass another folder with --report PATH"])
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ReportFailed(f"Cannot write the report into {directory}: {probe} is not writable",
                           suggestions=["Pass another folder with --report PATH"])


def _report_target(requested: str | None, query: str, cwd: Path) -> tuple[Path, str]:
    if not requested:
        return default_report_dir(cwd), slugify(query)
    if _CONTROL.search(requested):
        raise UsageError("Report path must not hold line breaks or other control characters",
                         suggestions=["Pass a path such as research/topic.md, or --report alone for the default"])
    if ".." in Path(requested).parts:
        raise UsageError(f"Report path must not climb out with '..': {requested!r}",
                         suggestions=["Pass a path such as research/topic.md, or --report alone for the default"])
    longest = max(len(part.encode("utf-8")) for part in Path(requested).parts)
    if longest > MAX_NAME_BYTES:
        raise UsageError(f"A name in the report path is {longest} bytes long; at most {MAX_NAME_BYTES} are allowed",
                         suggestions=["Pass a shorter name, or --report alone for a name made from the query"])
    target = Path(requested).expanduser()
    target = target if target.is_absolute() else cwd / target
    if requested.endswith(("/", os.sep)) or target.is_dir():
        return target, slugify(query)
    if target.suffix.lower() != REPORT_SUFFIX:
        raise UsageError(f"Report path must end in .md: {requested!r}",
                         suggestions=["Pass a path such as research/topic.md, or a directory ending in /"])
    stem = target.name[: -len(REPORT_SUFFIX)]
    if not stem.strip(". "):
        raise UsageError(f"Report file name is empty: {requested!r}")
    return target.parent, stem


def write_new(directory: Path, stem: str, text: str, *, anywhere: bool = True, cwd: Path | None = None) -> Path:
    """Write `text` to `directory/stem.md`, or `stem-2.md`, `stem-3.md`…: never overwrites a file.

    The folder is checked again where the file is created (opened once, the file created relative to that
    descriptor, never through a symlink): a folder swapped for a link to elsewhere after the search started
    is refused unless `anywhere`. A report outside GSD_RESEARCH_HOME is the user's document: it gets the
    user's own umask, not the private one of our state."""
    from gsd_research.core.private import user_umask

    if not stem or "/" in stem or os.sep in stem or stem in (".", "..") or _CONTROL.search(stem):
        raise UsageError(f"Unsafe report file name {stem!r}")
    with user_umask(enabled=not _in_home(directory)):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError as exc:
            raise ReportFailed(f"Cannot create the report folder {directory}: {exc.strerror or exc}",
                               suggestions=["Pass another folder with --report PATH"]) from None
        try:
            if not anywhere and not _inside(_fd_path(dfd, directory), Path.cwd() if cwd is None else cwd):
                raise UsageError(f"Report folder {directory} now lies outside the project and GSD_RESEARCH_HOME "
                                 "(it changed during the search)", suggestions=["Pass a folder inside the project"])
            return _create(dfd, directory, stem, text)
        finally:
            os.close(dfd)


def _create(dfd: int, directory: Path, stem: str, text: str) -> Path:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for i in range(1, MAX_COLLISIONS + 1):
        name = f"{stem}{REPORT_SUFFIX}" if i == 1 else f"{stem}-{i}{REPORT_SUFFIX}"
        try:
            fd = os.open(name, flags, 0o666, dir_fd=dfd)  # exclusive: a race or an existing file moves on
        except FileExistsError:
            continue
        except OSError as exc:
            raise ReportFailed(f"Cannot write the report {directory / name}: {exc.strerror or exc}",
                               suggestions=["Pass another path with --report PATH"]) from None
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        return directory / name
    raise ReportFailed(f"Too many reports named {stem} in {directory}", suggestions=["Pass --report PATH"])


def _fd_path(dfd: int, directory: Path) -> Path:
    """The real path of the folder open as `dfd` (its resolved name, when that is still the same folder)."""
    real = Path(os.path.realpath(directory))
    try:
        same = os.path.samestat(os.fstat(dfd), os.stat(real))
    except OSError:
        same = False
    if not same:
        raise ReportFailed(f"The report folder {directory} changed while the report was written",
                           suggestions=["Retry the search"])
    return real


def _in_home(directory: Path) -> bool:
    from gsd_research.core.config import home

    real, root = Path(os.path.realpath(directory)), Path(os.path.realpath(home()))
    return real == root or root in real.parents


def display_path(path: Path, cwd: Path | None = None) -> str:
    """The path relative to the working directory when it lies inside it, else absolute."""
    cwd = Path.cwd() if cwd is None else cwd
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path.resolve())


# -- Markdown safety -------------------------------------------------------------------------------
def md_inline(text, limit: int | None = None) -> str:
    """External text as one safe Markdown line: no HTML, no brackets that look like citations or links."""
    text = _CONTROL.sub(" ", str(text or ""))
    text = " ".join(text.split())
    if limit and len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    text = text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # `&#84;` stays
    return text.replace("[", "\\[").replace("]", "\\]").replace("`", "'")


def md_url(url) -> str:
    """An http(s) URL as an autolink (sanitized: core.external.safe_url); anything else is not repeated."""
    from gsd_research.core.external import safe_url

    safe = safe_url(url)
    if safe and re.fullmatch(r"https?://[^\s<>\"`]+", safe):
        return f"<{safe}>"
    return "(no web link)"


# -- rendering -------------------------------------------------------------------------------------
def template_env(config=None):
    """A Jinja2 environment: the user's template dir (config `reports.template_dir`) before the package's."""
    import jinja2

    loaders = []
    user_dir = config.get("reports.template_dir") if config is not None else None
    if user_dir:
        folder = Path(str(user_dir)).expanduser()
        if not folder.is_dir():
            raise UsageError(f"reports.template_dir {folder} is not a folder",
                             suggestions=["gsd-research config set reports.template_dir <folder>",
                                          "Remove reports.template_dir to use the packaged templates"])
        loaders.append(jinja2.FileSystemLoader(str(folder)))
    loaders.append(jinja2.PackageLoader("gsd_research.search", "templates"))
    env = jinja2.Environment(loader=jinja2.ChoiceLoader(loaders), autoescape=False, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["md_inline"] = md_inline
    env.filters["md_url"] = md_url
    return env


def render(env, template_name: str, context: dict) -> str:
    """The rendered template; a broken user template is a usage error that names it."""
    import jinja2

    try:
        return env.get_template(template_name).render(**context)
    except jinja2.TemplateNotFound:
        raise UsageError(f"Report template {template_name} not found") from None
    except jinja2.TemplateError as exc:
        raise UsageError(f"Report template {template_name} failed: {exc.__class__.__name__}: {str(exc)[:200]}",
                         suggestions=["Fix the template in reports.template_dir, or remove that setting"]) from None


# -- the search report model -----------------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def lead_sentences(text: str, max_chars: int = 280) -> str:
    """The first sentence(s) of `text`, up to `max_chars`, cut on a word when one sentence is longer."""
    text = " ".join(str(text or "").split())
    if not text:
        return ""
    out = ""
    for sentence in _SENTENCE.split(text):
        if out and len(out) + 1 + len(sentence) > max_chars:
            break
        out = f"{out} {sentence}".strip()
    if len(out) > max_chars:
        out = out[:max_chars].rsplit(" ", 1)[0] + "…"
    return out


def search_report_context(answer: dict) -> dict:
    """What the search template needs: numbered sources, cited findings, a labelled summary."""
    from gsd_research.core.external import safe_date
    from gsd_research.core.untrusted import REPORT_NOTICE, unfence

    sources, findings = [], []
    for n, item in enumerate(answer.get("results") or [], 1):
        flagged = bool(item.get("injection_flagged"))  # the report frames external text itself (notice, quotes)
        snippet = "" if flagged else lead_sentences(unfence(item.get("snippet", "")), 600)
        title = unfence(str(item.get("title") or "")).strip() or md_url(item.get("url"))
        title = title.strip().rstrip(".")
        sources.append({"n": n, "title": title, "url": item.get("url"),
                        "provider": item.get("provider"), "score": item.get("score"),
                        "published": safe_date(item.get("published_date")), "flagged": flagged, "snippet": snippet})
        if flagged:
            findings.append({"n": n, "flagged": True, "text": ""})
        elif snippet:
            finding = lead_sentences(snippet, 280)
            findings.append({"n": n, "flagged": False, "text": finding})
            sources[-1]["snippet"] = "" if finding == snippet else snippet
    summary, summary_kind = unfence(answer.get("summary")) or None, "provider"
    if not summary or answer.get("summary_flagged"):
        clean = [f for f in findings if not f["flagged"]][:3]
        summary_kind = "extractive" if clean else "none"
        summary = None
        extract = [(f["n"], _SENTENCE.split(f["text"], 1)[0][:200]) for f in clean]
    else:
        extract = []
    meta = answer.get("metadata") or {}
    return {"query": answer.get("query", ""), "fetched_at": answer.get("fetchedAt", ""),
            "backend": meta.get("backend") or answer.get("provider"), "depth": answer.get("depth"),
            "note": meta.get("note"), "failures": meta.get("failures") or [],
            "notice": REPORT_NOTICE if "untrusted" in answer else "", "warnings": answer.get("injection_warnings") or [],
            "summary": summary, "summary_kind": summary_kind, "summary_flagged": bool(answer.get("summary_flagged")),
            "extract": extract, "findings": findings, "sources": sources}
