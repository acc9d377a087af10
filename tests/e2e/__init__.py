"""Helpers for end-to-end tests (servers in subprocesses, synthetic datasets)."""
