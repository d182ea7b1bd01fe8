"""Command modules: thin click shells over the library."""
