"""`gsd-research doctor`: which providers and model backends are configured and reachable; where state lives."""

from __future__ import annotations

import os
import sys
import time

import click

from gsd_research import __version__
from gsd_research.commands.housekeeping import _redact_url, _sqlite_damage, _with_budget
from gsd_research.core.config import Config, home
from gsd_research.core.errors import GsdError
from gsd_research.core.provider_env import PROVIDER_ENV
from gsd_research.core.runtime import agent_command

PROBE_TIMEOUT = 2.0
# Where a provider answers a cheap GET (any HTTP answer, even 401/404, means reachable).
PROBE_PATHS = {"ollama": "/api/tags"}
KEY_OPTIONAL = {"context7": "works anonymously (rate-limited)", "ollama": "local, no key needed"}
STATE_DIRS = {"config": "config.yaml", "cache": "cache", "logs": "logs", "jobs": "conversation-logs",
              "knowledge_base": "repositories"}


def _load_config(problems: list[str]) -> Config:
    try:
        return Config()
    except GsdError as exc:
        problems.append(exc.message)
        return Config({})


def _probe(url: str, timeout: float) -> dict:
    """One short GET without credentials and without the cache: reachable or why not."""
    import requests

    started = time.monotonic()
    try:
        resp = requests.get(url, timeout=(timeout, timeout), allow_redirects=False,
                            headers={"User-Agent": f"gsd-research/{__version__} (doctor)"})
    except requests.Timeout:
        return {"reachable": False, "error": "timeout"}
    except requests.RequestException as exc:
        return {"reachable": False, "error": exc.__class__.__name__}
    return {"reachable": True, "status": resp.status_code, "ms": round((time.monotonic() - started) * 1000)}


def _providers(cfg: Config, probe: bool, timeout: float) -> list[dict]:
    rows = []
    for name in PROVIDER_ENV:
        source = cfg.key_source(name)
        row = {"name": name, "configured": bool(source) or name in KEY_OPTIONAL, "key": bool(source),
               "key_source": source, "base_url": _redact_url(cfg.base_url(name))}
        if not source and name in KEY_OPTIONAL:
            row["note"] = KEY_OPTIONAL[name]
        elif not source:
            row["note"] = f"set {PROVIDER_ENV[name][1][0]}"
        rows.append(row)
    if probe:
        _probe_all(rows, [cfg.base_url(r["name"]) + PROBE_PATHS.get(r["name"], "") for r in rows], timeout)
    return rows


