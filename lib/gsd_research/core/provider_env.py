"""Which environment variables name each provider's base URL and keys (read by config and secrets)."""

from __future__ import annotations

# Environment variables that override config, per provider: (base-url variable, key variables).
PROVIDER_ENV: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "context7": ("CONTEXT7_API_URL", ("CONTEXT7_API_KEY",)),
    "perplexity": ("PERPLEXITY_BASE_URL", ("PERPLEXITY_API_KEY",)),
    "tavily": ("TAVILY_BASE_URL", ("TAVILY_API_KEY", "OD_TAVILY_API_KEY")),
    "gemini": ("GEMINI_BASE_URL", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "ollama": ("OLLAMA_HOST", ("OLLAMA_API_KEY",)),
    "openai": ("OPENAI_BASE_URL", ("OPENAI_API_KEY",)),
}
