"""What a tuning run is asked to do, importable without torch (the CLI builds its options
from these defaults before any model is loaded)."""

from __future__ import annotations

from dataclasses import dataclass

from vocalgrad.errors import ConfigError

METHODS = ("head", "lora", "full")
DEFAULT_LR = {"head": 2e-4, "lora": 2e-4, "full": 1e-5}
ORDERS = ("default", "swapped")


@dataclass(frozen=True)
class TuneConfig:
    """Every setting that changes the tuned weights (recorded in tuning.json)."""

    method: str = "lora"
    categories: tuple[str, ...] = ()
    lr: float | None = None  # None: DEFAULT_LR[method]
    epochs: int = 1
    batch_items: int = 8  # x both option orders = effective batch 16 prompts
    micro_batch: int = 4  # items per forward/backward pass
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    weight_decay: float = 0.01
    seed: int = 0
    checkpoint_every: int = 10

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown tuning method {self.method!r}; choose {', '.join(METHODS)}")
        if not self.categories:
            raise ConfigError("name the dimensions to train on (--train-dimensions)")
        if min(self.epochs, self.batch_items, self.micro_batch, self.checkpoint_every) < 1:
            raise ConfigError("epochs, batch sizes and checkpoint interval must be >= 1")

    @property
    def learning_rate(self) -> float:
        return DEFAULT_LR[self.method] if self.lr is None else self.lr

    def hyperparameters(self) -> dict:
        out = {
            "lr": self.learning_rate,
            "epochs": self.epochs,
            "effective_batch_prompts": self.batch_items * len(ORDERS),
            "micro_batch_items": self.micro_batch,
            "optimizer": "AdamW",
            "betas": [0.9, 0.999],
            "weight_decay": self.weight_decay,
            "option_orders": list(ORDERS),
        }
        if self.method == "lora":
            out |= {
                "lora_r": self.lora_r,
                "lora_alpha": self.lora_alpha,
                "lora_dropout": self.lora_dropout,
                "lora_targets": "all linear layers but the head",
            }
        return out
