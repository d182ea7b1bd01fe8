"""What every hook shares: the event on stdin, GSD_RESEARCH_HOME and its config file, short quoting helpers.

The hooks run without site-packages (`python -I -S`), so they never import the gsd_research package; they read
the config file with PyYAML, as the CLI does, from the environment bootstrap/ finds ready (else they say so)."""

from __future__ import annotations

import json
import os
import stat
import sys

MODES = ("off", "suggest", "enforce")
STATE_FILE = "hooks-state.json"
CONFIG_CAP = 1 << 20  # bytes of config.yaml read at most
MEMO_FILE = "hooks-config.json"  # the hooks' view of config.yaml (no keys), with the stat it was read at
_CONFIG_PROBLEM: list[str] = []


def gsd_home() -> str:
    return os.environ.get("GSD_RESEARCH_HOME") or os.path.join(os.path.expanduser("~"), ".gsd-research")


def unsafe_home() -> str:
    """Why GSD_RESEARCH_HOME must not be used ('' when it is safe or does not exist yet): it or its config.yaml
    belongs to another user or others may write to it (a symlink judged by what it points at). The rule of
    gsd_research.core.private.unsafe_state (STATE_UNSAFE), which the hooks cannot import; a hook then reads
    and writes nothing there: no config (every mode at its default), no memory, no job announcements."""
    root = gsd_home()
    for path, what in ((root, "GSD_RESEARCH_HOME"), (os.path.join(root, "config.yaml"), "its config file")):
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISDIR(info.st_mode) != (path == root):
            continue  # a home that is a file, a config that is a folder: nothing to read there anyway
        if info.st_uid != os.getuid():
            return f"{what} {path} belongs to another user (uid {info.st_uid})"
        if info.st_mode & 0o022:
            who = "others" if info.st_mode & 0o002 else "its group"
            return f"{what} {path} can be written by {who} (mode {oct(stat.S_IMODE(info.st_mode))})"
    return ""


def unsafe_notice() -> str:
    """What a hook tells the session about an unsafe GSD_RESEARCH_HOME ('' when it is safe)."""
    problem = unsafe_home()
    if not problem:
        return ""
    return (f"gsd-research's state is not safe to use (STATE_UNSAFE): {clip(problem, 300)}; whoever controls it "
            "controls where API keys are sent. Point GSD_RESEARCH_HOME at a private folder of your own (chmod 700)")


