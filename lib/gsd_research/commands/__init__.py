"""Housekeeping commands (cache, config, doctor): thin click shells over the library."""
