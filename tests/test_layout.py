"""The package layout: one package per capability over a small core, no cycles, no reaching into another
capability's modules. Read from the source with `ast` (nothing is imported). Module sizes are a report
(`bench/module_sizes.py`), not a gate: a module is split by idea, not by line count."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "lib" / "gsd_research"
# DESIGN.md's capability table: docs, deep (+ jobs), search, read (fetch, summarize, analyze, image, web),
# researcher (knowledge base), memory (recall), verify (citation checks); core and llm are shared layers,
# commands is housekeeping (cache, usage, doctor, config). The injection-detection engine sits under core:
# it imports nothing of the package, and only core (its fence, core.untrusted) imports it.
CAPABILITIES = {"docs", "deep", "search", "read", "researcher", "memory", "verify"}
SHARED = {"core", "llm"}
ENGINE = {"injection"}
HOUSEKEEPING = {"commands"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every gsd_research module `name` imports, at module level or inside functions."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_top_level_folders_are_the_capabilities_over_a_shared_core():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    known = CAPABILITIES | SHARED | ENGINE | HOUSEKEEPING
    assert packages <= known, packages - known
    assert {"core", "docs", "deep", "search", "read", "researcher", "verify", "injection"} <= packages
    flat = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__", "cli"}
    assert not flat, f"flat modules at the top of lib/gsd_research: {sorted(flat)} (move them into a package)"


def test_no_capability_reaches_into_another_capabilitys_modules():
    bad = []
    for module, targets in _graph().items():
        area = _area(module)
        for target in targets:
            other = _area(target)
            if area in CAPABILITIES and other in CAPABILITIES and other != area:
                if target != f"gsd_research.{other}.api":
                    bad.append(f"{module} -> {target}")
            if area in CAPABILITIES | SHARED and (other in HOUSEKEEPING or target == "gsd_research.cli"):
                bad.append(f"{module} -> {target} (housekeeping and the CLI sit above the capabilities)")
            if area in SHARED and other not in SHARED | ENGINE | {""}:
                bad.append(f"{module} -> {target} (a shared layer must not depend on a capability)")
            if area == "core" and other not in {"core", ""} | ENGINE:
                bad.append(f"{module} -> {target} (core depends on nothing but itself and the engine)")
            if area in ENGINE and other != area:
                bad.append(f"{module} -> {target} (the engine depends on nothing of the package)")
            if other in ENGINE and area not in {"core", other}:
                bad.append(f"{module} -> {target} (the engine is reached through core.untrusted)")
    assert not bad, "\n".join(sorted(bad))


def test_there_is_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_layout_checks_can_fail(tmp_path, monkeypatch):
    """The walker sees a cross-capability import and a cycle when there is one."""
    pkg = tmp_path / "gsd_research"
    for sub in ("docs", "search"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "docs" / "a.py").write_text("from gsd_research.search.b import x\n")
    (pkg / "search" / "b.py").write_text("def f():\n    from gsd_research.docs import a\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", pkg)
    graph = _graph()
    assert graph["gsd_research.docs.a"] == {"gsd_research.search.b"}
    assert "gsd_research.docs.a" in graph["gsd_research.search.b"]
    with pytest.raises(AssertionError, match="docs.a -> gsd_research.search.b"):
        test_no_capability_reaches_into_another_capabilitys_modules()
    with pytest.raises(AssertionError, match="docs.a -> gsd_research.search.b -> gsd_research.docs.a"):
        test_there_is_no_import_cycle()


def test_the_layout_checks_see_package_reexports_housekeeping_and_init_cycles(tmp_path, monkeypatch):
    pkg = tmp_path / "gsd_research"
    for sub in ("docs", "search", "commands", "llm", "core", "injection"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "search" / "__init__.py").write_text("from gsd_research.search.b import x\n")
    (pkg / "search" / "b.py").write_text("from gsd_research.search import y\n")
    (pkg / "docs" / "a.py").write_text("from gsd_research.search import x\nfrom gsd_research.commands import z\n")
    (pkg / "llm" / "c.py").write_text("import gsd_research.docs.a as a\n")
    (pkg / "core" / "d.py").write_text("from gsd_research.injection import e\nimport gsd_research.docs\n")
    (pkg / "injection" / "e.py").write_text("from gsd_research.core import errors\n")
    (pkg / "search" / "f.py").write_text("from gsd_research.injection.e import g\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", pkg)
    with pytest.raises(AssertionError) as crossing:
        test_no_capability_reaches_into_another_capabilitys_modules()
    assert "docs.a -> gsd_research.search\n" in str(crossing.value) + "\n"
    assert "docs.a -> gsd_research.commands (housekeeping" in str(crossing.value)
    assert "llm.c -> gsd_research.docs.a (a shared layer" in str(crossing.value)
    assert "core.d -> gsd_research.docs (core depends" in str(crossing.value)
    assert "core.d -> gsd_research.injection" not in str(crossing.value)
    assert "injection.e -> gsd_research.core (the engine depends" in str(crossing.value)
    assert "search.f -> gsd_research.injection.e (the engine is reached" in str(crossing.value)
    with pytest.raises(AssertionError, match="gsd_research.search -> gsd_research.search.b -> gsd_research.search"):
        test_there_is_no_import_cycle()
