"""Tests for the lesson 02 Quick-check functions: each is run on the correct answer and on every
wrong answer it claims to recognise, and the verdict must name the mistake."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.checks.splitting_into_heads import (
    SPLIT_CASES,
    check_head_reads,
    check_head_width,
    check_split,
    describe_label,
    known_wrong_splits,
    labelled_input,
)

Array = NDArray[np.float64]


def split_reference(x: Array, heads: int) -> Array:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(0, 2, 1, 3)


# --- labels --------------------------------------------------------------------------------


def test_labelled_input_encodes_batch_token_feature() -> None:
    x = labelled_input(2, 3, 8)
    assert x.shape == (2, 3, 8) and x.dtype == np.float64
    assert x[1, 2, 5] == 10_000 + 200 + 5
    assert describe_label(x[1, 2, 5], 2, 3, 8) == "batch 1, token 2, feature 5"
    assert len(np.unique(x)) == x.size


def test_describe_label_flags_numbers_not_from_the_input() -> None:
    assert "not a number from the input" in describe_label(0.5, 2, 3, 8)
    assert "not a number from the input" in describe_label(9, 2, 3, 8)  # feature 9 >= D
    assert "not a number from the input" in describe_label(-1, 2, 3, 8)
    assert "not a number from the input" in describe_label(float("nan"), 2, 3, 8)


def test_check_split_survives_nan_results() -> None:
    verdict = check_split(lambda x, h: np.full_like(split_reference(x, h), np.nan))
    assert not verdict.ok
    assert "different numbers from the input" in verdict.message


def test_labelled_input_rejects_sizes_that_would_overlap() -> None:
    with pytest.raises(ValueError, match="0 < T, D < 100"):
        labelled_input(1, 3, 100)


# --- check_split ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [split_reference, mha_numpy.split_heads], ids=["inline", "library"])
def test_check_split_accepts_a_correct_split(fn: Any) -> None:
    verdict = check_split(fn)
    assert verdict.ok, verdict
    assert repr(verdict).startswith("[split] correct:")


def test_check_split_accepts_a_torch_result() -> None:
    torch = pytest.importorskip("torch")

    def torch_split(x: Array, heads: int) -> Any:
        B, T, D = x.shape
        return torch.from_numpy(x).view(B, T, heads, D // heads).transpose(1, 2)

    assert check_split(torch_split).ok


def test_every_known_wrong_split_differs_from_the_right_one() -> None:
    for B, T, D, heads in SPLIT_CASES:
        x = labelled_input(B, T, D)
        right = split_reference(x, heads)
        for name, (wrong, _) in known_wrong_splits(x, heads).items():
            same = wrong.shape == right.shape and np.array_equal(wrong, right)
            assert not same, f"{name} equals the right split for {(B, T, D, heads)}"


WRONG_SPLITS = {
    "direct reshape": (
        lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h),
        "straight into (B, h, T, d_h)",
    ),
    "missing transpose": (
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h),
        "transpose is missing",
    ),
    "interleaved features": (
        lambda x, h: x.reshape(x.shape[0], x.shape[1], x.shape[2] // h, h).transpose(0, 3, 1, 2),
        "(d_h, h) instead of (h, d_h)",
    ),
    "wrong axes (B, h, d_h, T)": (
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h).transpose(0, 2, 3, 1),
        "(B, h, d_h, T)",
    ),
    "wrong axes (h, B, T, d_h)": (
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h).transpose(2, 0, 1, 3),
        "(h, B, T, d_h)",
    ),
}


@pytest.mark.parametrize("mistake", sorted(WRONG_SPLITS))
def test_check_split_names_each_known_mistake(mistake: str) -> None:
    fn, phrase = WRONG_SPLITS[mistake]
    verdict = check_split(fn)
    assert not verdict.ok
    assert verdict.message.startswith(mistake + ":"), verdict
    assert phrase in verdict.message, verdict
    assert repr(verdict).startswith("[split] not yet:")


def test_check_split_reports_an_exception() -> None:
    def broken(x: Array, heads: int) -> Array:
        raise IndexError("tuple index out of range")

    verdict = check_split(broken)
    assert not verdict.ok
    assert "raised IndexError: tuple index out of range" in verdict.message


def test_check_split_reports_an_unknown_wrong_shape() -> None:
    verdict = check_split(lambda x, h: x[:, None])
    assert not verdict.ok
    assert "expected shape (B, h, T, d_h) = (2, 2, 3, 4) but got (2, 1, 3, 8)" in verdict.message


def test_check_split_locates_scrambled_numbers_in_label_terms() -> None:
    verdict = check_split(lambda x, h: split_reference(x, h)[:, ::-1])  # heads in reverse order
    assert not verdict.ok
    expected = "at [b=0, head=0, t=0, j=0] expected batch 0, token 0, feature 0 but found batch 0, token 0, feature 4"
    assert expected in verdict.message


def test_check_split_notices_changed_numbers() -> None:
    verdict = check_split(lambda x, h: 2 * split_reference(x, h))
    assert not verdict.ok
    assert "different numbers from the input" in verdict.message


def test_check_split_catches_hard_coded_sizes() -> None:
    def only_first_case(x: Array, heads: int) -> Array:
        return x.reshape(2, 3, 2, 4).transpose(0, 2, 1, 3)

    verdict = check_split(only_first_case)
    assert not verdict.ok
    assert "(B, T, D) = (1, 5, 12) with heads=3" in verdict.message


# --- check_head_width ----------------------------------------------------------------------


@pytest.mark.parametrize("answer", [128, 128.0, np.int64(128), np.array(128)])
def test_check_head_width_accepts_128(answer: Any) -> None:
    verdict = check_head_width(answer)
    assert verdict.ok, verdict
    assert "2048 / 16 = 128" in verdict.message


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (2048 * 16, "you multiplied D by h"),
        (16 / 2048, "you divided h by D"),
        (2048, "2048 is D, the width of all heads together"),
        (16, "16 is h, the number of heads"),
        (100, "each of the h = 16 heads gets an equal share"),
    ],
)
def test_check_head_width_explains_wrong_numbers(answer: Any, phrase: str) -> None:
    verdict = check_head_width(answer)
    assert not verdict.ok
    assert phrase in verdict.message, verdict


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        ("128", "expected one number, got str '128'"),
        (True, "expected one number, got the boolean True"),
        (None, "no answer yet: replace None with"),
        ([128, 128], "expected one number, got list [128, 128]"),
    ],
)
def test_check_head_width_asks_for_one_number(answer: Any, phrase: str) -> None:
    verdict = check_head_width(answer)
    assert not verdict.ok
    assert phrase in verdict.message, verdict


# --- check_head_reads ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "columns"),
    [(list(range(8)), [4, 5, 6, 7]), (range(8), range(4, 8)), (np.arange(8), (7, 6, 5, 4))],
)
def test_check_head_reads_accepts_the_right_answer(inputs: Any, columns: Any) -> None:
    verdict = check_head_reads(inputs, columns)
    assert verdict.ok, verdict


@pytest.mark.parametrize(
    ("inputs", "columns", "phrase"),
    [
        ([4, 5, 6, 7], [4, 5, 6, 7], "we do not cut the input into groups"),
        ([0, 1], [4, 5, 6, 7], "every input feature"),
        (range(8), [1, 3, 5, 7], "interleaved columns"),
        (range(8), [0, 1, 2, 3], "that is the block of head 0"),
        (range(8), range(8), "all 8 columns together belong to all heads"),
        (range(8), [4, 5], "head i owns the d_h=4 consecutive columns"),
        (range(8), [4.0, 5.0, 6.0, 7.0], "weight_columns: expected a list of integer indices"),
        ("all", [4, 5, 6, 7], "input_features: expected a list of integer indices"),
    ],
)
def test_check_head_reads_explains_each_mistake(inputs: Any, columns: Any, phrase: str) -> None:
    verdict = check_head_reads(inputs, columns)
    assert not verdict.ok
    assert phrase in verdict.message, verdict


def test_check_head_reads_reports_both_mistakes_at_once() -> None:
    verdict = check_head_reads([4, 5, 6, 7], [1, 3, 5, 7])
    assert not verdict.ok
    assert "cut the input" in verdict.message and "interleaved" in verdict.message
