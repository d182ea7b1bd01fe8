"""Where state lives and what the user configured: GSD_RESEARCH_HOME and its config.yaml."""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

from gsd_research.core.errors import UsageError
from gsd_research.core.input_files import read_file
from gsd_research.core.provider_env import PROVIDER_ENV

CONFIG_FILE = "config.yaml"
CONFIG_MAX_BYTES = 1_000_000  # a hand-written config is a few KB; a huge one is refused, not parsed

DEFAULTS: dict[str, Any] = {
    "hooks": {"webfetch_mode": "suggest", "context7_mode": "suggest"},  # off | suggest | enforce
    "cache": {
        "backend": "sqlite",  # sqlite | redis | off
        "stats": True,  # count hits and misses in cache/stats.json
        "redis_url": "redis://127.0.0.1:6379/0",
        "ttl": {"docs": 86400, "deep": 21600, "search": 3600, "fetch": 3600, "llm": 86400},
    },
    "http": {
        "connect_timeout": 10.0,
        "read_timeout": 60.0,
        "max_retries": 3,
        "backoff_base": 0.5,
        "backoff_max": 8.0,
        "retry_after_max": 30.0,
        "deadline": 120.0,
    },
    "inputs": {"max_mb": 50},  # the cap on a file or stdin that summarize and analyze read
    # research memory: what fetch, search and deep read, kept for `recall` and `verify`
    # embed: background | off; page_cap_kb: the most of one page (or report) kept; embed_max_*: the
    # background worker's CPU seconds and address space (MB), enforced by the kernel
    "memory": {"enabled": True, "max_mb": 500, "embed": "background", "page_cap_kb": 512,
               "embed_max_cpu_s": 900, "embed_max_mb": 3072},
    "providers": {
        "context7": {"base_url": "https://context7.com/api"},
        "perplexity": {"base_url": "https://api.perplexity.ai"},
        "tavily": {"base_url": "https://api.tavily.com"},
        "gemini": {"base_url": "https://generativelanguage.googleapis.com"},
        "ollama": {"base_url": "http://localhost:11434"},
        "openai": {"base_url": "https://api.openai.com/v1"},
        # package registries `verify` asks about [VERIFIED: npm registry]-style claims (no keys)
        "npm": {"base_url": "https://registry.npmjs.org"},
        "pypi": {"base_url": "https://pypi.org"},
        "crates": {"base_url": "https://crates.io"},
    },
}

SECRET_MARKERS = ("key", "token", "secret", "password")
# The package registries' base-URL variables (they take no key, so they are not in PROVIDER_ENV).
REGISTRY_ENV = {"npm": "GSD_RESEARCH_NPM_REGISTRY_URL", "pypi": "GSD_RESEARCH_PYPI_URL",
                "crates": "GSD_RESEARCH_CRATES_URL"}


def home() -> Path:
    """The root of all state: GSD_RESEARCH_HOME, else ~/.gsd-research."""
    env = os.environ.get("GSD_RESEARCH_HOME")
    return Path(env).expanduser() if env else Path.home() / ".gsd-research"


MEMORY_REPOSITORY = "research-memory"  # reserved: the research memory's knowledge-base repository


def memory_documents() -> Path:
    """The research memory's documents: always under GSD_RESEARCH_HOME (checked as all the state is), never a
    folder another file names."""
    return home() / MEMORY_REPOSITORY / "documents"


def config_path() -> Path:
    return home() / CONFIG_FILE


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def load_user_config(path: Path | None = None) -> dict:
    """The user's config.yaml as written (empty when absent); a broken file is a clear error."""
    path = path or config_path()
    if not path.is_file():
        return {}
    import yaml

    try:
        data = yaml.safe_load(read_file(path, CONFIG_MAX_BYTES, what="config file").decode("utf-8")) or {}
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"Cannot read config file {path}: {exc.__class__.__name__}",
            suggestions=[f"Fix or delete {path}", "gsd-research config show"],
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"Config file {path} must hold a mapping", suggestions=[f"Fix or delete {path}"])
    return data


