"""Shared fixtures: a private GSD_RESEARCH_HOME and HOME per test, the fake provider server, CLI runners."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cache_fixtures import redis_home, redis_server  # noqa: F401 - shared fixtures, registered here

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GSD_SHARED_DIR", ROOT.parent / "shared"))
# Where test.sh puts cl100k's BPE file and Chroma's model when no shared/ is beside the checkout.
TEST_DATA = ROOT / ".test-data"


def offline_path(rel: str) -> Path:
    """Offline test material (model and tokenizer files): ../shared first, then .test-data."""
    for base in (SHARED, TEST_DATA):
        if (base / rel).exists():
            return base / rel
    return SHARED / rel


TIKTOKEN_DIR = offline_path("tokenizers/tiktoken")
CL100K_FILE = TIKTOKEN_DIR / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"  # tiktoken's cache name for cl100k_base
MODEL_DIR = offline_path("models/chroma/all-MiniLM-L6-v2/onnx")


def require(path: Path, what: str) -> Path:
    """Skip (saying what is missing and how to get it) when test material is absent, instead of letting a
    library try to download it in the middle of a test."""
    if not path.exists():
        pytest.skip(f"{what} is missing ({path}): put shared/ beside the checkout, or run ./test.sh, "
                    "which fetches the model and tokenizer files once into .test-data/")
    return path


def cl100k_encoding():
    """tiktoken's cl100k_base from the offline BPE file: the reference every token budget is checked against."""
    require(CL100K_FILE, "cl100k's BPE file")
    import tiktoken

    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(TIKTOKEN_DIR)
    try:
        return tiktoken.get_encoding("cl100k_base")
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous


def cl100k_tokens(text: str) -> int:
    return len(cl100k_encoding().encode(text, disallowed_special=()))


@pytest.fixture(scope="session")
def cl100k():
    return cl100k_encoding()
BIN = Path(sys.executable).parent

# Keys of every provider: tests start with none of them set, whatever the developer's shell has.
KEY_VARS = ("CONTEXT7_API_KEY", "PERPLEXITY_API_KEY", "TAVILY_API_KEY", "OD_TAVILY_API_KEY", "GEMINI_API_KEY",
            "GOOGLE_API_KEY", "OPENAI_API_KEY", "OLLAMA_API_KEY")
URL_VARS = ("CONTEXT7_API_URL", "PERPLEXITY_BASE_URL", "TAVILY_BASE_URL", "GEMINI_BASE_URL", "OLLAMA_HOST",
            "OPENAI_BASE_URL", "GSD_RESEARCH_ALLOW_HOSTS", "PERPLEXITY_ENABLE_ASYNC_DEEP_RESEARCH",
            "PERPLEXITY_POLLING_TIMEOUT_MS", "OLLAMA_MODEL", "GSD_RESEARCH_NPM_REGISTRY_URL",
            "GSD_RESEARCH_PYPI_URL", "GSD_RESEARCH_CRATES_URL")

# Fast, bounded HTTP behaviour for tests (the real retry code runs, with short waits).
TEST_CONFIG = """\
http:
  connect_timeout: 2
  read_timeout: 2
  max_retries: 3
  backoff_base: 0.01
  backoff_max: 0.05
  retry_after_max: 1.5
  deadline: 20
memory:
  embed: "off"  # no detached embedding worker per test: the memory tests embed in-process
"""


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    """Every test gets its own GSD_RESEARCH_HOME and HOME, no provider keys and no base-URL overrides."""
    gsd_home = tmp_path / "gsd-home"
    gsd_home.mkdir()
    (gsd_home / "config.yaml").write_text(TEST_CONFIG)
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(gsd_home))
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_DIR))
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "0")  # no resident search process unless a test starts one
    monkeypatch.delenv("GSD_RESEARCH_SESSION", raising=False)  # no session unless a test sets one
    for name in KEY_VARS + URL_VARS:
        monkeypatch.delenv(name, raising=False)
    return gsd_home


@pytest.fixture(scope="session")
def ready_plugin_template(tmp_path_factory):
    """A small plugin whose environment was built once per session (tests/plugin_env_fixtures.py); tests take
    their own copy through `ready_plugin`, never this one."""
    from tests.plugin_env_fixtures import build_ready_template

    return build_ready_template(tmp_path_factory.mktemp("ready-plugin"))


@pytest.fixture
def ready_plugin(ready_plugin_template, tmp_path):
    """The test's own copy, in tmp_path, of a small plugin whose environment is ready (as if built there)."""
    from tests.plugin_env_fixtures import copy_ready

    return copy_ready(ready_plugin_template, tmp_path)


@pytest.fixture(scope="session")
def fake_server():
    from tests.fakes.server import make_server

    server = make_server()
    yield server
    server.stop()