def _probe_all(rows: list[dict], urls: list[str], timeout: float) -> None:
    """Probe in parallel daemon threads, bounded overall (a hanging DNS lookup cannot hold doctor up)."""
    import threading

    results: dict[int, dict] = {}

    def work(i: int, url: str) -> None:
        results[i] = _probe(url, timeout)

    threads = [threading.Thread(target=work, args=(i, u), daemon=True) for i, u in enumerate(urls)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 2 * timeout + 0.5
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    for i, row in enumerate(rows):
        row.update(results.get(i) or {"reachable": False, "error": "timeout"})


def _models(rt, rows: list[dict], probe: bool, problems: list[str]) -> dict | None:
    """Per model backend its model and whether it can serve now (the backends' own checks); per LLM task
    the backend its chain would use. None when the configuration cannot be read (reported already)."""
    from gsd_research.llm.router import BACKENDS, DEFAULT_CHAINS, chain_for, make_backend

    reachable = {r["name"]: r.get("reachable", True) for r in rows}
    try:
        backends = {name: make_backend(rt, name) for name in BACKENDS}
        state = {name: _backend_state(b, reachable.get(name, True), probe) for name, b in backends.items()}
        tasks = {}
        for task in DEFAULT_CHAINS:
            need = {"web": "grounding", "image": "vision"}.get(task)
            tasks[task] = next((n for n in chain_for(rt.config, task) if state[n]["usable"]
                                and (need is None or getattr(backends[n], need, False))), None)
    except GsdError as exc:
        if exc.message not in problems:
            problems.append(exc.message)
        return None
    pulled = state["ollama"].get("reason", "")
    if pulled.startswith("model "):
        problems.append(f"Ollama: {pulled}")
    missing = [t for t, name in tasks.items() if name is None]
    if missing and probe:
        problems.append(f"No model backend can serve: {', '.join(missing)} (set GEMINI_API_KEY or OPENAI_API_KEY, "
                        "or start Ollama); summaries fall back to an extractive summary")
    return {"backends": state, "tasks": tasks}


def _backend_state(backend, reachable: bool, probe: bool) -> dict:
    ok, why = backend.configured()
    if ok and not reachable:
        ok, why = False, "unreachable"
    elif ok and backend.name == "ollama":
        ok, why = backend.health() if probe else (True, "not checked (--no-probe)")
    return {"model": backend.model, "usable": ok, **({"reason": why} if why else {})}


def _cache_summary(cfg: Config, problems: list[str]) -> dict:
    from gsd_research.core.http_cache import cache_backend_name, cache_file

    backend = cache_backend_name(cfg)
    info: dict = {"backend": backend}
    if backend == "sqlite":
        path = cache_file()
        info.update({"path": str(path), "exists": path.exists()})
        damage = _sqlite_damage(path) if path.exists() else None
        if damage:
            info["damaged"] = True
            problems.append(f"HTTP cache file {path} is damaged ({damage}); calls run uncached. "
                            "gsd-research cache clear removes it")
    elif backend == "redis":
        info["url"] = _redact_url(str(cfg.get("cache.redis_url")))
        try:
            import redis

            redis.Redis.from_url(str(cfg.get("cache.redis_url")), socket_connect_timeout=1, socket_timeout=1).ping()
            info["reachable"] = True
        except Exception as exc:  # noqa: BLE001 - any failure is reported, never raised
            info["reachable"] = False
            problems.append(f"Redis cache unreachable ({exc.__class__.__name__}); calls run uncached")
    elif backend != "off":
        problems.append(f"Unknown cache backend '{backend}'; set cache.backend to sqlite, redis or off")
    return info


def _home_problem(root) -> str | None:
    """Why state cannot be written under GSD_RESEARCH_HOME, if it cannot (nearest existing ancestor checked)."""
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
        return None
    why = "is not a directory" if probe.exists() and not probe.is_dir() else "is not writable"
    return f"GSD_RESEARCH_HOME {root} cannot hold state: {probe} {why}; point GSD_RESEARCH_HOME at a writable directory"


def _state() -> dict:
    root = home()
    out = {"home": str(root), "home_exists": root.is_dir()}
    for label, rel in STATE_DIRS.items():
        path = root / rel
        out[label] = {"path": str(path), "exists": path.exists()}
    return out


@agent_command("doctor")
@click.option("--no-probe", is_flag=True, help="Skip the network reachability probes (instant, offline).")
@click.option("--timeout", type=click.FloatRange(min=0.1, max=30), default=PROBE_TIMEOUT, show_default=True,
              help="Seconds per reachability probe (probes run in parallel).")
def doctor(rt, no_probe: bool, timeout: float):
    """Which providers are configured and reachable, where state lives, which cache backend is used."""
    problems: list[str] = []
    cfg = _load_config(problems)
    if (home_problem := _home_problem(home())) is not None:
        problems.append(home_problem)
    providers = _providers(cfg, not no_probe, timeout)
    problems += [f"{p['name']} is configured but unreachable ({p['error']}): offline, a proxy, or a wrong base URL "
                 f"({p['base_url']})" for p in providers if p["configured"] and p.get("reachable") is False]
    doc = {
        "version": __version__,
        "python": sys.version.split()[0],
        "state": _state(),
        "cache": _cache_summary(cfg, problems),
        "providers": providers,
        "ready": [p["name"] for p in providers if p["configured"] and p.get("reachable", True)],
        "models": _models(rt, providers, not no_probe, problems),
        "problems": problems,
    }
    return _with_budget(rt, doc)