def read_event() -> dict:
    """The event JSON on stdin ({} when it is missing, malformed or not an object)."""
    try:
        data = json.loads(sys.stdin.read(1_000_000) or "{}")
    except (ValueError, UnicodeDecodeError, OSError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def load_state() -> dict:
    """What the hooks remember between events (GSD_RESEARCH_HOME/hooks-state.json; {} when unreadable or
    the home is unsafe)."""
    if unsafe_home():
        return {}
    try:
        with open(os.path.join(gsd_home(), STATE_FILE), encoding="utf-8") as fh:
            state = json.load(fh)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(state: dict) -> None:
    """Written atomically; a state that cannot be written (or an unsafe home) is simply not remembered."""
    if unsafe_home():
        return
    path = os.path.join(gsd_home(), STATE_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(gsd_home(), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state, fh)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def config_problem() -> str:
    """Why config.yaml was not read this run ('' when it was, or there is none): said by the next context()."""
    return _CONFIG_PROBLEM[0] if _CONFIG_PROBLEM else ""


def _yaml():
    """PyYAML, as the CLI reads config.yaml: from the environment the launchers would run on, only once
    bootstrap/ has judged it safe and ready (its site-packages appended, no .pth run); None without one."""
    try:
        import yaml
    except ImportError:
        from bootstrap.locate import site_packages
        from bootstrap.verdict import resolve

        from gsd_research_hooks.env_context import plugin_paths

        found = resolve(*plugin_paths())
        if found.state != "ready":
            return None
        sys.path.extend(site_packages(os.path.realpath(found.venv)))
        try:
            import yaml
        except Exception:  # noqa: BLE001 - an environment of another Python: as if there were none
            return None
    return yaml


def load_config() -> dict:
    """GSD_RESEARCH_HOME/config.yaml as the CLI reads it ({} when missing or the home is unsafe; {} and
    config_problem() when it cannot be read: every hook mode then at its default). Its reading is kept in
    MEMO_FILE until the file changes: PyYAML's import costs each hook more than the hook itself."""
    path = os.path.join(gsd_home(), "config.yaml")
    del _CONFIG_PROBLEM[:]
    if unsafe_home():
        return {}
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return _unread(f"{path} cannot be read ({exc.strerror})")
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the hook
        return _unread(f"{path} is not a regular file")
    key = [info.st_mtime_ns, info.st_size, info.st_ino]
    memo = _read_memo()
    if memo.get("key") == key and isinstance(memo.get("config"), dict):
        return memo["config"]
    config = _parse_config(path)
    if not _CONFIG_PROBLEM:
        _write_memo({"key": key, "config": config})
    return config


def _hooks_view(data: dict) -> dict:
    """What the hooks use of the config: hooks.* and which providers have a key (never the key itself)."""
    providers = data.get("providers") if isinstance(data.get("providers"), dict) else {}
    return {"hooks": data.get("hooks") if isinstance(data.get("hooks"), dict) else {},
            "providers": {name: {"api_key": True} for name, value in providers.items()
                          if isinstance(value, dict) and value.get("api_key")}}


def _read_memo() -> dict:
    try:
        with open(os.path.join(gsd_home(), MEMO_FILE), encoding="utf-8") as fh:
            memo = json.load(fh)
        return memo if isinstance(memo, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def _write_memo(memo: dict) -> None:
    """Best effort, atomically: the next hook skips PyYAML's import while config.yaml is unchanged."""
    path = os.path.join(gsd_home(), MEMO_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        text = json.dumps(memo)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _parse_config(path: str) -> dict:
    yaml = _yaml()
    if yaml is None:
        return _unread(f"{path} was not read: its reader comes with gsd-research's Python environment, which is "
                       "not ready")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(CONFIG_CAP + 1)
        if len(text) > CONFIG_CAP:
            return _unread(f"{path} is over {CONFIG_CAP // 1024} KB")
        data = yaml.safe_load(text) or {}
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return _unread(f"{path} cannot be read ({clip(exc, 200)})")
    except yaml.YAMLError as exc:
        return _unread(f"{path} is not valid YAML ({clip(exc, 200)})")
    return _hooks_view(data) if isinstance(data, dict) else _unread(f"{path} does not hold a mapping")


def _unread(problem: str) -> dict:
    _CONFIG_PROBLEM[:] = [problem]
    return {}


def config_get(cfg: dict, dotted: str, default=None):
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def mode(cfg: dict, key: str) -> str:
    """hooks.<key> as off | suggest | enforce (suggest when unset or unknown)."""
    value = str(config_get(cfg, f"hooks.{key}", "suggest") or "suggest").strip().lower()
    if value in ("false", "no", "0"):  # YAML reads a bare `off` as false: `config set ... off` writes that
        return "off"
    return value if value in MODES else "suggest"


def plain_id(value) -> str:
    """A client-given id fit for a shell line and a file name (letters, digits, `-_.`; '' otherwise)."""
    sid = str(value or "").strip()
    return sid if 0 < len(sid) <= 128 and all(c.isalnum() and c.isascii() or c in "-_." for c in sid) else ""


def tool_input(event: dict) -> dict:
    value = event.get("tool_input")
    return value if isinstance(value, dict) else {}


def clip(text, limit: int) -> str:
    """One line of at most `limit` characters."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def context(event_name: str, text: str) -> dict:
    """The hook answer that adds `text` to the model's context (and why config.yaml was not read, if so)."""
    if config_problem():
        text += (f" gsd-research's hooks could not read their settings: {config_problem()}; every hook mode is at "
                 "its default (suggest).")
    return {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}
