"""`gsd-research fetch`: SSRF guard, redirects, caps, content types, extraction, pagination, injection."""

from __future__ import annotations

import pytest

from tests.conftest import SHARED, assert_no_traceback, cl100k_tokens, require
from tests.injection import corpus

# -- SSRF ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/", "http://localhost:9/", "http://[::1]:9/", "http://10.0.0.1/", "http://192.168.1.1/",
    "http://172.16.0.5/", "http://169.254.169.254/latest/meta-data/", "http://0.0.0.0/", "http://2130706433/",
    "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/",
])
def test_private_loopback_and_link_local_refused(cli, url):
    r = cli("fetch", url)
    assert r.code == 2, r.stdout
    assert r.json["error"]["code"] == "BLOCKED_URL"
    assert "GSD_RESEARCH_ALLOW_HOSTS" in " ".join(r.json["error"]["suggestions"])


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://x/", "javascript:alert(1)",
                                 "example.com/page", "http://"])
def test_non_http_urls_refused(cli, url):
    r = cli("fetch", url)
    assert r.code == 2
    assert r.json["error"]["code"] == "BLOCKED_URL"


def test_loopback_refused_without_allow_list_even_with_server(cli, fake):
    r = cli("fetch", fake.url + "/pages/article")
    assert r.json["error"]["code"] == "BLOCKED_URL"
    assert not fake.hits("/pages"), "the guard must refuse before connecting"


def test_allow_list_is_by_host_name(cli, pages):
    r = cli("fetch", pages.url.replace("127.0.0.1", "localhost") + "/pages/article")
    assert r.json["error"]["code"] == "BLOCKED_URL"


@pytest.mark.parametrize("path,where", [("/pages/to-metadata", "169.254.169.254"), ("/pages/to-file", "file"),
                                        ("/pages/to-localhost", "localhost")])
def test_every_redirect_hop_is_checked(cli, pages, path, where):
    r = cli("fetch", pages.url + path)
    assert r.code == 2
    assert r.json["error"]["code"] == "BLOCKED_URL"
    assert where in r.json["error"]["message"]


# -- fetching -----------------------------------------------------------------------------------

def test_article_extractive_summary_without_models(cli, pages):
    r = cli("fetch", pages.url + "/pages/article", "--focus", "python version")
    assert r.code == 0, r.stdout
    doc = r.json
    meta = doc["metadata"]
    assert meta["backend"] == "extractive" and meta["summary_type"] == "extractive"
    assert "no model reachable" in meta["label"]
    assert [t["status"] for t in meta["backends_tried"]] == ["skipped", "unhealthy", "skipped"]
    assert "Python 3.10" in doc["summary"]
    for chrome in ("NAVLINK", "COOKIEBANNER", "RELATEDLINK", "FOOTERTEXT", "<html", "<p>"):
        assert chrome not in r.stdout
    assert doc["untrusted"] and meta["tokens_used"] <= meta["max_tokens"] == 2000


def test_extract_keeps_structure_and_drops_boilerplate(cli, pages):
    r = cli("fetch", pages.url + "/pages/article", "--extract")
    content = r.json["content"]
    assert "# Installing the widget toolkit" in content and "## Requirements" in content
    assert "- Python 3.10 or newer" in content and "1. Create a virtual environment." in content
    assert "| Linux | supported |" in content
    assert "```" in content and "pip install widget_toolkit==4.2.0" in content
    for chrome in ("NAVLINK", "COOKIEBANNER", "RELATEDLINK", "FOOTERTEXT"):
        assert chrome not in content
    assert r.json["metadata"]["page"] == 1 and r.json["metadata"]["pages"] == 1


LONG = "/pages/huge?paragraphs=60"  # about 16,000 tokens: many pages at any budget here, a fifth of the reading


def test_extract_pages_through_long_content(cli, pages):
    first = cli("--max-tokens", "400", "fetch", pages.url + LONG, "--extract")
    meta = first.json["metadata"]
    assert meta["pages"] > 3 and meta["tokens_used"] <= 400
    assert meta["next_page"] == "--extract --page 2 --max-tokens 400"
    second = cli("--max-tokens", "400", "fetch", pages.url + LONG, "--extract", "--page", "2")
    assert second.json["metadata"]["page"] == 2 and second.json["content"] != first.json["content"]
    last = cli("--max-tokens", "400", "fetch", pages.url + LONG, "--extract", "--page", str(meta["pages"]))
    assert "next_page" not in last.json["metadata"]
    beyond = cli("--max-tokens", "400", "fetch", pages.url + LONG, "--extract", "--page", "9999")
    assert beyond.code == 2 and beyond.json["error"]["code"] == "USAGE_ERROR"


