#!/usr/bin/env bash
# The test suite on a fresh machine: Python environment, test services, offline model files, lint, pytest.
# Usage: ./test.sh [pytest args]    (GSD_RESEARCH_VENV overrides the venv location, default ./.venv)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
ROOT="$PWD"
SHARED="${GSD_SHARED_DIR:-$ROOT/../shared}"
VENV="${GSD_RESEARCH_VENV:-$ROOT/.venv}"

say() { printf '[test.sh] %s\n' "$*" >&2; }

# The pinned lock (every transitive version, with hashes) is what users, install.sh, the plugin and CI get;
# the package itself goes in editable on top, without dependencies. uv when present (faster), else venv + pip.
LOCK="$ROOT/requirements-dev.lock"
install_with_uv() {  # uv from PATH, else the lock's own pinned uv bootstrapped into the venv (minutes faster than pip)
  { [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"; } || return 1
  UV=$(command -v uv || true)
  if [ -z "$UV" ]; then
    awk '/^uv==/{p=1} p{print} p&&!/\\$/{exit}' "$LOCK" > "$VENV/uv-requirement.txt" &&
      "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$VENV/uv-requirement.txt" &&
      UV="$VENV/bin/uv" || return 1
  fi
  "$UV" pip install -q --python "$VENV/bin/python" --require-hashes -r "$LOCK" &&
    "$UV" pip install -q --python "$VENV/bin/python" --no-deps -e "$ROOT"
}
install_with_pip() {
  { [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"; } &&
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$LOCK" &&
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e "$ROOT"
}
say "installing the locked dependencies ($(basename "$LOCK")) and the package into $VENV"
install_with_uv || install_with_pip

# redis-server (Debian) serves the Redis cache-backend test; without it that test skips and says why.
if ! command -v redis-server >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "installing redis-server"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } >/dev/null 2>&1 \
    || say "could not install redis-server; the Redis test will be skipped"
fi

# tesseract-ocr (Debian) reads PDFs without a text layer in the knowledge base; without it the OCR test skips
# and says why (the no_text report is tested either way).
if ! command -v tesseract >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "installing tesseract-ocr"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr; } >/dev/null 2>&1 \
    || say "could not install tesseract-ocr; the OCR test will be skipped"
fi

# Model and tokenizer files the tests use offline: tiktoken's cl100k and Chroma's default model. They come
# from shared/ beside the checkout; without it they are fetched once into .test-data/ (here, before any test
# runs: no test touches the network). What is still missing makes the tests that need it skip, saying why.
if [ -d "$SHARED" ]; then
  export GSD_SHARED_DIR="$SHARED"
  export TIKTOKEN_CACHE_DIR="$SHARED/tokenizers/tiktoken"
  bash "$SHARED/tools/seed-offline-models.sh" >/dev/null
else
  say "no shared/ beside the checkout ($SHARED): fetching the model and tokenizer files into .test-data/ (once);"
  say "tests on the benchmark documents (AEB, SciFact, fastapi-docs, mixed-formats) will skip"
  "$VENV/bin/python" "$ROOT/tests/fetch_test_data.py" "$ROOT/.test-data" \
    || say "could not fetch them (offline?): the tests that need them will skip; see the skip reasons below"
  export TIKTOKEN_CACHE_DIR="$ROOT/.test-data/tokenizers/tiktoken"
fi

say "ruff"
"$VENV/bin/ruff" check lib tests bench installer hooks bootstrap

say "pytest"
# One worker more than cores: many tests wait on the processes and servers they start, which leaves a core
# idle at -n auto (whole suite on 2 cores: 3 workers 278 s, 2 workers 307 s). worksteal: idle workers take
# queued tests from busy ones, so the slow tests do not pile up at the end.
WORKERS="${GSD_TEST_WORKERS:-$(( $(nproc 2>/dev/null || echo 1) + 1 ))}"
exec "$VENV/bin/python" -m pytest -p no:cacheprovider --timeout 600 -rs -n "$WORKERS" --dist worksteal "$@"
