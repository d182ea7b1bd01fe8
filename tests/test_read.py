"""`summarize`, `analyze`, `image`, `web`: inputs, outputs, errors, budgets, keys."""

from __future__ import annotations

import pytest

from tests.conftest import GEMINI_KEY, OPENAI_KEY, assert_no_traceback, cl100k_tokens
from tests.injection import corpus

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 100


def test_summarize_stdin(cli, keys):
    r = cli("summarize", "-", stdin="Widgets are small. The toolkit 4.2.0 needs Python 3.10 or newer to install.")
    assert r.code == 0 and r.json["source"] == "stdin"
    assert corpus.in_fence(r.json, r.json["summary"])  # a model's reading of external text is external text too
    assert r.json["summary"].startswith("ollama summary: Widgets are small.")


def test_summarize_html_file_is_extracted_first(cli, keys, tmp_path):
    from tests.fakes.pages import ARTICLE

    path = tmp_path / "page.html"
    path.write_text(ARTICLE)
    r = cli("summarize", str(path))
    sent = keys.hits("/ollama/api/chat")[-1].json()["messages"][-1]["content"]
    assert "Installing the widget toolkit" in sent and "COOKIEBANNER" not in sent and "<p>" not in sent
    assert r.json["metadata"]["source_tokens"] > 100


def test_summarize_html_file_with_hidden_injection_is_flagged(cli, fake, tmp_path, monkeypatch):
    from tests.fakes.pages import INJECTION

    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/down")
    path = tmp_path / "page.html"
    path.write_text(INJECTION)
    r = cli("summarize", str(path))
    assert r.json["injection_flagged"] is True
    assert "hidden_text" in {w["where"] for w in r.json["injection_warnings"]}
    assert "ignore all previous" not in r.json["summary"].lower()


LATIN1 = "Die Größe des Puffers beträgt 4096 Bytes. Müller sagt: Ärger vermeiden, Größenänderung nur über die Konfiguration."


