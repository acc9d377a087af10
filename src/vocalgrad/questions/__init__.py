"""The benchmark's text side: the question each item asks, and reading a free-text answer."""
