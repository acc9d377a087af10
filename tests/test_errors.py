"""Project errors are caught by type: every one is a VocalgradError (one line in the CLI), and
the ones in transition keep the old catch sites working."""

from __future__ import annotations

import pytest

from vocalgrad import errors
from vocalgrad.errors import (
    APIBatchError,
    APIError,
    CapabilityError,
    ConfigError,
    PartialBatchError,
    RenderRefused,
    VocalgradError,
)


def test_every_error_class_is_a_vocalgrad_error() -> None:
    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert len(classes) >= 12
    assert all(issubclass(c, VocalgradError) for c in classes)


def test_an_unvoiced_source_is_a_render_refusal_and_a_bug_is_not() -> None:
    import numpy as np

    from vocalgrad.dimensions import voice_pitch
    from vocalgrad.signal.analysis import Analysis

    sr = 16000
    noise = (0.05 * np.random.default_rng(0).standard_normal(sr)).astype(np.float32)  # no F0
    with pytest.raises(RenderRefused, match="no voiced frames"):
        voice_pitch.render(
            Analysis(noise, sr), lambda t: np.zeros_like(t), np.random.default_rng(1)
        )
    assert not issubclass(RenderRefused, ValueError)  # `except RenderRefused` lets bugs through
    with pytest.raises(ValueError):
        try:
            raise ValueError("a bug")
        except RenderRefused:
            pytest.fail("a plain ValueError was taken for a render refusal")


def test_capability_error_is_a_config_error_and_not_implemented() -> None:
    err = CapabilityError("x cannot be tuned")
    assert isinstance(err, ConfigError) and isinstance(err, NotImplementedError)


def test_a_batch_api_error_keeps_the_answers_that_arrived() -> None:
    first = APIError("HTTP 500", item_id="b", status_code=500, attempts=3)
    err = APIBatchError(
        "HTTP 500 (1 of 3 requests failed)",
        answers=["increase", None, "decrease"],
        failures={1: first},
        item_id="b",
        status_code=500,
        attempts=3,
    )
    assert isinstance(err, APIError) and isinstance(err, PartialBatchError)
    assert err.answers == ["increase", None, "decrease"] and err.failures == {1: first}
    assert (err.item_id, err.status_code, err.attempts) == ("b", 500, 3)
    partial = PartialBatchError("2 of 2 failed", [None, None], {0: first, 1: first})
    assert partial.answers == [None, None] and str(partial) == "2 of 2 failed"
