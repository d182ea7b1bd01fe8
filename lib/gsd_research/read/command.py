"""Reading without flooding the context: `fetch`, `summarize`, `analyze`, `image`, `web`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gsd_research.core.budget import STAND_IN, check_echo, fit_text, json_tokens, refuse_early, too_small
from gsd_research.core.errors import ExtractionFailed, GsdError, MissingApiKey, NoBackend, UsageError
from gsd_research.core.input_files import MB, read_file, read_stdin
from gsd_research.core.runtime import agent_command

if TYPE_CHECKING:
    from gsd_research.llm.base import Generation


def source_tokens(markdown: str) -> int:
    """cl100k estimate of the source; past 200k characters extrapolated from a sample (speed)."""
    from gsd_research.core.tokens import count_tokens

    if len(markdown) <= 200_000:
        return count_tokens(markdown)
    return int(len(markdown) * count_tokens(markdown[:50_000]) / 50_000)

IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
               (b"GIF89a", "image/gif"))
MAX_IMAGE_BYTES = 20_000_000


# -- turning sources into Markdown ---------------------------------------------------------------

def page_markdown(page) -> tuple[str, str | None, list[str], str]:
    """(markdown, title, hidden texts, method) of a fetched page."""
    from gsd_research.read import extract

    if page.kind == "html":
        found = extract.extract(page.body)
        return found.markdown, found.title, found.hidden_text, found.method
    if page.kind == "text":
        return extract.text_to_markdown(extract.decode_text(page.body, page.encoding)), None, [], "text"
    return convert(page.body, page.kind), None, [], f"docling-{page.kind}"


# -- the model step, with the extractive fallback --------------------------------------------------

def _paid(router, task: str, call, answer: Callable[[Generation], dict], need: str | None = None) -> dict:
    """`answer(generation)` of the chain's first backend that serves `call`. Just before a backend is paid, the
    answer it would give is fitted dry (core.budget.refuse_early): a budget too small for it costs nothing."""
    from gsd_research.llm.base import Generation

    def before(backend) -> None:
        router.tried.append({"backend": backend.name, "model": backend.model, "status": "served"})
        try:
            refuse_early(lambda: answer(Generation(STAND_IN, backend.name, backend.model,  # grounded: a source
                                                   {"input_tokens": 0, "output_tokens": 0}, {"groundingChunks": [{}]})))
        finally:
            router.tried.pop()

    return answer(router.run(task, call, need=need, before=before))


def _model_answer(rt, task: str, prompt: str, system: str, markdown: str, focus: str | None,
                  answer: Callable[[str, dict], dict]) -> dict:
    """`answer(text, metadata)` of the task's chain; with no backend reachable, of an extractive summary of
    `markdown`, what the model would have read."""
    from gsd_research.llm import Router, extractive
    from gsd_research.llm.tasks import output_tokens_for

    router = Router(rt)
    try:
        return _paid(router, task, lambda b: b.generate(prompt, system=system,
                                                        max_output_tokens=output_tokens_for(rt.max_tokens)),
                     lambda gen: answer(gen.text, {"backend": gen.backend, "model": gen.model, "summary_type": "model",
                                                   "backends_tried": router.tried, "usage": gen.usage}))
    except GsdError as exc:
        if not isinstance(exc, NoBackend | MissingApiKey) and "tried" not in exc.details:
            raise  # the chain's own verdict (details.tried) always falls back to the extractive summary
    text, dropped = extractive.summarize(markdown, focus, max(50, rt.max_tokens - 500))
    meta = {"backend": "extractive", "summary_type": "extractive", "label": extractive.LABEL,
            "backends_tried": router.tried}
    if dropped:
        meta["instruction_like_sentences_left_out"] = dropped
    return answer(text, meta)


def _prepare(rt, markdown: str, focus: str | None, meta: dict):
    """What the model reads of `markdown` (read.selection); `meta` says so when it is not the whole."""
    from gsd_research.read.selection import choose

    reading = choose(markdown, focus, int(min(rt.config.number("llm.max_input_tokens", 24000), 2**40)))
    if reading.cut:
        meta["source_cut"] = reading.cut
    return reading.text


def _cache_hit(rt) -> bool:
    """Whether this call was answered from the cache alone (as `metadata.cache_hit` of every command)."""
    return rt.http.cache_hits > 0 and rt.http.upstream_requests == 0


def _finish(doc: dict, field: str, text: str, warnings: list[dict], rt, cache_hit: bool | None = None) -> dict:
    """Check the model's text, attach warnings, fence the answer's external text, fit the budget."""
    from gsd_research.core.untrusted import seal
    from gsd_research.llm.tasks import guard_output

    max_tokens = rt.max_tokens
    doc["metadata"]["cache_hit"] = _cache_hit(rt) if cache_hit is None else cache_hit
    guarded, out_warnings = guard_output(text, field)
    doc[field] = guarded
    all_warnings = warnings + out_warnings
    if all_warnings:
        doc["injection_flagged"] = True
        doc["injection_warnings"] = all_warnings
    seal(doc, ("title", field, "sources"))
    doc["metadata"] = doc.pop("metadata")
    return fit_text(doc, (field,), max_tokens)


# -- fetch --------------------------------------------------------------------------------------

@agent_command("fetch")
@click.argument("url")
@click.option("--focus", default=None, help="What to look for in the page (steers the summary).")
@click.option("--extract", "extract_", is_flag=True, help="Return the main content as Markdown, paginated.")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True, help="Page of --extract output.")
def fetch(rt, url: str, focus: str | None, extract_: bool, page: int):
    """Read URL: its main content summarized (or, with --extract, as Markdown). Never the raw page."""
    from gsd_research.core.untrusted import neutralize
    from gsd_research.llm.tasks import source_warnings
    from gsd_research.read import extract
    from gsd_research.read.fetcher import Fetcher, shown

    check_echo(url + " " + (focus or ""), rt.max_tokens, "URL and --focus text")
    fetcher = Fetcher(rt)
    fetched = fetcher.fetch(url)
    markdown, title, hidden, method = page_markdown(fetched)
    if not markdown.strip() or (fetched.kind == "html" and extract.word_count(markdown) < 5):
        raise _unreadable(fetched, fetcher.max_bytes)
    final = shown(fetched.final_url)  # after redirects: external text, in a safe form (core.external)
    from gsd_research.core.secrets import redact_url

    doc = {"url": redact_url(url), "final_url": final, "title": neutralize(title) if title else None,
           "metadata": {"content_type": fetched.content_type, "extraction": method, "redirects": fetched.redirects,
                        "fetch_cache_hit": fetched.from_cache, "source_tokens": source_tokens(markdown),
                        "size_capped": fetched.capped}}
    warnings = source_warnings(markdown, hidden)
    from gsd_research.memory.api import record_fetch

    recording = record_fetch(rt, url=doc["url"], final_url=redact_url(fetched.final_url), title=title, markdown=markdown,
                             warnings=warnings, extraction=method)  # kept while the summary is written
    try:
        return _answer(rt, doc, markdown, warnings, recording, focus, extract_, page, final)
    except BaseException:
        recording.discard()  # only what was answered is remembered
        raise


def _unreadable(page, max_bytes: int) -> ExtractionFailed:
    """Why a page gave no text: cut at the size cap (which counts decompressed bytes: a gzip bomb hits it),
    or no main content in its HTML."""
    from gsd_research.read.fetcher import shown

    if page.capped:
        return ExtractionFailed(
            f"No readable text in the first {max_bytes} bytes of {shown(page.final_url)}: the page is larger than "
            "the size cap once decompressed", details={"max_bytes": max_bytes},
            suggestions=["If the page is genuine, raise the cap: gsd-research config set fetch.max_bytes N",
                         "gsd-research search for another page on the topic"])
    return ExtractionFailed(f"No readable main content at {shown(page.final_url)}",
                            suggestions=["The page may need JavaScript; try another source",
                                         "gsd-research search for another page on the topic"])


def _answer(rt, doc, markdown, warnings, recording, focus, extract_, page, final) -> dict:
    """fetch's answer: a page of the Markdown (--extract) or the summary."""
    if extract_:
        doc["metadata"]["memory"] = recording.finish()
        return _extract_page(rt, doc, markdown, page, warnings)
    from gsd_research.llm.tasks import SYSTEM_SUMMARY, summary_prompt

    read = _prepare(rt, markdown, focus, doc["metadata"])
    prompt = summary_prompt(read, focus, rt.max_tokens, source=final)
    if focus:
        doc["focus"] = focus

    def answer(text: str, meta: dict) -> dict:  # a dry answer takes the memory's status now, unawaited
        out = copy.deepcopy(doc)
        out["metadata"].update(meta, memory=recording.finish(0 if text is STAND_IN else None))
        return _finish(out, "summary", text, warnings, rt)
    return _model_answer(rt, "url", prompt, SYSTEM_SUMMARY, read, focus, answer)


