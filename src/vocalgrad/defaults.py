"""Defaults that the API and every command share, importable without numpy (the CLI builds its
options from them before anything heavy loads)."""

N_BOOT = 2000  # bootstrap resamples behind every CI a command or the API reports