@pytest.mark.parametrize("budget", ["300", "800", "2000"])  # 800: the summary stops at 95 % of it
def test_answer_of_a_huge_page_stays_within_the_budget(cli, pages, budget):
    r = cli("--max-tokens", budget, "fetch", pages.url + LONG)
    assert r.code == 0
    assert cl100k_tokens(r.stdout.strip()) <= int(budget)


def test_redirects_followed_with_limit(cli, pages):
    ok = cli("fetch", pages.url + "/pages/redirect/3", "--extract")
    assert ok.code == 0 and ok.json["final_url"].endswith("/pages/article")
    assert ok.json["metadata"]["redirects"] == 4
    too_many = cli("fetch", pages.url + "/pages/redirect/9")
    assert too_many.json["error"]["code"] == "EXTRACTION_FAILED"
    assert "Too many redirects" in too_many.json["error"]["message"]


def test_size_cap(cli, pages, home):
    (home / "config.yaml").write_text((home / "config.yaml").read_text() + "fetch:\n  max_bytes: 100000\n")
    r = cli("fetch", pages.url + "/pages/huge", "--extract")
    assert r.code == 0
    assert r.json["metadata"]["size_capped"] is True


def test_pdf_is_converted(cli, pages):
    r = cli("fetch", pages.url + "/pages/report.pdf", "--extract")
    assert r.code == 0, r.stdout
    assert "revenue grew 12 percent" in r.json["content"]
    assert r.json["metadata"]["content_type"] == "application/pdf"


def test_office_document_is_converted_with_docling(cli, pages):
    require(SHARED / "bench" / "corpora" / "mixed-formats" / "docx_code_blocks.docx", "docling's sample DOCX")
    r = cli("fetch", pages.url + "/pages/code.docx", "--extract")
    assert r.code == 0, r.stdout
    assert "Code-detection fixture" in r.json["content"] and "## " in r.json["content"]
    assert r.json["metadata"]["extraction"] == "docling-docx"


def test_plain_text_is_read(cli, pages):
    r = cli("fetch", pages.url + "/pages/notes.txt", "--extract")
    assert "Python 3.10" in r.json["content"]


def test_unreadable_content_type(cli, pages):
    r = cli("fetch", pages.url + "/pages/picture.png")
    assert r.code == 1 and r.json["error"]["code"] == "EXTRACTION_FAILED"
    assert "image/png" in r.json["error"]["message"]


def test_page_without_content(cli, pages):
    r = cli("fetch", pages.url + "/pages/empty")
    assert r.json["error"]["code"] == "EXTRACTION_FAILED"


def test_not_found_and_upstream_errors(cli, pages):
    missing = cli("fetch", pages.url + "/pages/nope")
    assert missing.code == 4 and missing.json["error"]["code"] == "NOT_FOUND"
    pages.add_fault("/pages/article", "status", times=10, status=503)
    down = cli("fetch", pages.url + "/pages/article")
    assert down.code == 5 and down.json["error"]["code"] == "UPSTREAM_ERROR"


def test_timeout(cli, pages, home):
    (home / "config.yaml").write_text((home / "config.yaml").read_text().replace("read_timeout: 2", "read_timeout: 0.3")
                                      .replace("max_retries: 3", "max_retries: 0"))
    pages.add_fault("/pages/article", "timeout", times=1, delay=1.0)
    r = cli("fetch", pages.url + "/pages/article")
    assert r.code == 6 and r.json["error"]["code"] == "TIMEOUT"


@pytest.mark.timeout(25)  # before the deadline bounded the body, the drip's 30 s ran out first
def test_a_page_trickling_in_past_http_deadline_is_a_timeout(cli, pages, home):
    config = home / "config.yaml"
    config.write_text(config.read_text().replace("deadline: 20", "deadline: 1"))
    pages.add_fault("/pages/article", "drip", delay=0.05)

    r = cli("fetch", pages.url + "/pages/article")

    assert r.code == 6 and r.json["error"]["code"] == "TIMEOUT"
    assert "not read within the 1-second deadline" in r.json["error"]["message"]
    assert any("http.deadline" in s for s in r.json["error"]["suggestions"])


