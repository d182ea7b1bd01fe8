"""glibc heap settings of an index run: few malloc arenas, freed memory given back after each batch (no-ops elsewhere)."""

from __future__ import annotations


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas (like MALLOC_ARENA_MAX=2) before Chroma's, onnxruntime's and the tokenizer's
    worker threads start: each thread otherwise gets an arena of its own whose free space other threads
    never reuse, and the held-but-free memory grows with the number of batches. A no-op elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


def release_freed_memory() -> None:
    """Give the heap freed by a batch back to the OS (glibc `malloc_trim`; a no-op elsewhere). Without it
    each batch's transients (tokenizer output, Python float lists, Chroma's upsert buffers) leave holes
    that later, slightly larger allocations cannot reuse, and RSS creeps up with the number of batches."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM = None
