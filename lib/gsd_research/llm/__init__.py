"""Model backends (Gemini, Ollama, OpenAI) behind one interface, routed by task with fallback chains."""

from gsd_research.llm.base import Backend, BackendUnavailable, Generation
from gsd_research.llm.router import DEFAULT_CHAINS, Router, make_backend

__all__ = ["Backend", "BackendUnavailable", "DEFAULT_CHAINS", "Generation", "Router", "make_backend"]