def test_http_deadline_bounds_a_fetch_through_all_its_redirects(cli, pages, home):
    config = home / "config.yaml"
    config.write_text(config.read_text().replace("deadline: 20", "deadline: 2"))
    pages.state["redirect_delay"] = 0.8  # each hop well within the deadline

    r = cli("fetch", pages.url + "/pages/redirect/4")

    assert r.code == 6 and r.json["error"]["code"] == "TIMEOUT"
    assert "not read within the 2-second deadline" in r.json["error"]["message"]


SHORT_CJK = {  # short pages in scripts written without spaces: a few "words" to split() on
    "zh-utf8": ("text/html; charset=utf-8", "<html><head><meta charset=utf-8><title>配置</title></head><body><article>"
                "<h1>配置指南</h1><p>缓冲区的默认大小为四千零九十六字节，可以在配置文件中修改。</p>"
                "<p>该库支持Linux和macOS，Windows支持仍处于实验阶段。</p></article></body></html>", "utf-8", "四千零九十六字节"),
    "ja-sjis": ("text/html", "<html><head><meta charset='shift_jis'><title>設定ガイド</title></head><body><article>"
                "<h1>設定ガイド</h1><p>バッファのサイズは4096バイトです。設定ファイルで変更してください。</p>"
                "</article></body></html>", "shift_jis", "4096バイト"),
}


@pytest.mark.parametrize("name", SHORT_CJK)
def test_a_short_page_in_chinese_or_japanese_is_read(cli, pages, name):
    ctype, html, charset, phrase = SHORT_CJK[name]
    pages.state["replies"] = {name: {"body": html.encode(charset), "content_type": ctype}}

    r = cli("fetch", pages.url + f"/pages/reply/{name}", "--extract")

    assert r.code == 0, r.stdout
    assert phrase in r.json["content"]


@pytest.mark.parametrize("name", SHORT_CJK)
def test_a_short_page_in_chinese_or_japanese_is_summarized_without_a_model(cli, pages, name):
    ctype, html, charset, phrase = SHORT_CJK[name]
    pages.state["replies"] = {name: {"body": html.encode(charset), "content_type": ctype}}

    r = cli("fetch", pages.url + f"/pages/reply/{name}")

    assert r.json["metadata"]["backend"] == "extractive"
    assert phrase in r.json["summary"]


def test_a_gzip_bomb_is_refused_naming_the_decompressed_size_cap(cli, pages, home):
    import gzip

    (home / "config.yaml").write_text((home / "config.yaml").read_text() + "fetch:\n  max_bytes: 100000\n")
    bomb = gzip.compress(b"<html><body><p>" + b"A" * 5_000_000 + b"</p></body></html>")
    pages.state["replies"] = {"bomb": {"body": bomb, "headers": {"Content-Encoding": "gzip"}}}

    r = cli("fetch", pages.url + "/pages/reply/bomb")

    assert r.json["error"]["code"] == "EXTRACTION_FAILED"
    assert "size cap once decompressed" in r.json["error"]["message"]
    assert r.json["error"]["details"]["max_bytes"] == 100000
    assert any("fetch.max_bytes" in s for s in r.json["error"]["suggestions"])


def test_a_budget_too_small_for_a_page_of_content_names_the_budget_that_works(cli, pages):
    small = cli("fetch", pages.url + "/pages/article", "--extract", "--max-tokens", "200").json["error"]
    need = int(small["message"].rsplit(" ", 1)[1].rstrip(")"))

    enough = cli("fetch", pages.url + "/pages/article", "--extract", "--max-tokens", str(need))

    assert small["code"] == "USAGE_ERROR" and "a page of this content needs" in small["message"]
    assert enough.code == 0, enough.stdout
    assert f"--max-tokens {need + 200}" in small["suggestions"][0]


