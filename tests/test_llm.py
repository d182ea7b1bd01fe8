"""Model backends and routing: real HTTP against the fake Gemini, Ollama and OpenAI, with faults."""

from __future__ import annotations

import pytest

from gsd_research.core.runtime import Runtime
from gsd_research.llm import Router, make_backend
from tests.conftest import GEMINI_KEY, OPENAI_KEY
from tests.injection import corpus


def _text(tmp_path, text="The widget toolkit 4.2.0 needs Python 3.10. It installs with pip. It is fast."):
    path = tmp_path / "notes.md"
    path.write_text(text)
    return str(path)


def test_each_backend_generates_over_http(keys):
    rt = Runtime()
    for name in ("gemini", "ollama", "openai"):
        backend = make_backend(rt, name)
        assert backend.health() == (True, "")
        gen = backend.generate("hello there", system="be brief", max_output_tokens=100)
        assert gen.text.startswith(f"{name} summary:") and gen.backend == name
    assert keys.hits("/gemini")[-1].headers["x-goog-api-key"] == GEMINI_KEY
    assert "key" not in keys.hits("/gemini")[-1].query
    assert keys.hits("/openai")[-1].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    sent = keys.hits("/ollama/api/chat")[-1].json()
    assert sent["stream"] is False and sent["model"] == "qwen3-vl:8b"


def test_ollama_think_block_is_stripped(keys):
    gen = make_backend(Runtime(), "ollama").generate("hi", max_output_tokens=50)
    assert "<think>" not in gen.text


def test_models_come_from_config(keys, home, monkeypatch):
    (home / "config.yaml").write_text((home / "config.yaml").read_text()
                                      + "llm:\n  models:\n    gemini: gemini-2.0-flash\n    openai: gpt-4.1-mini\n")
    monkeypatch.setenv("OLLAMA_MODEL", "llama3.2")
    rt = Runtime()
    make_backend(rt, "gemini").generate("x", max_output_tokens=10)
    assert keys.hits("/gemini")[-1].path.endswith("/models/gemini-2.0-flash:generateContent")
    make_backend(rt, "openai").generate("x", max_output_tokens=10)
    assert keys.hits("/openai")[-1].json()["model"] == "gpt-4.1-mini"
    make_backend(rt, "ollama").generate("x", max_output_tokens=10)
    assert keys.hits("/ollama/api/chat")[-1].json()["model"] == "llama3.2"


def test_ollama_health_needs_the_model_pulled(keys):
    keys.state["ollama_models"] = ["llama3.2:latest"]
    ok, why = make_backend(Runtime(), "ollama").health()
    assert not ok and "not pulled" in why


def test_ollama_health_waits_for_a_slow_server_within_its_probe_timeout(keys):
    """A probe gets its own short timeout (2 s connect, 5 s read), never one cut to ~10 ms: a server that
    answers in 0.3 s (a loaded machine) is healthy, and a down one is still told after one try."""
    keys.state["ollama_tags_delay"] = 0.3
    backend = make_backend(Runtime(), "ollama")

    ok, why = backend.health()

    assert ok and why == "", why
    keys.state["ollama_tags_delay"] = 0
    keys.add_fault("/ollama/api/tags", "drop", times=5)
    assert backend.health()[0] is False and len(keys.hits("/ollama/api/tags")) == 2  # one try each, no retries


DOWN = [(prefix, "status", {"status": 503}) for prefix in ("/ollama", "/gemini", "/openai")]
# (faults, who serves, each backend tried: status and error code); the chain is ollama, gemini, openai
CHAIN = {
    "the first healthy backend": ([], "ollama", [("ollama", "served", None)]),
    "ollama down": ([("/ollama", "drop", {})], "gemini", [("ollama", "unhealthy", None), ("gemini", "served", None)]),
    "generation failures": ([("/ollama/api/chat", "status", {"status": 500}), ("/gemini", "status", {"status": 429})],
                            "openai", [("ollama", "failed", "UPSTREAM_ERROR"), ("gemini", "failed", "RATE_LIMITED"),
                                       ("openai", "served", None)]),
    "a malformed answer": ([("/ollama/api/chat", "malformed", {})], "gemini",
                           [("ollama", "failed", "UPSTREAM_ERROR"), ("gemini", "served", None)]),
    "all down: extractive": (DOWN, "extractive", [("ollama", "unhealthy", None), ("gemini", "failed", "UPSTREAM_ERROR"),
                                                 ("openai", "failed", "UPSTREAM_ERROR")]),
}