class Config:
    """Defaults merged with config.yaml; environment variables win for provider URLs and keys."""

    def __init__(self, data: dict | None = None) -> None:
        self.user = load_user_config() if data is None else data
        self.data = _merge(DEFAULTS, self.user)
        providers = self.user.get("providers") if isinstance(self.user, dict) else None
        if isinstance(providers, dict) and any(isinstance(p, dict) and p.get("api_key") for p in providers.values()):
            from gsd_research.core.secrets import register

            for entry in providers.values():
                if isinstance(entry, dict):
                    register(entry.get("api_key"))

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def base_url(self, provider: str) -> str:
        env_name = PROVIDER_ENV.get(provider, (None, ()))[0] or REGISTRY_ENV.get(provider)
        url = (os.environ.get(env_name) if env_name else None) or self.get(f"providers.{provider}.base_url", "")
        if provider == "ollama" and url and "://" not in url:
            url = "http://" + url
        return str(url).rstrip("/")

    def api_key(self, provider: str) -> str | None:
        for name in PROVIDER_ENV.get(provider, (None, ()))[1]:
            value = os.environ.get(name, "").strip()
            if value:
                return value
        value = self.get(f"providers.{provider}.api_key")
        return str(value).strip() if value else None

    def key_source(self, provider: str) -> str | None:
        """Which variable or file supplies a provider's key (never the key itself)."""
        for name in PROVIDER_ENV.get(provider, (None, ()))[1]:
            if os.environ.get(name, "").strip():
                return name
        return "config" if self.get(f"providers.{provider}.api_key") else None

    def number(self, dotted: str, default: float) -> float:
        """A numeric setting >= 0; a hand-edited value that is not one is a clear usage error."""
        raw = self.get(dotted, default)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = -1.0
        if isinstance(raw, bool) or not value >= 0 or value == float("inf"):
            raise UsageError(f"config {dotted} must be a number >= 0, not {raw!r}",
                             suggestions=[f"gsd-research config set {dotted} {default:g}",
                                          f"Or fix {dotted} in {config_path()}"])
        return value

    def ttl(self, kind: str) -> int:
        """Seconds a cached answer lives; a huge hand-edited value means "ten years", not an overflow."""
        return int(min(self.number(f"cache.ttl.{kind}", 3600), TTL_CEILING))


TTL_CEILING = 10 * 365 * 86400  # longer than any cache is kept; dates and SQLite integers stay in range


def is_secret_key(name: str) -> bool:
    """Whether a config key's last part names a secret (api_key, token, …; not max_input_tokens)."""
    last = str(name).lower().rsplit(".", 1)[-1].replace("-", "_")
    return any(last == m or last.endswith("_" + m) or last.startswith(m + "_") for m in SECRET_MARKERS) \
        or last.endswith(("key", "keys"))


def redact(node: Any, parent_key: str = "") -> Any:
    """A copy with every secret-looking value replaced, for display."""
    if isinstance(node, dict):
        return {k: redact(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [redact(v, parent_key) for v in node]
    if node and is_secret_key(parent_key):
        return "***"
    return node


def default_at(dotted: str) -> Any:
    """The built-in default of a dotted key (None when gsd-research has none)."""
    node: Any = DEFAULTS
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def parse_value(raw: str) -> Any:
    """A config value typed from its text: YAML scalars (numbers, booleans, lists)."""
    import yaml

    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def set_value(dotted: str, raw: str, path: Path | None = None) -> Any:
    """Set one dotted key in config.yaml, keeping the rest; written atomically."""
    import yaml

    if not dotted or any(not p for p in dotted.split(".")):
        raise UsageError(f"Invalid config key '{dotted}'", suggestions=["Use a dotted key such as cache.ttl.docs"])
    path = path or config_path()
    data = load_user_config(path)
    value = raw if isinstance(default_at(dotted), str) else parse_value(raw)  # `off` stays a word
    node = data
    parts = dotted.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=True))
    return value


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    """Write a file (0600) so that readers see the old or the new content, never half of it; not `durable`: no
    fsync, for what can be written again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
