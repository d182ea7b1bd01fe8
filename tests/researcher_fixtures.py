"""Shared helpers of the researcher tests: offline model seeding, in-process CLI, sample repositories."""

from __future__ import annotations

import io
import os
import shutil
import sys
from contextlib import redirect_stdout
from pathlib import Path

from tests.conftest import MODEL_DIR, SHARED, Result, require

MIXED = SHARED / "bench" / "corpora" / "mixed-formats"


def seed_model(home: Path | None = None, int8: bool = True) -> Path:
    """Chroma's default model where Chroma looks under this test's HOME (symlinks to the offline copy), and
    (`int8`) the int8 build the embedder makes on first use, built once per machine and linked into this
    test's GSD_RESEARCH_HOME, so that every test does not pay the build. Also shares ONNX sessions within the
    test process (`_share_sessions`)."""
    dest = Path(home or os.environ["HOME"]) / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    dest.mkdir(parents=True, exist_ok=True)
    require(MODEL_DIR / "model.onnx", "Chroma's default embedding model (all-MiniLM-L6-v2 ONNX)")
    for f in MODEL_DIR.iterdir():
        target = dest / f.name
        if not target.exists():
            target.symlink_to(f)
    if int8:
        _link_int8(dest / "model.onnx")
    _share_sessions()
    return dest


_SESSIONS: dict[tuple, object] = {}


def _share_sessions() -> None:
    """One ONNX session per model file (its path, size and mtime) and options per test process, instead of one
    per command (0.25-0.45 s each; most tests run several commands): a session keeps no state between runs, so
    sharing one changes no vector. A model file rewritten (a damaged int8 build) is a new key: loaded for real."""
    import onnxruntime as ort

    if getattr(ort.InferenceSession, "shared", False):
        return
    opened = ort.InferenceSession

    def shared(path, sess_options=None, providers=None, **kwargs):
        if kwargs or not isinstance(path, (str, Path)):
            return opened(path, sess_options=sess_options, providers=providers, **kwargs)
        st = Path(path).stat()
        options = None if sess_options is None else (
            sess_options.graph_optimization_level, sess_options.log_severity_level, _spinning(sess_options))
        key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, options, tuple(providers or ()))
        if key not in _SESSIONS:
            _SESSIONS[key] = opened(path, sess_options=sess_options, providers=providers)
        return _SESSIONS[key]

    shared.shared = True
    ort.InferenceSession = shared


def _spinning(options) -> str | None:
    try:
        return options.get_session_config_entry("session.intra_op.allow_spinning")
    except RuntimeError:  # not set
        return None


_INT8_BUILDS: dict[str, Path] = {}


def _int8_build(source: Path, name: str, build=None) -> Path:
    """The int8 model of `source`, built once per machine (not per test process: the build costs seconds of CPU
    each xdist worker would pay) into a shared folder keyed by the build code, under a file lock, so that
    workers and later runs link the same files."""
    import fcntl
    import hashlib
    import stat
    import tempfile

    from gsd_research.researcher.gateways import int8_model

    if name not in _INT8_BUILDS:
        code = hashlib.sha256(Path(int8_model.__file__).read_bytes()).hexdigest()[:12]
        shared = Path(tempfile.gettempdir()) / f"gsd-test-int8-{os.getuid()}-{code}"
        shared.mkdir(mode=0o700, exist_ok=True)
        info = shared.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            shared = Path(tempfile.mkdtemp(prefix="gsd-test-int8-"))  # not ours alone: build privately
        built = shared / name
        with open(shared / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (built.is_file() and int8_model.verified(built)):
                work = Path(tempfile.mkdtemp(prefix="gsd-int8-", dir=shared)) / name
                (build or int8_model.build)(source, work)
                os.replace(int8_model.sidecar(work), int8_model.sidecar(built))
                os.replace(work, built)
                work.parent.rmdir()
        _INT8_BUILDS[name] = built
    return _INT8_BUILDS[name]


def copy_int8_builds(monkeypatch) -> None:
    """Make the embedder's int8 builds copies of the real build made once per test process, for tests whose
    subject is when the model is rebuilt, not how (test_researcher_units'
    test_int8_model_is_built_once_privately_under_the_home_and_reused runs the real build): the copy lands as
    the build's does (0600 model and hash file in a 0700 directory, renamed into place)."""
    from gsd_research.researcher.gateways import int8_model

    real = int8_model.build

    def build(source: Path, target: Path) -> None:
        built = _int8_build(source, target.name, real)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        for src, dst in ((int8_model.sidecar(built), int8_model.sidecar(target)), (built, target)):
            tmp = dst.with_name(f".copy-{dst.name}")
            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o600)
            os.replace(tmp, dst)

    monkeypatch.setattr(int8_model, "build", build)


def _link_int8(source: Path) -> None:
    from gsd_research.researcher.gateways import int8_model

    target = int8_model.cached_path(source)
    if target.exists():
        return
    _int8_build(source, target.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o700)  # as the product makes it, whatever the test's umask
    target.symlink_to(_INT8_BUILDS[target.name])
    int8_model.sidecar(target).symlink_to(int8_model.sidecar(_INT8_BUILDS[target.name]))


