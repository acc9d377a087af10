"""Defaults that the API and every command share, importable without numpy (the CLI builds its
options from them before anything heavy loads)."""

N_BOOT = 2000  # bootstrap resamples behind every CI a command or the API reports
MAX_N_BOOT = 1_000_000
"""Most bootstrap resamples a command takes: at a million the Monte Carlo error of a 95% CI's
ends is below 0.001 for any group, so more only costs time (a billion, over the 50 or more
clusters a bootstrap needs, is 5 x 10^10 draws per group); there is no flag past it."""