def test_summarize_reads_a_latin1_file_as_fetch_reads_a_latin1_page(cli, keys, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(LATIN1.encode("latin-1"))

    cli("summarize", str(path))

    sent = keys.hits("/ollama/api/chat")[-1].json()["messages"][-1]["content"]
    assert "Die Größe des Puffers beträgt" in sent


def test_summarize_pdf_file(cli, keys, tmp_path):
    from tests.fakes.pages import PDF

    path = tmp_path / "report.pdf"
    path.write_bytes(PDF)
    r = cli("summarize", str(path))
    assert r.code == 0 and "revenue grew 12 percent" in r.json["summary"]
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 garbage")
    bad = cli("summarize", str(broken))
    assert bad.code == 1 and bad.json["error"]["code"] == "EXTRACTION_FAILED"
    assert_no_traceback(bad)


def test_summarize_focus_reaches_the_model(cli, keys, tmp_path):
    path = tmp_path / "n.txt"
    path.write_text("Some text about widgets and their installation on many platforms.")
    cli("summarize", str(path), "--focus", "Windows support")
    assert "Focus on: Windows support" in keys.hits("/ollama/api/chat")[-1].json()["messages"][-1]["content"]


def test_summarize_missing_and_empty_input(cli, tmp_path):
    missing = cli("summarize", str(tmp_path / "nope.txt"))
    assert missing.code == 4 and missing.json["error"]["code"] == "NOT_FOUND"
    empty = cli("summarize", "-", stdin="   ")
    assert empty.code == 2 and empty.json["error"]["code"] == "USAGE_ERROR"


def test_summarize_budget_is_honoured(cli, keys, tmp_path, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", keys.url + "/down")
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY")
    text = " ".join(f"Sentence number {i} describes widget feature {i} in some detail for the reader." for i in range(600))
    r = cli("--max-tokens", "300", "summarize", "-", stdin=text)
    assert r.code == 0 and r.json["metadata"]["backend"] == "extractive"
    assert cl100k_tokens(r.stdout.strip()) <= 300


def test_analyze_prefers_openai_and_fences(cli, keys, tmp_path):
    path = tmp_path / "n.md"
    path.write_text("The release 4.2.0 dropped Python 3.9 support.")
    r = cli("analyze", "Which Python versions are supported?", str(path))
    assert r.code == 0 and r.json["metadata"]["backend"] == "openai"
    sent = keys.hits("/openai")[-1].json()["messages"]
    assert "Question: Which Python versions are supported?" in sent[-1]["content"]
    assert "[UNTRUSTED TEXT" in sent[-1]["content"] and sent[0]["role"] == "system"
    assert OPENAI_KEY not in r.stdout


def test_analyze_needs_a_question(cli):
    r = cli("analyze", "  ")
    assert r.code == 2 and r.json["error"]["code"] == "USAGE_ERROR"


def test_image_via_ollama_vision(cli, keys, tmp_path):
    path = tmp_path / "shot.png"
    path.write_bytes(PNG)
    r = cli("image", str(path), "--question", "What colour is it?")
    assert r.code == 0, r.stdout
    assert r.json["metadata"]["backend"] == "ollama" and "red square" in r.json["answer"]
    sent = keys.hits("/ollama/api/chat")[-1].json()["messages"][-1]
    assert sent["images"] and "What colour is it?" in sent["content"]


def test_image_falls_back_to_gemini_then_openai(cli, keys, tmp_path):
    path = tmp_path / "shot.png"
    path.write_bytes(PNG)
    keys.state["ollama_models"] = ["llama3.2:latest"]  # no vision model pulled
    r = cli("image", str(path))
    assert r.json["metadata"]["backend"] == "gemini" and "image/png" in r.json["answer"]
    keys.add_fault("/gemini", "status", times=10, status=500)
    r2 = cli("--no-cache", "image", str(path))
    assert r2.json["metadata"]["backend"] == "openai"


def test_image_without_vision_backend_is_a_clear_error(cli, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/down")
    path = tmp_path / "shot.png"
    path.write_bytes(PNG)
    r = cli("image", str(path))
    assert r.code == 5 and r.json["error"]["code"] == "NO_BACKEND"
    assert "vision" in r.json["error"]["message"]
    assert any("ollama pull" in s for s in r.json["error"]["suggestions"])
    assert_no_traceback(r)


def test_image_input_errors(cli, tmp_path):
    assert cli("image", str(tmp_path / "none.png")).json["error"]["code"] == "NOT_FOUND"
    text = tmp_path / "x.png"
    text.write_text("not an image")
    r = cli("image", str(text))
    assert r.code == 2 and "not a PNG" in r.json["error"]["message"]


def test_web_grounded_with_numbered_sources(cli, keys):
    r = cli("web", "who won euro 2024")
    assert r.code == 0
    doc = r.json
    assert corpus.in_fence(doc, doc["answer"]) and corpus.in_fence(doc, doc["sources"]) and doc["answer"].strip() == (
        "Spain won Euro 2024, defeating England 2-1 in the final.[1] "
        "This victory marks Spain's record fourth European Championship title.[1][2]")
    assert [s["n"] for s in doc["sources"]] == [1, 2] and doc["sources"][1]["title"] == "uefa.com"
    assert doc["metadata"]["grounded"] is True and doc["metadata"]["search_queries"]
    sent = keys.hits("/gemini")[-1].json()
    assert sent["tools"] == [{"google_search": {}}]
    assert GEMINI_KEY not in r.stdout


def test_web_sources_name_the_pages_not_the_expiring_grounding_redirects(cli, keys):
    from tests.fakes.gemini import PAGES

    first = cli("web", "who won euro 2024")
    again = cli("web", "who won euro 2024")

    assert [s["url"] for s in first.json["sources"]] == list(PAGES.values())
    assert again.json["sources"] == first.json["sources"] and again.json["metadata"]["cache_hit"] is True


@pytest.mark.parametrize("status", [503, 200], ids=["refused", "a page, not a redirect"])
def test_a_grounding_redirect_that_cannot_be_read_stays_the_source(cli, keys, status):
    keys.add_fault("/grounding-api-redirect/", "status", status=status, times=10)

    r = cli("web", "who won euro 2024")

    assert r.code == 0 and all("/grounding-api-redirect/" in s["url"] for s in r.json["sources"])
    assert len(keys.hits("/grounding-api-redirect/")) == 2  # once each: an answer is final


def _sent(fake) -> tuple[str, dict]:
    body = fake.hits("/gemini")[-1].json()
    return body["contents"][0]["parts"][0]["text"], body["generationConfig"]


# (options, depth, what the prompt ends with or holds, thinking budget, output room)
DEPTHS = {
    "standard by default": ((), "standard", "Answer in at most 1100 words.", 0, 1800),
    "deep searches wider and thinks": (("--depth", "deep"), "deep",
                                       "search from several angles", 2048, 1800 + 2048),
    "quick asks for a short answer": (("--depth", "quick"), "quick",
                                      "Answer from one focused search, in at most 80 words.", 0, None),
}


@pytest.mark.parametrize("options, depth, asked, thinking, room", list(DEPTHS.values()), ids=list(DEPTHS))
def test_web_depth_shapes_the_prompt_and_the_thinking_budget(cli, keys, options, depth, asked, thinking, room):
    r = cli("web", *options, "who won euro 2024")

    prompt, config = _sent(keys)
    assert r.code == 0 and r.json["metadata"]["depth"] == depth and r.json["metadata"]["grounded"] is True
    assert asked in prompt and (depth == "deep" or prompt.endswith(asked))
    assert config["thinkingConfig"] == {"thinkingBudget": thinking}
    assert room is None or config["maxOutputTokens"] == room  # the thinking does not eat the answer's room
    assert keys.hits("/gemini")[-1].json()["tools"] == [{"google_search": {}}]


def test_web_depths_are_separate_answers_not_one_cached(cli, keys):
    for depth in ("quick", "deep", "quick"):
        assert cli("web", "who won euro 2024", "--depth", depth).code == 0
    assert len(keys.hits("/gemini")) == 2  # the second quick is a cache hit; deep is its own request


def test_web_depth_unknown_is_a_usage_error_before_any_request(cli, keys):
    r = cli("web", "who won euro 2024", "--depth", "exhaustive")

    assert r.code == 2 and r.json["error"]["code"] == "USAGE_ERROR"
    assert "quick" in r.json["error"]["message"] and "deep" in r.json["error"]["message"]
    assert keys.hits("/gemini") == []


def test_web_depth_deep_on_a_model_without_thinking_sends_no_thinking_config(cli, keys, home):
    assert cli("config", "set", "llm.models.gemini", "gemini-2.0-flash").code == 0

    assert cli("web", "--depth", "deep", "who won euro 2024").code == 0

    prompt, config = _sent(keys)
    assert "thinkingConfig" not in config and "several angles" in prompt


def test_web_without_search_says_so(cli, keys):
    r = cli("web", "no-search question")
    assert r.json["sources"] == [] and r.json["metadata"]["grounded"] is False and "note" in r.json["metadata"]


def test_web_needs_gemini_key(cli, fake):
    r = cli("web", "anything")
    assert r.code == 3 and r.json["error"]["code"] == "MISSING_API_KEY"
    assert any("GEMINI_API_KEY" in s for s in r.json["error"]["suggestions"])


def test_web_gemini_failure_is_an_error(cli, keys):
    keys.add_fault("/gemini", "status", times=10, status=503)
    r = cli("web", "anything")
    assert r.code == 5 and r.json["error"]["code"] == "UPSTREAM_ERROR"  # the one backend's own error
    assert r.json["error"]["details"]["tried"][0]["code"] == "UPSTREAM_ERROR"


def test_a_rejected_key_of_the_only_backend_says_so(cli, fake, monkeypatch, tmp_path):
    """Regression: a bad GEMINI_API_KEY made `web` answer NO_BACKEND (exit 5, 'check the backends')
    instead of INVALID_API_KEY (exit 3, 'Check GEMINI_API_KEY'); text commands still fall back."""
    monkeypatch.setenv("GEMINI_API_KEY", "bad-canary-key-123456")
    r = cli("web", "anything")
    assert r.code == 3 and r.json["error"]["code"] == "INVALID_API_KEY", r.stdout
    assert any("GEMINI_API_KEY" in s for s in r.json["error"]["suggestions"]) and "canary" not in r.stdout
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/down")
    note = tmp_path / "n.txt"
    note.write_text("Widgets are small. The toolkit needs Python 3.10 or newer to install on Linux.")
    summary = cli("summarize", str(note))
    assert summary.code == 0 and summary.json["metadata"]["summary_type"] == "extractive"
    cli("config", "set", "llm.chains.summarize", "[gemini]")  # the one backend fails: still extractive
    summary = cli("summarize", str(note))
    assert summary.code == 0 and summary.json["metadata"]["summary_type"] == "extractive"
    assert summary.json["metadata"]["backends_tried"][0]["code"] == "INVALID_API_KEY"


def test_real_process_prints_one_document(run_bin, keys, tmp_path):
    path = tmp_path / "n.txt"
    path.write_text("Widgets are small. The toolkit 4.2.0 needs Python 3.10 or newer to install.")
    r = run_bin("gsd-research", "summarize", str(path), "--max-tokens", "500")
    assert r.code == 0 and r.json["success"] is True
    assert GEMINI_KEY not in r.stdout + r.stderr and OPENAI_KEY not in r.stdout + r.stderr


def test_closed_stdin_is_a_usage_error_not_a_crash(run_bin, tmp_path):
    """Regression: `summarize <&-` (sys.stdin is None) crashed with INTERNAL_ERROR."""
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "gsd-research")
    for args in (["summarize"], ["analyze", "what is it?"]):
        proc = subprocess.run([exe, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60, preexec_fn=lambda: __import__("os").close(0))
        assert proc.returncode == 2, proc.stdout
        assert '"USAGE_ERROR"' in proc.stdout and "Nothing to read in stdin" in proc.stdout
        assert "Traceback" not in proc.stderr


def test_directory_and_binary_inputs_are_usage_errors(cli, tmp_path):
    """Regression: a directory was reported as 'No such file' (exit 4); a binary file was sent to the model."""
    blob = tmp_path / "blob.dat"
    blob.write_bytes(b"ELF\0\1\2binary\xff\xfe")
    for args, words in ((("summarize", str(tmp_path)), "is a directory"), (("analyze", "q", str(tmp_path)), "is a directory"),
                        (("image", str(tmp_path)), "is a directory"), (("summarize", str(blob)), "looks binary")):
        r = cli(*args)
        assert r.code == 2 and r.json["error"]["code"] == "USAGE_ERROR", r.stdout
        assert words in r.json["error"]["message"] and r.json["error"]["suggestions"]
    assert cli("summarize", "-", stdin="\0\0binary").json["error"]["message"] == "stdin looks binary, not text"


def test_summarize_never_succeeds_with_an_empty_summary(cli, keys, tmp_path):
    """Regression: a budget leaving no room for text printed `"summary": ""` with exit 0."""
    notes = tmp_path / "notes.md"
    notes.write_text("The widget toolkit needs Python 3.10. It runs on Linux, macOS and Windows. " * 40)
    for budget in range(100, 260, 10):
        r = cli("summarize", str(notes), "--max-tokens", str(budget))
        assert r.code == 2 or r.json["summary"], budget
