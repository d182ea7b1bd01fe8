"""Embeddings: Chroma's default model (its ONNX weights in int8, faster batching), Ollama or OpenAI."""

from __future__ import annotations

from pathlib import Path

from gsd_research.core.errors import (
    EnvironmentMissing,
    MissingApiKey,
    NetworkError,
    NotFound,
    ProviderError,
    UsageError,
)

MODEL_FILES = ("config.json", "model.onnx", "special_tokens_map.json", "tokenizer_config.json",
               "tokenizer.json", "vocab.txt")
MAX_TOKENS = 256


def chroma_model_dir() -> Path:
    """Where Chroma's ONNXMiniLM_L6_V2 keeps its model (computed from HOME at call time)."""
    return Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"


def ensure_chroma_model(folder: Path | None = None) -> Path:
    """The model directory (Chroma's own by default), downloaded by Chroma itself when missing (its normal
    behaviour online)."""
    folder = folder or chroma_model_dir()
    if all((folder / f).is_file() for f in MODEL_FILES):
        return folder
    try:
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

        ef = ONNXMiniLM_L6_V2()
        ef.DOWNLOAD_PATH = folder.parent
        ef._download_model_if_not_exists()
    except Exception as exc:  # noqa: BLE001 - offline download failures come in many shapes
        raise EnvironmentMissing(
            f"Chroma's default embedding model is not available and could not be downloaded "
            f"({exc.__class__.__name__})", suggestions=[f"Connect to the internet once, or copy the all-MiniLM-L6-v2 ONNX files into {folder}",
                         "researcher config set default_embedding_provider ollama"]) from None
    return folder


def _tokenizers(path: Path) -> tuple:
    """(truncating, counting) tokenizers of `path`, loaded once per process and file version: each load costs
    0.07 s and an embedder is made per command (the MCP server and tests make many); both are only read after."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _TOKENIZERS:
        from tokenizers import Tokenizer

        truncating, counting = Tokenizer.from_file(str(path)), Tokenizer.from_file(str(path))
        truncating.enable_truncation(max_length=MAX_TOKENS)
        truncating.no_padding()
        counting.no_truncation()
        counting.no_padding()
        _TOKENIZERS[key] = (truncating, counting)
    return _TOKENIZERS[key]


_TOKENIZERS: dict[tuple, tuple] = {}


def _session(model: Path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Worker threads sleep instead of spinning between operators: on a shared 2-core machine spinning
    # threads fight the busy ones (int8, 2 threads, load ~13: 28 texts/s without spinning, 14 with it).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model), sess_options=opts, providers=ort.get_available_providers())


class DefaultEmbedder:
    """all-MiniLM-L6-v2 as Chroma computes it (truncate 256, mean-pool, L2-normalize), but batched by length
    with dynamic padding instead of padding every text to 256 tokens, and by default with the model's weight
    matrices in int8 for the documents being indexed (`int8_model`: built once from Chroma's local model file;
    several times faster). Queries, one short text at a time, are embedded with the float model: with the
    error on one side only, SciFact's nDCG@10 stays within 0.005 of the float index's (BENCHMARKS.md).
    Sessions open on first use, so a search never loads the int8 model nor an index run the float one."""

    BATCH = 8  # small attention activations: peak RSS 386 MiB vs 983 MiB at 32 (float), and faster on 2 cores

    def __init__(self) -> None:
        folder = ensure_chroma_model()
        self.tokenizer, self.counter = _tokenizers(folder / "tokenizer.json")
        self.model_path = folder / "model.onnx"
        self.precision: str | None = None  # of the documents' session, once open: "int8" or "fp32"
        self.session = None  # documents
        self.query_session = None

    def _open_session(self):
        """The documents' session: the int8 model unless turned off or unavailable, else the float one."""
        from gsd_research.researcher.gateways import int8_model

        quantized = int8_model.ensure(self.model_path) if int8_model.wanted() else None
        if quantized is not None:
            try:
                session = _session(quantized)
                self.precision = "int8"
                return session
            except Exception as exc:  # noqa: BLE001 - a damaged cached model: drop it (rebuilt next time), use the float one
                int8_model.discard(quantized, f"onnxruntime could not load it: {exc.__class__.__name__}: {exc}")
        self.precision = "fp32"
        return self.query_session or _session(self.model_path)

    def release(self) -> None:
        """Free the ONNX sessions (weights and activation arena, ~300 MiB); the next `embed` reopens them.
        The tokenizers stay, so fragment sizes can still be counted."""
        self.session = self.query_session = None

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of documents being indexed."""
        if self.session is None:
            self.session = self._open_session()
        return self._run(self.session, texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of search queries, from the float model."""
        if self.query_session is None:
            self.query_session = self.session if self.precision == "fp32" else _session(self.model_path)
        return self._run(self.query_session, texts)

    def _run(self, session, texts: list[str]) -> list[list[float]]:
        import numpy as np

        encoded = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), self.BATCH):
            idx = order[start:start + self.BATCH]
            rows = [encoded[i].ids for i in idx]
            width = max(len(row) for row in rows)  # padded to the batch's longest text, not to 256
            ids = np.array([row + [0] * (width - len(row)) for row in rows], dtype=np.int64)
            mask = np.array([[1] * len(row) + [0] * (width - len(row)) for row in rows], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[:, :, None].astype(hidden.dtype)
            pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            pooled = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
            out[idx] = pooled.astype(np.float32)
        return out.tolist()

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self.counter.encode_batch(list(texts), add_special_tokens=False)]


