"""The injection-detection engine: instruction-like text found on folded views (the fence is core.untrusted)."""
