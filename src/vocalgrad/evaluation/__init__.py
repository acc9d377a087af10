"""Asking listeners and scoring them: the resumable evaluation loop, run scoring,
psychometric fits and adaptive procedures."""
