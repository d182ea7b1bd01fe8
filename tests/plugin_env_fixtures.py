"""A small plugin to build environments for, offline: the real bin/, bootstrap/ and hooks/, a stand-in package
whose CLI imports one locked dependency, and a lock pinning that dependency (with its hash) from a local
wheelhouse of wheels made here. Builds then take seconds and reach no network, through the product's own
lock -> venv -> pip path (PIP_NO_INDEX and PIP_FIND_LINKS point pip at the wheelhouse)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from tests.conftest import ROOT

CLI = '''"""Stand-in CLI: prints what it ran on; `hold FILE` waits for FILE, then imports tinydep.late (a process
that runs a while and imports lazily, as a detached deep research worker does)."""
import importlib
import json
import os
import subprocess
import sys
import time
import time

import tinydep


def main():
    if sys.argv[1:2] == ["child"]:  # as the deep worker starts: `python -m`, the environment inherited
        print(json.dumps({"holding": os.getpid()}), flush=True)
        while len(sys.argv) > 2 and not os.path.exists(sys.argv[2]):  # `child FILE`: once FILE exists
            time.sleep(0.05)
        code = "import gsd_research.cli as c, json; print(json.dumps({'child_file': c.__file__}))"
        print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout, end="")
        return
    if sys.argv[1:2] == ["hold"]:
        print(json.dumps({"holding": os.getpid()}), flush=True)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.05)
        late = importlib.import_module("tinydep.late")
        print(json.dumps({"success": True, "late": late.VALUE, "prefix": sys.prefix}))
        return
    print(json.dumps({"success": True, "command": "version" if "--version" in sys.argv else sys.argv[1:2],
                      "tinydep": tinydep.VALUE, "package_file": __file__, "python": sys.executable}))
'''


def make_wheel(wheelhouse: Path, version: str, padding: tuple[int, int] = (0, 0)) -> Path:
    """tinydep-<version>-py3-none-any.whl, a valid wheel written by hand; `padding` (files, bytes each) makes
    its installation slow or large."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    dist = f"tinydep-{version}.dist-info"
    files = {"tinydep/__init__.py": f'VALUE = "{version}"\n', "tinydep/late.py": f'VALUE = "{version}"\n',
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: tinydep\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    for i in range(padding[0]):
        files[f"tinydep/data/f{i}.txt"] = f"{i}\n" + "#" * padding[1]
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    path = wheelhouse / f"tinydep-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def lock_text(wheel: Path, version: str, bad_hash: bool = False) -> str:
    digest = "0" * 64 if bad_hash else hashlib.sha256(wheel.read_bytes()).hexdigest()
    return f"# test lock\ntinydep=={version} \\\n    --hash=sha256:{digest}\n    # via gsd-research\n"


class TinyPlugin:
    """The plugin under test: `root` (bin/, bootstrap/, hooks/, lib/, requirements.lock) and its data directory."""

    def __init__(self, base: Path):
        self.base = base
        self.root = base / "plugin root"  # a space in the path on purpose
        self.data = base / "claude-home" / ".claude" / "plugins" / "data" / "research-gsd-research"
        self.wheelhouse = base / "wheelhouse"
        for part in ("bin", "bootstrap", "hooks"):
            shutil.copytree(ROOT / part, self.root / part, ignore=shutil.ignore_patterns("__pycache__"))
        package = self.root / "lib" / "gsd_research"
        (package / "researcher").mkdir(parents=True)
        (package / "__init__.py").write_text('__version__ = "0.0.0-test"\n')
        (package / "cli.py").write_text(CLI)
        (package / "researcher" / "__init__.py").write_text("")
        (package / "researcher" / "cli.py").write_text(CLI)
        self.use_version("1.0")

    def use_version(self, version: str, bad_hash: bool = False, padding: tuple[int, int] = (0, 0)) -> None:
        """Pin tinydep==version in the plugin's lock (as a plugin update would)."""
        wheel = make_wheel(self.wheelhouse, version, padding)
        (self.root / "requirements.lock").write_text(lock_text(wheel, version, bad_hash))

    def env(self, **extra: str) -> dict:
        """No environment anywhere but the plugin's; pip only sees the wheelhouse; no uv on PATH."""
        home = self.base / "claude-home"
        home.mkdir(exist_ok=True)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
               "XDG_DATA_HOME": str(self.base / "xdg"), "GSD_RESEARCH_HOME": str(self.base / "gsd-home"),
               "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheelhouse), "PIP_CONFIG_FILE": os.devnull,
               "GSD_RESEARCH_PLUGIN_DATA": str(self.data)}
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def launch(self, *args: str, prog: str = "gsd-research", timeout: float = 120, **env: str):
        return subprocess.run([str(self.root / "bin" / prog), *args], capture_output=True, text=True,
                              env=self.env(**env), timeout=timeout, cwd=self.base)

    def hook(self, event: str, payload: dict, **env: str) -> subprocess.CompletedProcess:
        full = self.env(CLAUDE_PLUGIN_ROOT=str(self.root), CLAUDE_PLUGIN_DATA=str(self.data), **env)
        full.pop("GSD_RESEARCH_PLUGIN_DATA")  # hooks get the client's variables, not the export
        return subprocess.run([str(self.root / "hooks" / "run"), event], input=json.dumps(payload),
                              capture_output=True, text=True, env=full, timeout=10)

    def state(self) -> dict:
        path = self.data / "gsd-research-env.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def envs(self) -> list[str]:
        return sorted(p.name for p in (self.data / "envs").iterdir()) if (self.data / "envs").exists() else []

    def digest(self) -> str:
        return hashlib.sha256((self.root / "requirements.lock").read_bytes()).hexdigest()

    def link(self) -> Path:
        """<data>/current/<digest16>: the ready environment of this plugin's lock."""
        return self.data / "current" / self.digest()[:16]

    def current(self) -> Path:
        """The environment this plugin's lock runs on (envs/<lock digest>-<stamp>)."""
        return self.link().resolve()

    def builder(self) -> subprocess.Popen:
        """A build started as the hooks start it (detached, its own process group)."""
        return subprocess.Popen([sys.executable, "-I", "-S", "-B", str(self.root / "bootstrap"),
                                 "build", str(self.root), str(self.data)], env=self.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def copy(self, root: Path) -> TinyPlugin:
        """The same plugin at another root (a plugin update, or a second install), sharing this data directory."""
        shutil.copytree(self.root, root)
        other = TinyPlugin.__new__(TinyPlugin)
        other.__dict__.update(self.__dict__)
        other.root = root
        return other


SESSION = {"session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": "SessionStart",
           "source": "startup"}


def envelope(proc: subprocess.CompletedProcess) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (proc.stdout, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(lines[0])


def wait_until(predicate, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def context(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def age(env: Path, days: float) -> None:
    """As if `env` was last used `days` ago."""
    used = env / ".gsd-research-used"
    used.touch()
    os.utime(used, (time.time() - days * 86400,) * 2)


def build_ready_template(base: Path) -> TinyPlugin:
    """A TinyPlugin whose environment (tinydep 1.0) its launcher built (conftest's session fixture
    `ready_plugin_template`). Never used in place: `copy_ready` copies it into the test's own directory."""
    template = TinyPlugin(base)
    assert envelope(template.launch("--version"))["tinydep"] == "1.0"
    return template


def copy_ready(ready_template: TinyPlugin, tmp_path: Path) -> TinyPlugin:
    """A TinyPlugin in the test's tmp_path whose environment is ready, as if its first call had built it there:
    the template copied with `cp -a` (modes, times and the relative `current` links kept), and the absolute
    plugin paths the build recorded (plugin-roots.json, the state file, the marker) pointed at the copy."""
    old, new = os.path.realpath(ready_template.base), os.path.realpath(tmp_path)
    subprocess.run(["cp", "-a", f"{ready_template.base}/.", str(tmp_path)], check=True)
    plugin = TinyPlugin.__new__(TinyPlugin)
    plugin.__dict__.update(ready_template.__dict__)
    for name in ("base", "root", "data", "wheelhouse"):
        setattr(plugin, name, Path(str(getattr(ready_template, name)).replace(str(ready_template.base), str(tmp_path))))
    recorded = [plugin.data / "plugin-roots.json", plugin.data / "gsd-research-env.json",
                *(plugin.data / "envs").glob("*/.gsd-research-ready")]
    for path in recorded:
        stat = path.stat()
        path.write_text(path.read_text().replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert envelope(plugin.launch("--version"))["python"] == str(ready_template.current() / "bin" / "python").replace(
        str(ready_template.base), str(tmp_path))  # the copied environment runs: no build
    return plugin
