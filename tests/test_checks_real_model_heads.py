"""Lesson 10 Quick-check functions: a blank answer is "not answered yet", the right answer passes, each
recognised wrong answer gets its own message, no message gives the answer away, and the checkers judge
the function on inputs of their own (never the notebook's)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from lessons_lib import shakespeare
from lessons_lib.checks import Verdict
from lessons_lib.checks.real_model_heads import (
    BITS_TRIALS,
    DECODE_SIZES,
    PREVIOUS_TRIALS,
    _decode_variant,
    check_bits_function,
    check_decode_step_function,
    check_last_break_function,
    check_previous_score_function,
    checker_model,
)
from lessons_lib.kv_cache import KVCache
from lessons_lib.plotting import text_maps

CHECKERS = {
    "bits per character": check_bits_function,
    "previous-character score": check_previous_score_function,
    "last break": check_last_break_function,
    "cached decoding step": check_decode_step_function,
}


def _blank(*args: Any) -> Any: ...


@pytest.mark.parametrize("label", sorted(CHECKERS))
def test_blank_is_not_answered_and_says_nothing_of_the_answer(label: str) -> None:
    verdict = CHECKERS[label](_blank)
    assert isinstance(verdict, Verdict) and not verdict.ok and not verdict.answered, verdict
    assert repr(verdict).startswith(f"[{label}] not answered yet: write the body"), verdict
    assert "ln 2" not in verdict.message and "t - 1" not in verdict.message, verdict


@pytest.mark.parametrize("label", sorted(CHECKERS))
def test_a_function_that_raises_is_reported_not_raised(label: str) -> None:
    def broken(*args: Any) -> Any:
        raise KeyError("oops")

    verdict = CHECKERS[label](broken)
    assert not verdict.ok and verdict.answered and "KeyError" in verdict.message, verdict


def test_no_not_yet_message_gives_the_bits_answer_away() -> None:
    """A wrong answer is told what it did; only the 'correct' line names the formula."""
    for wrong in (lambda n: n * 2, lambda n: n - 1, lambda n: n):
        verdict = check_bits_function(wrong)
        assert not verdict.ok and verdict.answered
    assert "/ ln 2" in check_bits_function(lambda n: n / math.log(2)).message


def test_checker_sizes_are_not_the_lessons() -> None:
    assert all((B, h, T) != (16, 4, 256) and B != h for B, h, T in PREVIOUS_TRIALS)
    assert all(sizes[0] != 83 and sizes[2] != 128 for sizes in DECODE_SIZES)
    assert any(sizes[4] < sizes[3] for sizes in DECODE_SIZES), "one model has h_kv < h"
    assert isinstance(BITS_TRIALS[1], np.ndarray)


@pytest.mark.parametrize("sizes", DECODE_SIZES)
def test_the_checkers_reference_decoding_equals_the_library(sizes: tuple[int, ...]) -> None:
    """The checker's own right route equals shakespeare.run and shakespeare.decode_step."""
    model = checker_model(sizes)  # type: ignore[arg-type]
    ids = np.arange(5) % model.config.vocab
    ours = _decode_variant(model, ids, "right")
    whole = shakespeare.run(model, ids[None])[0][0]
    cache = KVCache(model.config.layers)
    stepped = np.stack([shakespeare.decode_step(model, int(t), cache) for t in ids])
    assert np.allclose(ours, whole, atol=1e-8) and np.allclose(stepped, whole, atol=1e-8)


@pytest.mark.parametrize("variant", ["position 0", "no cache", "no scale", "tiled", "no final norm", "parallel"])
def test_every_mistake_route_differs_from_the_right_one(variant: str) -> None:
    model = checker_model(DECODE_SIZES[1])
    ids = np.arange(6) % model.config.vocab
    assert not np.allclose(_decode_variant(model, ids, variant), _decode_variant(model, ids, "right"), atol=1e-4)


def test_decode_checker_sees_a_function_that_never_appends() -> None:
    def no_append(model: Any, token: int, cache: KVCache) -> Any:
        return np.zeros(model.config.vocab)

    verdict = check_decode_step_function(no_append)
    assert not verdict.ok and "append the new position's keys and values" in verdict.message


def test_previous_checker_accepts_float32_weights_answers() -> None:
    def in_float32(w: Any) -> Any:
        t = np.arange(1, w.shape[-1])
        return w.astype(np.float32)[:, :, t, t - 1].mean(axis=(0, 2))

    assert check_previous_score_function(in_float32).ok


def test_last_break_checker_names_the_text_it_failed_on() -> None:
    verdict = check_last_break_function(lambda text: [0] * len(text))
    assert not verdict.ok and re.search(r"with the text '", verdict.message), verdict


def test_char_labels_show_spaces_and_newlines() -> None:
    assert text_maps.char_labels("a b\nc") == ["a", "\u2423", "b", "\u21b5", "c"]
    with pytest.raises(TypeError, match="text must be a str"):
        text_maps.char_labels(5)  # type: ignore[arg-type]


def test_text_maps_refuse_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"maps must be \(n, T, T\)"):
        text_maps.plot_text_maps(np.zeros((2, 3, 4)), "abc", ["a", "b"])
    with pytest.raises(ValueError, match="one character per map row"):
        text_maps.plot_text_maps(np.zeros((1, 3, 3)), "abcd", ["a"])
    with pytest.raises(ValueError, match="1 to 4 maps"):
        text_maps.plot_text_maps(np.zeros((5, 3, 3)), "abc", ["a"] * 5)
    with pytest.raises(ValueError, match="one title per map"):
        text_maps.plot_text_maps(np.zeros((2, 3, 3)), "abc", ["a"])
    with pytest.raises(ValueError, match=r"heads must be \(layers, h\)"):
        text_maps.plot_ablation(np.zeros((4, 4)), np.zeros(3))
