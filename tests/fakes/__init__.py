"""Fake provider servers on 127.0.0.1 that follow ../shared/providers/API-CONTRACTS.md."""
