"""One exception type per failure family; messages say what to do next.

Every error the project raises on purpose is a `VocalgradError`, so the CLI prints it as one
line without a traceback, and callers catch a family by its type instead of catching
`ValueError` (which real bugs raise too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class VocalgradError(Exception):
    """Base class: the CLI prints these without a traceback."""


class AudioError(VocalgradError):
    """An audio file is unreadable, empty, silent, too short or otherwise unusable."""


class SourceError(VocalgradError):
    """A speech source spec or folder cannot be resolved."""


class ConfigError(VocalgradError):
    """A build config or CLI option is malformed or inconsistent."""


class DatasetError(VocalgradError):
    """A dataset folder is missing files or does not follow the on-disk schema."""


class RenderRefused(VocalgradError):
    """A dimension cannot render a condition from this source (e.g. no voiced frames to
    shift): the build records the item as failed, leaves out its twin, and goes on."""


class CapabilityError(ConfigError, NotImplementedError):
    """A listener was asked for something it does not declare it can do (score answer
    options, expose hidden states, a logit lens, tuning): choose a listener that can."""


class ModelError(VocalgradError):
    """A model cannot be found, loaded or run; the message says what to install or fetch."""


class StudyError(VocalgradError):
    """A study file, study database or listening-test request is inconsistent."""


class PartialBatchError(VocalgradError):
    """Some requests of a batch failed, and the answers that arrived are kept.

    Parameters
    ----------
    message : str
        What failed, for the user.
    answers : sequence
        One entry per request of the batch, in request order: the answer, or None where that
        request failed.
    failures : mapping of int to Exception
        Index of each failed request -> its own error (its message is recorded per item).
    """

    def __init__(
        self,
        message: str,
        answers: Sequence[Any | None] = (),
        failures: Mapping[int, Exception] | None = None,
    ) -> None:
        super().__init__(message)
        self.answers: list[Any | None] = list(answers)
        self.failures: dict[int, Exception] = dict(failures or {})


class APIError(VocalgradError):
    """A chat-completions request that failed for good (after retries, or not retryable).

    `item_id` names the request that failed; a batch call raises `APIBatchError`, which also
    carries the answers that arrived.
    """

    def __init__(
        self,
        message: str,
        *,
        item_id: str,
        status_code: int | None = None,
        attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.item_id = item_id
        self.status_code = status_code
        self.attempts = attempts


class APIBatchError(APIError, PartialBatchError):
    """An `APIError` raised from a batch call: the first failure's details, plus every
    request's answer (None where it failed) and each failure by request index."""

    def __init__(
        self,
        message: str,
        *,
        answers: Sequence[Any | None],
        failures: Mapping[int, APIError],
        item_id: str,
        status_code: int | None = None,
        attempts: int = 0,
    ) -> None:
        super().__init__(message, item_id=item_id, status_code=status_code, attempts=attempts)
        self.answers = list(answers)
        self.failures = dict(failures)


class BusyError(VocalgradError):
    """Another process is writing the same run or build folder."""