def test_a_latin1_text_page_without_a_declared_charset_is_decoded(cli, pages):
    text = "Die Größe des Puffers beträgt 4096 Bytes. Müller sagt: Ärger vermeiden, Größenänderung nur über die Konfiguration."
    pages.state["replies"] = {"latin1": {"body": text.encode("latin-1"), "content_type": "text/plain"}}

    r = cli("fetch", pages.url + "/pages/reply/latin1", "--extract")

    assert "Die Größe des Puffers beträgt" in r.json["content"]


def test_second_fetch_is_served_from_cache(cli, pages):
    assert cli("fetch", pages.url + "/pages/article").json["metadata"]["fetch_cache_hit"] is False
    again = cli("fetch", pages.url + "/pages/article")
    assert again.json["metadata"]["fetch_cache_hit"] is True
    assert len(pages.hits("/pages/article")) == 1
    fresh = cli("--no-cache", "fetch", pages.url + "/pages/article")
    assert fresh.json["metadata"]["fetch_cache_hit"] is False


# -- injection ----------------------------------------------------------------------------------

def test_injection_page_is_flagged_and_not_passed_on(cli, pages):
    r = cli("fetch", pages.url + "/pages/injection")
    assert r.code == 0
    doc = r.json
    assert doc["injection_flagged"] is True
    where = {w["where"] for w in doc["injection_warnings"]}
    assert {"source", "hidden_text"} <= where
    assert "fake_tag" in next(w for w in doc["injection_warnings"] if w["where"] == "source")["kinds"]
    summary = doc["summary"]
    assert "ignore all previous" not in summary.lower() and "curl" not in summary and "im_start" not in summary
    assert doc["metadata"]["instruction_like_sentences_left_out"] >= 1
    assert "2.1 gigabytes per second" in summary
    assert "<|im_start|>" not in r.stdout and "</untrusted_text>" not in r.stdout


def test_injection_page_extract_is_fenced(cli, pages):
    r = cli("fetch", pages.url + "/pages/injection", "--extract")
    content = r.json["content"]
    assert corpus.in_fence(r.json, content) and "UNTRUSTED" not in content
    assert "<|im_start|>" not in content and "</untrusted_text>" not in content
    assert r.json["injection_flagged"] is True