KbResult = Result  # the same result shape as gsd-research's `cli` fixture


def kb(*args: str, stdin: str | None = None) -> KbResult:
    """`researcher ARGS` in-process, through the same edge as the console script."""
    from gsd_research.researcher.cli import run

    _freeze_imports()
    out, err = io.StringIO(), io.StringIO()
    old_in, old_err = sys.stdin, sys.stderr
    sys.stdin, sys.stderr = io.StringIO(stdin or ""), err
    try:
        with redirect_stdout(out):
            code = run(list(args))
    finally:
        sys.stdin, sys.stderr = old_in, old_err
    result = KbResult(code, out.getvalue(), err.getvalue())
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


DOCS = {
    "guide/install.md": "# Installation\n\nInstall the widget toolkit with pip. It needs Python 3.10.\n\n"
                        "## Troubleshooting\n\nIf the build fails with ERR_WIDGET_4711, delete the cache folder "
                        "and run the installer again.\n",
    "guide/cooking.md": "# Baking bread\n\nKnead the dough for ten minutes, let it rise for an hour, then bake "
                        "it in a hot oven until the crust is golden brown.\n",
    "notes/astronomy.txt": "The telescope revealed the rings of Saturn and the four largest moons of Jupiter.\n\n"
                           "Stars twinkle because of turbulence in the atmosphere.\n",
    "api/reference.md": "# API\n\n## configure_frobnicator\n\n`configure_frobnicator(level: int)` sets the "
                        "frobnication level of the engine.\n\n```python\nconfigure_frobnicator(3)\n```\n",
}


def make_repo(root: Path, docs: dict[str, str] | None = None) -> Path:
    for rel, text in (docs or DOCS).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def recorded(repo_dir: Path) -> dict[str, dict]:
    """The documents a repository's state record holds, as plain dicts ({} without a record)."""
    from gsd_research.researcher.state import StateGateway

    return {k: v.model_dump(mode="json") for k, v in (StateGateway(repo_dir).load_checksums() or {}).items()}


def in_flight(repo_dir: Path) -> list[str]:
    """The documents the record names as being written by an index run (a killed run leaves them)."""
    from gsd_research.researcher.state import StateGateway

    head = StateGateway(repo_dir).head()
    return head.in_flight if head else []


def next_process() -> None:
    """What the next command sees: a fresh process, without Chroma's clients cached by this one, nor SQLite
    connections an earlier command left to the garbage collector."""
    import gc

    from chromadb.api.shared_system_client import SharedSystemClient

    from gsd_research.researcher.gateways import chroma_gateway

    SharedSystemClient.clear_system_cache()
    chroma_gateway._OPENED.clear()
    gc.collect()
    _freeze_imports()


_FROZEN: list[bool] = []


def _freeze_imports() -> None:
    """Move the heavy libraries' objects (chromadb, onnxruntime, numpy: ~80,000 of them), once loaded, out of the
    garbage collector's sight once per test process, so that each `next_process` collection (and every automatic full
    one) walks only what tests made: ~0.1 s less a collection. Done only while no Chroma client is open, so that
    no store's connection is frozen and kept open after its client is dropped."""
    import gc

    if _FROZEN or not {"chromadb", "numpy", "onnxruntime"} <= set(sys.modules):  # a light command loads none
        return
    from chromadb.api.shared_system_client import SharedSystemClient

    from gsd_research.researcher.gateways import chroma_gateway

    if SharedSystemClient._identifier_to_system or chroma_gateway._OPENED:
        return
    gc.collect()
    gc.freeze()
    _FROZEN.append(True)


_INDEXED: dict[tuple, Path] = {}


def indexed_copy(tmp_path: Path, home: Path, name: str, docs: dict[str, str], folder: str = "repo") -> Path:
    """This test's own copy of a repository `name` holding `docs`, added and indexed: the index is built once per
    test process (into a private temporary directory) and copied into the test's GSD_RESEARCH_HOME, with the
    repository's files copied to tmp_path/folder and the registry pointed at them. The same state as
    `researcher repo add` + `researcher index` made there, without paying the embedding per test."""
    return indexed_copies(tmp_path, home, {name: (docs, folder)})[name]


