"""Asking listeners and scoring them: prompts, answer parsing, the evaluation loop, metrics
(d', criterion, clustered CIs), psychometric fits and adaptive procedures."""