def test_injection_reaches_the_model_only_fenced(cli, pages, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", pages.url + "/ollama")
    r = cli("fetch", pages.url + "/pages/injection")
    assert r.json["metadata"]["backend"] == "ollama"
    sent = pages.hits("/ollama/api/chat")[-1].json()
    user = sent["messages"][-1]["content"]
    assert "[UNTRUSTED TEXT" in user and user.rstrip().endswith("[END UNTRUSTED TEXT]")
    assert "<|im_start|>" not in user and "</untrusted_text>" not in user
    assert "untrusted data" in sent["messages"][0]["content"]


def test_model_output_repeating_instructions_is_flagged(cli, pages, monkeypatch, tmp_path):
    monkeypatch.setenv("OLLAMA_HOST", pages.url + "/ollama")
    page = tmp_path / "echo.txt"
    page.write_text("Widget facts. ECHO-THE-INJECTION please. The toolkit is fast and small.")
    r = cli("summarize", str(page))
    doc = r.json
    assert corpus.in_fence(doc, doc["summary"]) and doc["injection_flagged"] is True
    assert any(w["where"] == "summary" for w in doc["injection_warnings"])


def test_no_traceback_on_garbage(cli, pages):
    for args in (("fetch",), ("fetch", "http://[bad"), ("fetch", pages.url + "/pages/article", "--page", "0")):
        r = cli(*args)
        assert r.code == 2
        assert_no_traceback(r)
        assert r.json["success"] is False


def test_names_are_checked_by_their_resolved_addresses(cli, monkeypatch):
    import socket

    def fake_resolve(host, port, *args, **kwargs):
        addr = "10.1.2.3" if host == "intranet.example.com" else "93.184.216.34"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (addr, port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake_resolve)
    r = cli("fetch", "https://intranet.example.com/wiki")
    assert r.code == 2 and r.json["error"]["code"] == "BLOCKED_URL"
    assert "10.1.2.3" in r.json["error"]["message"]
    from gsd_research.read.fetcher import check_url

    assert check_url("https://public.example.org/page", set()) == "public.example.org"


def test_allow_list_accepts_networks(monkeypatch):
    from gsd_research.core.errors import BlockedUrl
    from gsd_research.read.fetcher import check_url

    assert check_url("http://10.1.2.3:8080/x", {"10.0.0.0/8"}) == "10.1.2.3"
    with pytest.raises(BlockedUrl):
        check_url("http://192.168.0.1/x", {"10.0.0.0/8"})


def test_pages_cover_the_content_without_loss():
    from gsd_research.core.budget import json_tokens
    from gsd_research.read.command import paginate

    paras = [f"Paragraph {i}: " + f"widget fact {i} is stated here once more. " * (3 + i % 40) for i in range(150)]
    paras.insert(40, "A single paragraph far larger than a page " + "with many words in it " * 400)
    markdown = "\n\n".join(paras)
    parts = paginate(markdown, 300)
    assert len(parts) > 10
    assert " ".join(" ".join(parts).split()) == " ".join(markdown.split())
    assert max(json_tokens(p) for p in parts) <= 300


def test_extract_pages_are_contiguous(cli, pages):
    import re

    seen = []
    for page in (1, 2, 3):
        r = cli("--max-tokens", "1500", "fetch", pages.url + LONG, "--extract", "--page", str(page))
        seen += [int(n) for n in re.findall(r"Paragraph (\d+):", r.json["content"])]
        assert r.json["metadata"]["truncated"] is False
    assert seen == list(range(len(seen))) and len(seen) >= 6


@pytest.mark.parametrize("status", [401, 403])
def test_a_page_refusing_access_is_not_an_api_key_error(cli, pages, status):
    """Regression: a 403 web page came back as INVALID_API_KEY (exit 3, 'Check the provider's API key')."""
    pages.add_fault("/pages/article", "status", times=1, status=status)
    r = cli("fetch", pages.url + "/pages/article")
    assert r.code == 5 and r.json["error"]["code"] == "ACCESS_DENIED", r.stdout
    assert "API key" not in r.stdout and r.json["error"]["suggestions"]


def test_a_missing_page_says_how_to_go_on(cli, pages):
    r = cli("fetch", pages.url + "/pages/nope")
    assert r.code == 4 and r.json["error"]["code"] == "NOT_FOUND"
    assert "Check the URL" in r.json["error"]["suggestions"]


def test_read_commands_report_cache_hit_like_every_other_command(cli, pages, monkeypatch, tmp_path):
    """Consistency: docs/search/deep had metadata.cache_hit; fetch had only fetch_cache_hit, the rest nothing."""
    monkeypatch.setenv("GEMINI_API_KEY", "sk-canary-gem-1234567890")
    url = pages.url + "/pages/article"
    first, again = cli("fetch", url).json, cli("fetch", url).json
    assert first["metadata"]["cache_hit"] is False and again["metadata"]["cache_hit"] is True
    assert cli("fetch", url, "--extract").json["metadata"]["cache_hit"] is True
    assert cli("fetch", url, "--no-cache").json["metadata"]["cache_hit"] is False
    note = tmp_path / "n.txt"
    note.write_text("Widgets are small and the toolkit needs Python 3.10.")
    for args in (("summarize", str(note)), ("analyze", "what?", str(note)), ("web", "widgets")):
        doc = cli(*args).json
        assert isinstance(doc["metadata"]["cache_hit"], bool) and doc["untrusted"], doc


def test_a_name_that_rebinds_to_loopback_after_the_check_is_refused_before_the_request(cli, fake, monkeypatch):
    import socket

    from gsd_research.read import fetcher

    port = int(fake.url.rsplit(":", 1)[1])
    real = socket.getaddrinfo
    monkeypatch.setattr(fetcher, "resolve", lambda host, port: ["93.184.216.34"])  # what the guard saw
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: real("127.0.0.1" if host == "rebind.test"
                                                                         else host, *a, **k))  # what connect sees

    r = cli("fetch", f"http://rebind.test:{port}/pages/article")

    assert r.code == 2 and r.json["error"]["code"] == "BLOCKED_URL"
    assert "connection reached a non-public address (127.0.0.1)" in r.json["error"]["message"]
    assert not fake.hits("/pages"), "the request must not be sent"
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "rebind.test")
    allowed = cli("fetch", f"http://rebind.test:{port}/pages/article")
    assert allowed.code == 0 and fake.hits("/pages")