class HttpEmbedder:
    """Ollama (/api/embed) or OpenAI-compatible (/embeddings) embeddings through the shared HTTP layer: the
    retry policy (429/5xx, Retry-After), typed errors, and the requests-cache session for query embeddings
    (the same text and model always give the same vector); index batches are not cached, the index is."""

    BATCH = 64

    def __init__(self, provider: str, model: str | None) -> None:
        from gsd_research.core.config import Config
        from gsd_research.core.http import HttpClient

        if not model:
            raise UsageError(f"The {provider} embedding provider needs a model",
                             suggestions=["researcher config set default_embedding_model nomic-embed-text"])
        self.provider, self.model = provider, model
        self.config = Config()
        self.base_url = self.config.base_url(provider)
        self.api_key = self.config.api_key(provider)
        if provider == "openai" and not self.api_key:
            raise MissingApiKey("OPENAI_API_KEY is not set", suggestions=["export OPENAI_API_KEY=..."])
        self.http = HttpClient(self.config)

    def _post(self, path: str, body: dict, cache: bool) -> dict:
        from gsd_research.core.http import parse_json

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        key_hint = "OPENAI_API_KEY" if self.provider == "openai" else "OLLAMA_API_KEY"
        try:
            resp = self.http.request(self.provider, "POST", self.base_url + path, json=body, headers=headers,
                                     ttl=self.config.ttl("llm"), cache=cache, key_hint=key_hint,
                                     timeout=(10, 120), deadline=600)
        except NotFound as exc:
            pull = f"ollama pull {self.model}" if self.provider == "ollama" else "Check the model name"
            raise NotFound(f"{self.provider} has no embedding model '{self.model}' at {self.base_url} "
                           f"({exc.message})", suggestions=[pull, "researcher config show"],
                           details=exc.details) from None
        except NetworkError as exc:
            start = "Start it with: ollama serve" if self.provider == "ollama" else "Check OPENAI_BASE_URL"
            raise NetworkError(f"{self.provider} embeddings unreachable at {self.base_url} ({exc.message})",
                               suggestions=[start, "researcher config show"], details=exc.details) from None
        return parse_json(self.provider, resp)

    def embed(self, texts: list[str], cache: bool = False) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.BATCH):
            batch = list(texts[start:start + self.BATCH])
            if self.provider == "ollama":
                vectors = self._post("/api/embed", {"model": self.model, "input": batch}, cache).get("embeddings")
            else:
                data = self._post("/embeddings", {"model": self.model, "input": batch}, cache)
                items = sorted(data.get("data") or [], key=lambda d: d.get("index", 0))
                vectors = [d.get("embedding") for d in items]
            if (not isinstance(vectors, list) or len(vectors) != len(batch)
                    or not all(isinstance(v, list) and v for v in vectors)):
                raise ProviderError(f"{self.provider} returned {len(vectors) if isinstance(vectors, list) else 0} "
                                    f"usable embeddings for {len(batch)} texts")
            out.extend(vectors)
        return out


class EmbeddingGateway:
    """One embedding backend per repository, made on first use (a warm re-index or a lexical search loads
    no model)."""

    def __init__(self, provider: str = "chromadb", model: str | None = None) -> None:
        if provider not in ("chromadb", "ollama", "openai"):
            raise UsageError(f"Unknown embedding provider '{provider}'",
                             suggestions=["Use one of: chromadb, ollama, openai"])
        self.provider, self.model = provider, model
        self.signature = f"{provider}:{model or 'all-MiniLM-L6-v2'}"  # identifies the vector space
        self._backend = None

    @property
    def backend(self):
        if self._backend is None:
            chroma = self.provider == "chromadb"
            self._backend = DefaultEmbedder() if chroma else HttpEmbedder(self.provider, self.model)
        return self._backend

    @property
    def precision(self) -> str | None:
        """The precision of the local model that embedded documents in this process (None: none did)."""
        return getattr(self._backend, "precision", None)

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts being indexed."""
        from gsd_research.core.external import whole_characters

        return self.backend.embed([whole_characters(t) for t in texts]) if texts else []

    def embed_queries(self, queries: list[str]) -> list[list[float]]:
        """Vectors of search queries; an HTTP provider answers a repeated query from the HTTP cache. A lone
        surrogate (an MCP client's JSON escape) is U+FFFD to the model (its tokenizer refuses one)."""
        from gsd_research.core.external import whole_characters

        if not queries:
            return []
        queries = [whole_characters(q) for q in queries]
        if isinstance(self.backend, HttpEmbedder):
            return self.backend.embed(queries, cache=True)
        return self.backend.embed_queries(queries)

    def release(self) -> None:
        """Let go of the local model's memory between the embedding and the store phase of an index run."""
        release = getattr(self._backend, "release", None)
        if release:
            release()

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Fragment sizes in the local model's own tokens (loaded on first count, so a warm re-index never
        loads it); approximated for an HTTP provider."""
        from gsd_research.researcher.chunking import approx_counter

        return self.backend.count_tokens(texts) if self.provider == "chromadb" else approx_counter(texts)