@pytest.fixture
def fake(fake_server, monkeypatch):
    """The fake provider server with a clean request log and no faults; every base URL points at it."""
    fake_server.clear_faults()
    fake_server.reset_log()
    fake_server.state.clear()
    url = fake_server.url
    monkeypatch.setenv("CONTEXT7_API_URL", url + "/api")
    monkeypatch.setenv("PERPLEXITY_BASE_URL", url + "/perplexity")
    monkeypatch.setenv("TAVILY_BASE_URL", url + "/tavily")
    monkeypatch.setenv("GEMINI_BASE_URL", url + "/gemini")
    monkeypatch.setenv("OLLAMA_HOST", url + "/ollama")
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/openai/v1")
    monkeypatch.setenv("GSD_RESEARCH_NPM_REGISTRY_URL", url + "/npm")
    monkeypatch.setenv("GSD_RESEARCH_PYPI_URL", url + "/pypi")
    monkeypatch.setenv("GSD_RESEARCH_CRATES_URL", url + "/crates")
    yield fake_server
    fake_server.clear_faults()
    fake_server.state.pop("pplx_hang", None)  # wake handlers still hanging on a never-answering route


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict:
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one JSON document on stdout, got: {self.stdout!r} / {self.stderr[-800:]}"
        return json.loads(lines[0])

    @property
    def lines(self) -> list[dict]:
        """One JSON document per line (`researcher search --queries-file --json`)."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


@pytest.fixture
def cli():
    """Run `gsd-research ARGS` in-process (fast); the same edge as the real launcher."""

    def invoke(*args: str, stdin: str | None = None) -> Result:
        from gsd_research.cli import cli as group
        from gsd_research.cli import run

        out, err = io.StringIO(), io.StringIO()
        old_in, old_err = sys.stdin, sys.stderr
        sys.stdin = io.StringIO(stdin or "")
        sys.stderr = err
        try:
            with redirect_stdout(out):
                code = run(group, list(args), "gsd-research", {})
        finally:
            sys.stdin, sys.stderr = old_in, old_err
        return Result(code, out.getvalue(), err.getvalue())

    return invoke


@pytest.fixture
def run_bin():
    """Run an installed console script as a real process with the test's environment."""

    def invoke(name: str, *args: str, stdin: str | None = None, env: dict | None = None, timeout: float = 60) -> Result:
        full_env = dict(os.environ)
        full_env.update(env or {})
        proc = subprocess.run([str(BIN / name), *args], input=stdin, capture_output=True, text=True,
                              env=full_env, timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return invoke


GEMINI_KEY = "gk-canary-GEMINI-1234"
OPENAI_KEY = "sk-canary-OPENAI-5678"


@pytest.fixture
def keys(fake, monkeypatch):
    """Gemini and OpenAI keys (canaries) set, on the fake server: the model backends that need a key."""
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    return fake


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A fresh project folder as the working directory (where lockfiles and reports are looked for)."""
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def retry_waits(monkeypatch) -> list[float]:
    """The waits the HTTP retry loop asked for, recorded instead of slept: a test asserts them, not the clock."""
    from gsd_research.core.http import HttpClient

    waits: list[float] = []
    monkeypatch.setattr(HttpClient, "sleep", staticmethod(waits.append))
    return waits


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr, result.stderr


# -- researcher: the two vector stores every knowledge-base integration test runs against ----------------

@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real Chroma server (`chroma run` from the chromadb package), started and stopped by the tests."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path_factory.mktemp("chroma-server")
    proc = subprocess.Popen([str(BIN / "chroma"), "run", "--path", str(path), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/v2/heartbeat", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("chroma server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(params=["embedded", "server"])
def store(request, home):
    """Which vector store the test runs against (Chroma's model seeded offline). The server store is
    configured with `researcher config set chroma_url` and starts each test without collections."""
    from tests.researcher_fixtures import kb, seed_model

    seed_model()
    if request.param == "server":
        import chromadb
        from chromadb.config import Settings

        url = request.getfixturevalue("chroma_server")
        client = chromadb.HttpClient(host="127.0.0.1", port=int(url.rsplit(":", 1)[1]),
                                     settings=Settings(anonymized_telemetry=False))
        for collection in client.list_collections():
            client.delete_collection(getattr(collection, "name", collection))
        assert kb("config", "set", "chroma_url", url, "--json").code == 0
    return request.param


@pytest.fixture
def user_home(home) -> Path:
    """The test's HOME with ~/.claude/settings.json as a user left it (install.sh's tests)."""
    from tests.install_fixtures import USER_SETTINGS

    user = Path(os.environ["HOME"])
    (user / ".claude").mkdir()
    (user / ".claude" / "settings.json").write_text(USER_SETTINGS)
    return user


def strings(node, path: str = ""):
    """Every string of a JSON document with its path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from strings(value, f"{path}[{i}]")
    elif isinstance(node, str):
        yield path, node


@pytest.fixture
def pages(fake, monkeypatch):
    """The fake server with loopback allowed for fetch, and no model reachable (extractive answers)."""
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    return fake