def indexed_copies(tmp_path: Path, home: Path, repos: dict[str, tuple[dict[str, str], str]]) -> dict[str, Path]:
    """`indexed_copy` of several repositories at once ({name: (docs, folder)}), registered together."""
    import tempfile

    key = tuple((name, folder, tuple(sorted(docs.items()))) for name, (docs, folder) in sorted(repos.items()))
    if key not in _INDEXED:
        base = Path(tempfile.mkdtemp(prefix="gsd-indexed-"))
        saved = os.environ["GSD_RESEARCH_HOME"]
        template_home = base / "home"
        template_home.mkdir()
        (template_home / "config.yaml").write_bytes((home / "config.yaml").read_bytes())
        os.environ["GSD_RESEARCH_HOME"] = str(template_home)
        try:
            seed_model()
            for name, (docs, folder) in repos.items():
                assert kb("repo", "add", name, str(make_repo(base / folder, docs)), "--json").code == 0
            assert kb("index", *(list(repos) if len(repos) == 1 else []), "--json").code == 0
            next_process()  # the stores closed before they are copied
        finally:
            os.environ["GSD_RESEARCH_HOME"] = saved
        _INDEXED[key] = base
    base = _INDEXED[key]
    seed_model()
    for part in ("researcher.yaml", "repositories", ".gsd-research-state"):
        source = base / "home" / part
        if source.is_dir():
            shutil.copytree(source, home / part, symlinks=True, dirs_exist_ok=True)
        elif source.exists():
            shutil.copy2(source, home / part)
    registry = home / "researcher.yaml"
    text = registry.read_text()
    roots = {}
    for name, (_, folder) in repos.items():
        roots[name] = tmp_path / folder
        shutil.copytree(base / folder, roots[name])
        assert f"path: {base / folder}\n" in text, text
        text = text.replace(f"path: {base / folder}\n", f"path: {roots[name]}\n")
    registry.write_text(text)
    return roots


# A separate process, as a user or another tool would: the collection deleted, or some documents' vectors.
_EMPTY = ("import sys, chromadb; from chromadb.config import Settings; "
          "c = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False)); "
          "paths = sys.argv[3:]; col = c.get_collection(sys.argv[2]); "
          "col.delete(where={'document_path': {'$in': paths}}) if paths else c.delete_collection(sys.argv[2])")


def empty_vectors(store: Path, *paths: str, collection: str = "researcher-r") -> None:
    """Delete a collection (or these documents' vectors) of the embedded store at `store` through Chroma."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _EMPTY, str(store), collection, *paths],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# -- the damage matrix's repository (tests/test_researcher_damage.py, _surfaces.py, _state.py) --
PLANTED = "ERRCODE_7712"
MATRIX_DOCS = {
    "a.md": "# Cold caches\n\nThe widget cache is cold after a restart; warm caches answer quickly.\n",
    "b.md": f"# Codes\n\nThe frobnicator reports {PLANTED} when its spool folder is full.\n",
    "c.md": "# Cache sizes\n\nA cold widget cache and a warm widget cache hold the same entries.\n",
    "d.md": "# Spool\n\nThe spool folder of the frobnicator fills when the widget cache is cold.\n",
    "e.md": "# Restarts\n\nA restart empties every cache; the first requests after it are slow.\n",
    "f.md": "# Okapi\n\nThe okapi is a shy forest animal related to the giraffe.\n",
}
QUERY = f"{PLANTED} cold widget cache"
MATRIX_OTHER = {f"o{i}.md": f"# Other {i}\n\nAn unrelated note {i} about sourdough bread and rye flour.\n" for i in range(12)}


# -- a PDF without a text layer (OCR) --
LINES = ("The quokka ledger lists invoice", "number 7731 for the harbour", "warehouse in Fremantle.")


def scanned_pdf(path: Path) -> Path:
    """A one-page PDF that is only an image of text (no text layer), drawn with Pillow."""
    from PIL import Image, ImageDraw, ImageFont

    page = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=64)
    for i, line in enumerate(LINES):
        draw.text((120, 200 + i * 110), line, fill=0, font=font)
    page.save(path, "PDF", resolution=200.0)
    return path


def stored_documents(store) -> set[str]:
    """The documents a vector store (ChromaGateway) or keyword index (LexicalGateway) holds fragments of."""
    if hasattr(store, "collection"):
        return {m["document_path"] for m in store.collection.get(include=["metadatas"])["metadatas"]}
    return {r[0] for r in store.conn.execute("SELECT document_path FROM fragments")}


def lexical_count(lexical) -> int:
    return lexical.conn.execute("SELECT count(*) FROM fragments").fetchone()[0]


def consistent(name: str) -> tuple[int, set[str]]:
    """(fragments, documents) of repository `name`, asserting that both stores and the state record agree with
    each other and the files: no duplicate, no orphan."""
    import hashlib

    from gsd_research.researcher.service_factory import ServiceFactory

    factory = ServiceFactory()
    repo = factory.repository_service.get_repository(name)
    chroma = factory.chroma_factory(repo)()
    ids = chroma.collection.get(include=[])["ids"]
    lexical = factory.lexical_gateway(repo)
    checksums = recorded(factory.repo_dir(repo))
    assert len(ids) == len(set(ids)) == lexical_count(lexical) == sum(v["fragment_count"] for v in checksums.values())
    assert stored_documents(chroma) == stored_documents(lexical) == set(checksums)
    root = Path(repo.path)
    for rel, meta in checksums.items():
        assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == meta["checksum"]
    return len(ids), set(checksums)


def memory_entries(n: int):
    """The research memory holding `n` pages about the flux capacitor (each with its code FLUX_9000+i)."""
    from gsd_research.memory.store import Entry, MemoryStore

    store = MemoryStore()
    store.put_many([Entry(kind="page", body=f"# Page {i}\n\nThe flux capacitor code FLUX_{9000 + i} matters; the "
                          "gasket and the rotor valve are checked daily.", url=f"https://example.com/p{i}",
                          title=f"Page {i}") for i in range(n)])
    return store