def chars_per_token(markdown: str) -> float:
    """Characters per (JSON-escaped) token of this text, measured on a sample, with a safety margin."""
    sample = markdown[:20000]
    return max(1.0, 0.85 * len(sample) / max(1, json_tokens(sample)))


def paginate(markdown: str, room: int) -> list[str]:
    """Markdown cut into parts of about `room` tokens on paragraph (else sentence, word) boundaries.

    Sized by characters at the text's own measured characters-per-token (fast on huge pages); the
    chosen part is then fitted exactly by fit_text.
    """
    limit = max(200, int(room * chars_per_token(markdown)))
    parts, current, used = [], [], 0
    for para in markdown.split("\n\n"):
        while len(para) > limit:  # a paragraph larger than a page: cut it on a boundary
            if current:
                parts.append("\n\n".join(current))
                current, used = [], 0
            cut = max(para.rfind(". ", 0, limit) + 1, para.rfind(" ", 0, limit), limit // 2)
            parts.append(para[:cut].rstrip())
            para = para[cut:].lstrip()
        if used + len(para) + 2 > limit and current:
            parts.append("\n\n".join(current))
            current, used = [], 0
        if para:
            current.append(para)
            used += len(para) + 2
    if current:
        parts.append("\n\n".join(current))
    return parts or [""]


def _next_page(doc: dict, page: int, max_tokens: int) -> str:
    """The exact command line of the next page (metadata.next, as every cut answer has)."""
    import shlex

    return shlex.join(["gsd-research", "fetch", str(doc.get("url", "")), "--extract", "--page", str(page),
                       "--max-tokens", str(max_tokens)])


def _extract_page(rt, doc: dict, markdown: str, page: int, warnings: list[dict]) -> dict:
    from gsd_research.core.output import document_tokens
    from gsd_research.core.untrusted import neutralize, seal

    probe = seal(dict(doc, content="", injection_warnings=warnings, injection_flagged=True), ("title", "content"))
    probe["metadata"] = dict(doc["metadata"], page=9999, pages=9999, cache_hit=False, next_page="--page 9999",
                             next=_next_page(doc, 9999, 99999),
                             tokens_used=99999, max_tokens=99999, truncated=False)
    room = rt.max_tokens - document_tokens(probe) - 60  # 60: slack, so no part is cut (the next starts after it)
    if room < 50:  # a page of content needs 50 tokens beside the rest of the answer
        raise too_small(rt.max_tokens, rt.max_tokens - room + 50, "a page of this content needs")
    parts = paginate(markdown, room)
    if page > len(parts):
        raise UsageError(f"Page {page} does not exist: the content has {len(parts)} page(s) at this budget",
                         suggestions=[f"Use --page 1 to {len(parts)} with the same --max-tokens"])
    part = parts[page - 1]
    doc["content"] = neutralize(part)  # inside the answer's fence, flagged or not
    doc["metadata"].update({"page": page, "pages": len(parts), "cache_hit": _cache_hit(rt)})
    if page < len(parts):
        doc["metadata"]["next_page"] = f"--extract --page {page + 1} --max-tokens {rt.max_tokens}"
        doc["metadata"]["next"] = _next_page(doc, page + 1, rt.max_tokens)
    if warnings:
        doc["injection_flagged"] = True
        doc["injection_warnings"] = warnings
    seal(doc, ("title", "content"))
    doc["metadata"] = doc.pop("metadata")
    return fit_text(doc, ("content",), rt.max_tokens)


# -- local inputs of summarize and analyze: a regular file or stdin, documents converted ----------

DOC_SUFFIXES = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx"}
MAX_INPUT_MB = 50  # a file or stdin for summarize/analyze; config inputs.max_mb
INPUT_HINTS = ["Pass one file, or pipe text in with '-'"]


def convert(body: bytes, kind: str) -> str:
    """A PDF or Office document as Markdown (docling); a broken one is an extraction failure."""
    from gsd_research.read.extract import convert_document

    try:
        return convert_document(body, kind)
    except GsdError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken document is an extraction failure, not a crash
        raise ExtractionFailed(f"Cannot convert the {kind.upper()} document ({exc.__class__.__name__})",
                               suggestions=["Check that the file is not corrupt or password-protected"]) from None


def read_input(source: str | None, config) -> tuple[str, str, list[str]]:
    """(label, markdown, hidden texts) of FILE, or of stdin when FILE is '-' or absent."""
    cap = int(config.number("inputs.max_mb", MAX_INPUT_MB) * MB)
    if source in (None, "-"):
        data = read_stdin(cap, what="document", setting="inputs.max_mb", suggestions=INPUT_HINTS)
        label, suffix = "stdin", ""
    else:
        path = Path(source).expanduser()
        data = read_file(path, cap, what="document", setting="inputs.max_mb", shown=source, suggestions=INPUT_HINTS)
        label, suffix = str(path), path.suffix.lower()
    hidden: list[str] = []
    if suffix in DOC_SUFFIXES:
        return label, convert(data, DOC_SUFFIXES[suffix]), hidden
    if b"\0" in data[:8192]:
        raise UsageError(f"{label} looks binary, not text",
                         suggestions=["Pass text, Markdown, HTML, PDF, DOCX, PPTX or XLSX",
                                      "For an image use gsd-research image PATH"])
    from gsd_research.read.extract import decode_text, extract

    text = decode_text(data)
    if suffix in (".html", ".htm") or text.lstrip()[:200].lower().startswith(("<!doctype html", "<html")):
        found = extract(data)
        text, hidden = found.markdown, found.hidden_text
    if not text.strip():
        raise UsageError(f"Nothing to read in {label}", suggestions=["Pass a non-empty file or pipe text in"])
    return label, text, hidden


# -- summarize / analyze --------------------------------------------------------------------------

@agent_command("summarize")
@click.argument("source", required=False, default=None)
@click.option("--focus", default=None, help="What the summary should concentrate on.")
def summarize(rt, source: str | None, focus: str | None):
    """Summarize FILE (text, Markdown, HTML, PDF, Office) or stdin ('-' or nothing)."""
    from gsd_research.llm.tasks import SYSTEM_SUMMARY, source_warnings, summary_prompt

    check_echo(focus or "", rt.max_tokens, "--focus text")
    rt.private_input = True
    label, markdown, hidden = read_input(source, rt.config)
    cut: dict = {}
    read = _prepare(rt, markdown, focus, cut)
    prompt = summary_prompt(read, focus, rt.max_tokens)
    size, warnings = source_tokens(markdown), source_warnings(markdown, hidden)

    def answer(text: str, meta: dict) -> dict:
        doc = {"source": label, "metadata": dict(meta, source_tokens=size, **cut)}
        if focus:
            doc["focus"] = focus
        return _finish(doc, "summary", text, warnings, rt)
    return _model_answer(rt, "summarize", prompt, SYSTEM_SUMMARY, read, focus, answer)


@agent_command("analyze")
@click.argument("question")
@click.argument("source", required=False, default=None)
def analyze(rt, question: str, source: str | None):
    """Answer QUESTION about FILE or stdin through a reasoning model (OpenAI, then Gemini)."""
    from gsd_research.llm.tasks import SYSTEM_ANALYZE, analyze_prompt, source_warnings

    if not question.strip():
        raise UsageError("analyze needs a question", suggestions=['gsd-research analyze "What changed?" notes.md'])
    check_echo(question, rt.max_tokens, "question")
    rt.private_input = True
    label, markdown, hidden = read_input(source, rt.config)
    cut: dict = {}
    read = _prepare(rt, markdown, question, cut)
    prompt = analyze_prompt(read, question, rt.max_tokens)
    size, warnings = source_tokens(markdown), source_warnings(markdown, hidden)
    return _model_answer(rt, "analyze", prompt, SYSTEM_ANALYZE, read, question, lambda text, meta: _finish(
        {"question": question, "source": label, "metadata": dict(meta, source_tokens=size, **cut)}, "answer",
        text, warnings, rt))


# -- image ----------------------------------------------------------------------------------------

def image_mime(data: bytes) -> str | None:
    for magic, mime in IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@agent_command("image")
@click.argument("path")
@click.option("--question", default=None, help="What to ask about the image (default: describe it).")
def image(rt, path: str, question: str | None):
    """Describe an image, or answer --question about it, through a vision model."""
    from gsd_research.llm import Router
    from gsd_research.llm.tasks import SYSTEM_IMAGE, output_tokens_for, words_for

    check_echo(question or "", rt.max_tokens, "question")
    rt.private_input = True
    file = Path(path).expanduser()
    data = read_file(file, MAX_IMAGE_BYTES, shown=path, what="image file", suggestions=["Downscale it"])
    mime = image_mime(data[:16])
    if mime is None:
        raise UsageError(f"{path} is not a PNG, JPEG, GIF or WebP image", suggestions=["Convert it to PNG first"])
    ask = (question or "Describe this image for a researcher: what it shows, any text, numbers or diagrams.")
    ask += f" Answer in at most {words_for(rt.max_tokens)} words."
    router = Router(rt)

    def answer(gen) -> dict:
        return _finish({"path": str(file), "question": question,
                        "metadata": {"backend": gen.backend, "model": gen.model, "backends_tried": router.tried,
                                     "mime_type": mime, "bytes": len(data)}}, "answer", gen.text, [], rt)
    try:
        return _paid(router, "image", lambda b: b.analyze_image(data, mime, ask, system=SYSTEM_IMAGE,
                                                                max_output_tokens=output_tokens_for(rt.max_tokens)),
                     answer, need="vision")
    except GsdError as exc:
        if isinstance(exc, NoBackend | MissingApiKey):
            raise NoBackend("No vision backend is reachable to analyze the image",
                           suggestions=["Start Ollama with a vision model: ollama pull qwen3-vl:8b",
                                        "Or set GEMINI_API_KEY or OPENAI_API_KEY", "gsd-research doctor"],
                           details=exc.details) from None
        raise


# -- web ------------------------------------------------------------------------------------------

REDIRECT_HOST, REDIRECT_PATH = "vertexaisearch.cloud.google.com", "/grounding-api-redirect/"
RESOLVE_SECONDS = 5.0  # for all of an answer's redirects; one not read by then stays a redirect
ANY_STATUS = tuple(range(100, 600))


def cited_urls(rt, urls: list[str | None]) -> list[str | None]:
    """Where Gemini's source links lead: each is a grounding redirect that expires, useless in a research file
    read next month. Only its Location header is read (the page itself is not fetched); a link that cannot be
    read stays as it was."""
    import time
    from urllib.parse import urlsplit

    from gsd_research.core.external import safe_url

    hosts = {REDIRECT_HOST, urlsplit(rt.config.base_url("gemini")).netloc}  # the fake's, in tests
    deadline, out = time.monotonic() + RESOLVE_SECONDS, []
    for url in urls:
        parts = urlsplit(url or "")
        left = deadline - time.monotonic()
        if parts.netloc not in hosts or not parts.path.startswith(REDIRECT_PATH) or left <= 0:
            out.append(url)
            continue
        try:
            reply = rt.http.request("gemini", "GET", url, expected=ANY_STATUS, allow_redirects=False, cache=False,
                                    retries=0, deadline=left)  # any answer is final: no retry, no wait
            out.append((safe_url(reply.headers.get("Location")) if reply.is_redirect else None) or url)
        except GsdError:
            out.append(url)
    return out


def cite(text: str, grounding: dict | None, resolve=None) -> tuple[str, list[dict]]:
    """Numbered sources from groundingMetadata and [n] markers after the segments they support; `resolve`
    turns the source links into the pages they name (cited_urls)."""
    from gsd_research.core.external import safe_url

    grounding = grounding or {}
    chunks = grounding.get("groundingChunks") or []
    webs = [(chunk or {}).get("web") or {} for chunk in chunks]
    urls = [safe_url(web.get("uri")) for web in webs]
    urls = resolve(urls) if resolve else urls
    sources = [{"n": n, "title": web.get("title") or web.get("domain"), "url": url}
               for n, (web, url) in enumerate(zip(webs, urls, strict=True), 1)]
    raw = text.encode("utf-8")
    inserts: dict[int, set[int]] = {}
    for support in grounding.get("groundingSupports") or []:
        end = int(((support or {}).get("segment") or {}).get("endIndex") or 0)
        indices = [i for i in support.get("groundingChunkIndices") or [] if isinstance(i, int) and i < len(chunks)]
        if 0 < end <= len(raw) and indices:
            inserts.setdefault(end, set()).update(indices)
    for end in sorted(inserts, reverse=True):
        marks = "".join(f"[{i + 1}]" for i in sorted(inserts[end]))
        raw = raw[:end] + marks.encode() + raw[end:]
    return raw.decode("utf-8", "replace"), sources


@agent_command("web")
@click.argument("query", nargs=-1, required=True)
@click.option("--depth", type=click.Choice(["quick", "standard", "deep"]), default="standard", show_default=True,
              help="quick: one focused search, a short answer; deep: searches from several angles, compares "
                   "sources and thinks before answering (slower, more tokens).")
def web(rt, query: tuple[str, ...], depth: str):
    """A grounded web answer (Gemini with Google Search) with numbered sources."""
    from gsd_research.core.untrusted import neutralize
    from gsd_research.llm import Router
    from gsd_research.llm.tasks import SYSTEM_WEB, output_tokens_for, web_prompt

    text = " ".join(query).strip()
    if not text:
        raise UsageError("web needs a query", suggestions=['gsd-research web "latest stable Django release"'])
    check_echo(text, rt.max_tokens)
    router = Router(rt)
    prompt, thinking = web_prompt(text, depth, rt.max_tokens)

    def answer(gen) -> dict:
        hit = _cache_hit(rt)  # of the paid call: reading where its links lead is no provider call
        cited, sources = cite(gen.text, gen.grounding, None if gen.text is STAND_IN else lambda urls: cited_urls(rt, urls))
        queries = (gen.grounding or {}).get("webSearchQueries") or []
        doc = {"query": text, "sources": [dict(s, title=neutralize(str(s["title"] or ""))) for s in sources],
               "metadata": {"backend": gen.backend, "model": gen.model, "backends_tried": router.tried,
                            "depth": depth, "grounded": bool(sources), "search_queries": queries[:5],
                            "usage": gen.usage}}
        if not sources:
            doc["metadata"]["note"] = "The model answered without searching: no sources to cite"
        return _finish(doc, "answer", cited, [], rt, cache_hit=hit)
    return _paid(router, "web", lambda b: b.generate(prompt, system=SYSTEM_WEB, search=True, thinking=thinking,
                                                     max_output_tokens=output_tokens_for(rt.max_tokens)),
                 answer, need="grounding")
