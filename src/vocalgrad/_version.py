"""The package version, below every other module so any of them may report it."""

__version__ = "0.1.0"
