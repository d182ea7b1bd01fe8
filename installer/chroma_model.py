"""Chroma's default embedding model (all-MiniLM-L6-v2 ONNX files) seeded from a local copy when Chroma's cache
lacks it (air-gapped machines). What is copied is recorded in the manifest, so uninstall removes exactly it;
a model that was there before is never touched."""

from __future__ import annotations

from pathlib import Path

NEEDED = ("model.onnx", "tokenizer.json")


def destination(home: Path) -> Path:
    return home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"


def source(models_from: str, root: Path) -> Path | None:
    """The folder holding the ONNX files: under --models-from DIR, else a shared/models/chroma folder beside
    the checkout."""
    base = Path(models_from) if models_from else root.parent / "shared" / "models" / "chroma"
    for cand in (base / "all-MiniLM-L6-v2" / "onnx", base / "onnx", base):
        if all((cand / name).is_file() for name in NEEDED):
            return cand
    return None


def planned(home: Path, models_from: str, root: Path, say) -> list[tuple[Path, Path]]:
    """(source, destination) of the model files to copy; [] when Chroma already has a model or no copy is found."""
    dest = destination(home)
    if (dest / "model.onnx").exists():
        return []
    src = source(models_from, root)
    if src is None:
        if models_from:
            say(f"warning: no all-MiniLM-L6-v2 ONNX files (model.onnx, tokenizer.json) under {models_from}")
        return []
    return [(p, dest / p.name) for p in sorted(src.iterdir()) if p.is_file()]