@pytest.mark.parametrize("faults, served, tried", list(CHAIN.values()), ids=list(CHAIN))
def test_summarize_falls_through_the_chain_to_the_first_backend_that_answers(cli, keys, tmp_path, faults, served,
                                                                             tried):
    for prefix, kind, opts in faults:
        keys.add_fault(prefix, kind, times=20, **opts)

    r = cli("summarize", _text(tmp_path), "--focus", "python")

    meta = r.json["metadata"]
    assert r.code == 0 and meta["backend"] == served
    assert [(t["backend"], t["status"], t.get("code")) for t in meta["backends_tried"]] == tried
    if served == "extractive":
        assert "no model reachable" in meta["label"] and "Python 3.10" in r.json["summary"]
    else:
        assert r.json["summary"].startswith(f"{served} summary:") and corpus.in_fence(r.json, r.json["summary"])


def test_invalid_key_falls_through_and_is_never_printed(cli, keys, tmp_path, monkeypatch, home):
    monkeypatch.setenv("GEMINI_API_KEY", "bad-canary-GEMINI-0000")
    r = cli("analyze", "what does it need?", _text(tmp_path))
    meta = r.json["metadata"]
    assert meta["backend"] == "openai"
    keys.add_fault("/openai", "status", times=10, status=500)
    r2 = cli("--no-cache", "analyze", "what does it need?", _text(tmp_path))
    tried = r2.json["metadata"]["backends_tried"]
    assert [t["backend"] for t in tried] == ["openai", "gemini"]
    assert tried[1]["code"] == "INVALID_API_KEY"
    for out in (r.stdout, r2.stdout):
        assert "bad-canary" not in out and OPENAI_KEY not in out
    cache = (home / "cache" / "http_cache.sqlite").read_bytes()
    assert b"sk-canary" not in cache and b"bad-canary" not in cache and GEMINI_KEY.encode() not in cache


def test_chain_order_is_configurable(cli, keys, tmp_path, home):
    (home / "config.yaml").write_text((home / "config.yaml").read_text()
                                      + "llm:\n  chains:\n    summarize: [openai, ollama]\n")
    r = cli("summarize", _text(tmp_path))
    assert r.json["metadata"]["backend"] == "openai"


def test_bad_chain_config_is_a_usage_error(cli, keys, tmp_path, home):
    (home / "config.yaml").write_text((home / "config.yaml").read_text() + "llm:\n  chains:\n    summarize: [claude]\n")
    r = cli("summarize", _text(tmp_path))
    assert r.code == 2 and "claude" in r.json["error"]["message"]


def test_router_skips_unconfigured_backends(fake, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/ollama")
    router = Router(Runtime())
    with pytest.raises(Exception) as info:
        router.run("analyze", lambda b: b.generate("q", max_output_tokens=10))
    assert info.value.code == "NO_BACKEND"
    assert [(t["backend"], t["status"]) for t in router.tried] == [("openai", "skipped"), ("gemini", "skipped")]
    assert not fake.hits("/openai") and not fake.hits("/gemini")


def test_analyze_with_nothing_configured_is_extractive(cli, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/ollama")
    r = cli("analyze", "Which Python version?", _text(tmp_path))
    assert r.code == 0
    meta = r.json["metadata"]
    assert meta["backend"] == "extractive"
    assert [t["status"] for t in meta["backends_tried"]] == ["skipped", "skipped"]
    assert "Python 3.10" in r.json["answer"]


def test_llm_answers_are_cached(cli, keys, tmp_path):
    path = _text(tmp_path)
    cli("summarize", path)
    cli("summarize", path)
    assert len(keys.hits("/ollama/api/chat")) == 1
