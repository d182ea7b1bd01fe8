"""Gateways: every piece of external I/O (filesystem, stores, converters, embedding backends)."""
