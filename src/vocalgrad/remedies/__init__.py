"""Remedies: fine-tune a listener (head, LoRA or full) and evaluate what tuning changed."""
