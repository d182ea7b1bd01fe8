"""Fetch the model and tokenizer files the tests use offline, for a checkout without shared/ beside it.

Usage: python tests/fetch_test_data.py DEST   (test.sh runs it; DEST is .test-data)
Gets cl100k_base's BPE file into DEST/tokenizers/tiktoken (tiktoken's own download) and Chroma's default
embedding model into DEST/models/chroma/all-MiniLM-L6-v2/onnx (Chroma's own download), the layout of shared/.
Idempotent; exit 1 with one line on stderr per file it could not get (offline: the tests that need it skip).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(dest: Path) -> int:
    failed = 0
    tiktoken_dir = dest / "tokenizers" / "tiktoken"
    tiktoken_dir.mkdir(parents=True, exist_ok=True)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(tiktoken_dir)
    try:
        import tiktoken

        tiktoken.get_encoding("cl100k_base")
    except Exception as exc:  # noqa: BLE001 - offline failures come in many shapes
        print(f"fetch_test_data: cl100k_base not fetched ({exc.__class__.__name__})", file=sys.stderr)
        failed = 1
    from gsd_research.core.errors import GsdError
    from gsd_research.researcher.gateways.embedding_gateway import ensure_chroma_model

    try:
        ensure_chroma_model(dest / "models" / "chroma" / "all-MiniLM-L6-v2" / "onnx")
    except GsdError as exc:
        print(f"fetch_test_data: {exc.message}", file=sys.stderr)
        failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
