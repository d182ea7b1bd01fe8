"""Chroma's embedding model with int8 weights, built once from the local model file and cached privately."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

# The build: (1) an exact simplification of the exported graph (`simplify`), (2) onnxruntime's dynamic
# quantization: the weight matrices of the MatMuls and the token embedding table in int8, per output channel
# (per tensor cost 0.07 of cosine to the float vectors, per channel 0.007), activations quantized per batch
# at run time; attention's activation-by-activation MatMuls stay float (MatMulConstBOnly), and so do the
# feed-forward output projections of the first three layers (`_sensitive`: their input, after GELU, has the
# widest range). Mean cosine to the float vectors on fastapi-docs fragments: all int8 0.9932, these three in
# float 0.9967, all six in float 0.9970 at twice the cost.
RECIPE = "simplified+int8-dynamic-matmul-gather-per-channel-ffn-out-float-first-half-v3"
ENV = "GSD_RESEARCH_EMBEDDING_PRECISION"  # "fp32" keeps Chroma's float model (vectors identical to Chroma's)


def wanted() -> bool:
    """Whether the int8 model is to be used (the default) rather than Chroma's float model."""
    return os.environ.get(ENV, "int8").strip().lower() not in ("fp32", "float", "float32")


def cached_path(source: Path) -> Path:
    """Where the int8 model built from `source` lives: keyed by the recipe and the source file's size and
    modification time (a stat, not a 90 MB hash, so that finding it costs a fresh process nothing)."""
    from gsd_research.core.config import home

    st = source.stat()
    key = hashlib.sha256(f"{RECIPE}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return home() / "models" / f"all-MiniLM-L6-v2.int8.{key}.onnx"


def sidecar(target: Path) -> Path:
    """Where the SHA-256 of the built model is recorded (0600, written with it)."""
    return target.with_suffix(".sha256")


def digest(path: Path) -> str:
    """SHA-256 of a file (~90 ms for the 28 MB model on a loaded 2-core machine; only an index run pays it)."""
    sha = hashlib.sha256()  # not hashlib.file_digest: Python 3.10 is supported
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def verified(target: Path) -> bool:
    """The cached model is the one this code built: its content hash matches the recorded one. A model
    changed after the build (corrupted, tampered with) would still load and silently skew every vector."""
    try:
        recorded = sidecar(target).read_text(encoding="ascii").strip()
        return len(recorded) == 64 and digest(target) == recorded
    except (OSError, ValueError):
        return False


def ensure(source: Path) -> Path | None:
    """The int8 model for `source`, built on first use (a few seconds, no download) and verified against its
    recorded hash on every later use (a mismatch: discarded, logged, rebuilt); None when it cannot be built
    (the onnx package missing, an unwritable home): the caller then uses the float model."""
    target = cached_path(source)
    if target.is_file() and target.stat().st_size > 0:
        if verified(target):
            return target
        discard(target, "its content does not match the hash recorded when it was built")
    try:
        build(source, target)
    except Exception as exc:  # noqa: BLE001 - any failure here only costs speed, never the command
        from gsd_research.researcher import log

        log.event("embedding.int8_unavailable", error=f"{exc.__class__.__name__}: {exc}"[:300])
        return None
    return target


def _constants(nodes) -> dict[str, tuple]:
    """Constant tensors by output name, as comparable (dtype, shape, bytes)."""
    from onnx import numpy_helper

    out = {}
    for n in nodes:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].type == 4:  # a tensor value
            value = numpy_helper.to_array(n.attribute[0].t)
            out[n.output[0]] = (value.dtype.str, value.shape, value.tobytes())
    return out


def _redundant(nodes) -> tuple[dict[str, str], set[int]]:
    """(output renames, ids of removable nodes): NaN guards of softmax, and repeated mask computations."""
    producer = {out: n for n in nodes for out in n.output}
    constants = _constants(nodes)
    rename: dict[str, str] = {}
    removed: set[int] = set()
    masks: dict[tuple, str] = {}
    for n in nodes:
        if n.op_type != "Where":
            continue
        guard = producer.get(n.input[0])
        if guard is not None and guard.op_type == "IsNaN" and guard.input[0] == n.input[2]:
            rename[n.output[0]] = n.input[2]
            removed.update((id(n), id(guard)))
        elif n.input[1] in constants and n.input[2] in constants:
            key = tuple(constants.get(name, name) for name in n.input)
            if key in masks:
                rename[n.output[0]] = masks[key]
                removed.add(id(n))
            else:
                masks[key] = n.output[0]
    return rename, removed


def simplify(model) -> int:
    """Remove work the exported graph does that cannot change a vector, in place; returns the nodes removed.
    Each attention layer recomputes the same additive mask (Where over the expanded attention mask): the
    copies are pointed at the first. Each layer also guards its softmax with Where(IsNaN(p), 0, p), for rows
    whose keys are all masked; ours never are (every text starts with an unmasked [CLS]), so p is used
    directly. The float vectors of the simplified graph are bit-identical to the original's."""
    nodes = list(model.graph.node)
    rename, removed = _redundant(nodes)
    if not removed or {o.name for o in model.graph.output} & set(rename):
        return 0  # nothing to do, or a graph of another shape than expected: leave it as it is
    kept = [n for n in nodes if id(n) not in removed]
    for n in kept:
        for i, name in enumerate(n.input):
            while name in rename:
                name = rename[name]
            n.input[i] = name
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return len(nodes) - len(kept)


def _sensitive(model) -> list[str]:
    """The MatMuls that project back down to the hidden size (weights taller than wide: 1536 x 384) in the
    first half of the layers, in graph order."""
    shapes = {init.name: tuple(init.dims) for init in model.graph.initializer}
    down = [n.name for n in model.graph.node if n.op_type == "MatMul" and len(shapes.get(n.input[1], ())) == 2
            and shapes[n.input[1]][0] > shapes[n.input[1]][1]]
    return down[:len(down) // 2]


def build(source: Path, target: Path) -> None:
    """Simplify and quantize `source` into `target` atomically (files made in a private temporary directory,
    0600, renamed into place in a 0700 directory); older builds in the directory are removed."""
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(target.parent, 0o700)
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer logs its advice through the root logger
    try:
        with tempfile.TemporaryDirectory(prefix=".int8-", dir=target.parent) as tmp:  # 0700
            simple, built, hashed = (Path(tmp) / name for name in ("float.onnx", "int8.onnx", "sha256"))
            model = onnx.load(str(source))
            simplify(model)
            onnx.checker.check_model(model)
            onnx.save(model, simple)
            keep_float = _sensitive(model)
            del model
            quantize_dynamic(simple, built, weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul", "Gather"], nodes_to_exclude=keep_float,
                             extra_options={"MatMulConstBOnly": True})
            hashed.write_text(digest(built) + "\n", encoding="ascii")
            for path in (built, hashed):
                os.chmod(path, 0o600)
            os.replace(hashed, sidecar(target))
            os.replace(built, target)
    finally:
        logging.getLogger().setLevel(level)
    for old in target.parent.glob("all-MiniLM-L6-v2.int8.*"):
        if old not in (target, sidecar(target)):
            old.unlink(missing_ok=True)


def discard(path: Path, reason: str) -> None:
    """Remove a cached model (and its recorded hash) that cannot be trusted or loaded (truncated, corrupted,
    changed), logged: the next use rebuilds it."""
    from gsd_research.researcher import log

    log.event("embedding.int8_discarded", path=str(path), reason=reason[:300])
    for stale in (path, sidecar(path)):
        with contextlib.suppress(OSError):
            stale.unlink()
