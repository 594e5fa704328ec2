"""Tests for the lesson 02 Quick-check functions: each is run on the correct answer and on every
wrong answer it claims to recognise, and the verdict must name the mistake."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.checks import Verdict
from lessons_lib.checks.splitting_into_heads import (
    SPLIT_CASES,
    check_head_reads,
    check_head_width,
    check_merge,
    check_split,
    check_view_merge,
    describe_label,
    known_wrong_merges,
    known_wrong_splits,
    labelled_input,
)

Array = NDArray[np.float64]

# What a "not yet" message must never contain: the code of a right answer.
SOLUTION_CODE = ("transpose(0, 2, 1, 3)", "transpose(1, 2)", "reshape(B, T, h, d_h)", "contiguous()", "h * d_h")


def split_reference(x: Array, heads: int) -> Array:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(0, 2, 1, 3)


def merge_reference(heads_out: Array) -> Array:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


def assert_not_yet(verdict: Verdict, phrase: str, *secrets: str) -> None:
    """A diagnosed wrong answer: "not yet", the expected phrase, and none of the solution."""
    assert not verdict.ok and verdict.answered, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not yet:"), verdict
    assert phrase in verdict.message, verdict
    for secret in (*SOLUTION_CODE, *secrets):
        assert secret not in verdict.message, f"{secret!r} gives the answer away: {verdict}"


def assert_unanswered(verdict: Verdict, phrase: str) -> None:
    assert not verdict.ok and not verdict.answered, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not answered yet:"), verdict
    assert phrase in verdict.message, verdict


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


def test_check_split_accepts_a_correct_split() -> None:
    verdict = check_split(split_reference)
    assert verdict.ok, verdict
    assert repr(verdict).startswith("[split] correct:")


def test_check_split_refuses_another_kind_or_dtype() -> None:
    torch = pytest.importorskip("torch")

    def torch_split(x: Array, heads: int) -> Any:
        B, T, D = x.shape
        return torch.from_numpy(x).view(B, T, heads, D // heads).transpose(1, 2)

    def float32_split(x: Array, heads: int) -> Any:
        B, T, D = x.shape
        return x.astype(np.float32).reshape(B, T, heads, D // heads).transpose(0, 2, 1, 3)

    assert_not_yet(check_split(torch_split), "given a NumPy array and must return a NumPy array, got torch tensor")
    assert_not_yet(check_split(float32_split), "given float64 numbers and returned float32")


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
        "the head axis is still behind the token axis",
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
    assert verdict.message.startswith(mistake + ":"), verdict
    assert_not_yet(verdict, phrase)


def blank_split(x: Array, heads: int) -> Any:
    """A blank exercise: the docstring and ``...`` only."""
    ...


@pytest.mark.parametrize("fn", [None, blank_split], ids=["None", "blank body"])
def test_check_split_says_not_answered_yet_for_a_blank_function(fn: Any) -> None:
    assert_unanswered(check_split(fn), "return the (B, h, T, d_h) array")


def test_check_split_wants_the_split_written_out() -> None:
    def calls_the_library(x: Array, heads: int) -> Any:
        return mha_numpy.split_heads(x, heads)

    assert_not_yet(check_split(calls_the_library), "calls the library's split_heads")
    assert_not_yet(check_split(mha_numpy.split_heads), "calls the library's split_heads")


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (42, "expected a function, got int 42"),
        (lambda x, h: f"{h} heads", "expected an array of numbers, got str '2 heads'"),
        (lambda x, h: [[h], [h, h]], "expected an array of numbers"),
        (lambda x, h: print(end=""), "returned None: is a `return` missing?"),
    ],
    ids=["not a function", "a string", "a ragged list", "no return"],
)
def test_check_split_never_raises_on_odd_answers(fn: Any, phrase: str) -> None:
    assert_not_yet(check_split(fn), phrase)


def test_check_split_reports_an_exception() -> None:
    def broken(x: Array, heads: int) -> Array:
        raise IndexError("tuple index out of range")

    assert_not_yet(check_split(broken), "raised IndexError: tuple index out of range")


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
    assert_not_yet(verdict, "sizes hard-coded")
    assert "B=1, T=5, D=15, h=3 (d_h = 5)" in verdict.message and "(1, 5, 15) with heads=3" in verdict.message


def test_check_split_catches_a_hard_coded_head_width_or_count() -> None:
    def width_4(x: Array, heads: int) -> Array:  # the lesson's d_h
        B, T, D = x.shape
        return x.reshape(B, T, D // 4, 4).transpose(0, 2, 1, 3)

    def two_heads(x: Array, heads: int) -> Array:  # the lesson's h
        B, T, D = x.shape
        return x.reshape(B, T, 2, D // 2).transpose(0, 2, 1, 3)

    assert_not_yet(check_split(width_4), "sizes hard-coded")
    assert_not_yet(check_split(two_heads), "sizes hard-coded")


def test_split_cases_differ_in_every_size() -> None:
    for axis in range(4):
        sizes = [case[axis] if axis < 3 else case[2] // case[3] for case in SPLIT_CASES]
        assert len(set(sizes)) == len(sizes), sizes  # B, T, D and d_h all differ across the cases
    assert len({case[3] for case in SPLIT_CASES}) == len(SPLIT_CASES)  # and h
    assert (2, 4, 8, 2) not in SPLIT_CASES  # the lesson's own sizes


# --- check_head_width ----------------------------------------------------------------------


@pytest.mark.parametrize("answer", [128, np.int64(128), np.array(128)])
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
    assert_not_yet(check_head_width(answer), phrase, "128", "D / h", "D // h")


def test_check_head_width_hint_says_what_to_write_not_the_answer() -> None:
    verdict = check_head_width(None)
    assert_unanswered(verdict, "one whole number")
    assert "128" not in verdict.message and "/" not in verdict.message, verdict


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        ("128", "expected one number, got str '128'"),
        (True, "expected one number, got the boolean True"),
        (None, "not answered yet: replace None with"),
        ([128, 128], "expected one number, got list [128, 128]"),
    ],
)
def test_check_head_width_asks_for_one_number(answer: Any, phrase: str) -> None:
    verdict = check_head_width(answer)
    assert not verdict.ok
    assert phrase in repr(verdict), verdict


# --- check_head_reads ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "columns"),
    [(list(range(12)), [8, 9, 10, 11]), (range(12), range(8, 12)), (np.arange(12), (11, 10, 9, 8))],
)
def test_check_head_reads_accepts_the_right_answer(inputs: Any, columns: Any) -> None:
    verdict = check_head_reads(inputs, columns)
    assert verdict.ok, verdict


@pytest.mark.parametrize(
    ("inputs", "columns", "phrase"),
    [
        ([8, 9, 10, 11], [8, 9, 10, 11], "not the input"),
        ([0, 4], [8, 9, 10, 11], "which rows of W_q that product uses"),
        (range(4), [8, 9, 10, 11], "a head does not read a slice of the input"),
        (range(1, 13), [8, 9, 10, 11], "all 12 features, but counted from 1"),
        (range(12), [2, 5, 8, 11], "interleaved columns"),
        (range(12), [4, 5, 6, 7], "that is the block of head 1, not of head 2"),
        (range(12), range(12), "all 12 columns together belong to all heads"),
        (range(12), [9, 10, 11, 12], "the right block, counted from 1"),
        (range(12), [8, 9, 10, 11, 12], "12 is past the end"),
        (range(12), [8, 9], "a head owns d_h=4 consecutive columns"),
        (range(12), [8.0, 9.0, 10.0, 11.0], "weight_columns: expected a list of integer indices"),
        ("all", [8, 9, 10, 11], "input_features: expected a list of integer indices"),
    ],
)
def test_check_head_reads_explains_each_mistake(inputs: Any, columns: Any, phrase: str) -> None:
    assert_not_yet(check_head_reads(inputs, columns), phrase, "[8, 9, 10, 11]", "8..11", "range(8, 12)")


def test_check_head_reads_says_not_answered_yet_when_both_are_none() -> None:
    verdict = check_head_reads(None, None)
    assert_unanswered(verdict, "replace None with a list of integer indices in both answers")
    assert "8" not in verdict.message and "12" not in verdict.message, verdict


def test_check_head_reads_judges_the_half_that_is_answered() -> None:
    verdict = check_head_reads(range(12), None)
    assert_not_yet(verdict, "weight_columns: replace None with a list of integer indices")
    assert "input_features" not in verdict.message
    assert_not_yet(check_head_reads(None, [2, 5, 8, 11]), "interleaved columns")


def test_check_head_reads_reports_both_mistakes_at_once() -> None:
    verdict = check_head_reads([8, 9, 10, 11], [2, 5, 8, 11])
    assert not verdict.ok
    assert "not the input" in verdict.message and "interleaved" in verdict.message


# --- check_merge ---------------------------------------------------------------------------


def test_check_merge_accepts_a_correct_merge() -> None:
    verdict = check_merge(merge_reference)
    assert verdict.ok, verdict
    assert repr(verdict).startswith("[merge] correct:")


def test_check_merge_refuses_a_torch_result() -> None:
    torch = pytest.importorskip("torch")

    def torch_merge(heads_out: Array) -> Any:
        B, h, T, d_h = heads_out.shape
        return torch.from_numpy(heads_out).transpose(1, 2).reshape(B, T, h * d_h)

    assert_not_yet(check_merge(torch_merge), "must return a NumPy array, got torch tensor")


@pytest.mark.parametrize("as_float", [True, False])
def test_check_head_width_refuses_a_float_by_its_type(as_float: bool) -> None:
    verdict = check_head_width(2048 / 16 if as_float else np.float64(128.0))
    assert_not_yet(verdict, "128.0 is a float")
    assert "asks for an int" in verdict.message


def test_every_known_wrong_merge_differs_from_the_right_one() -> None:
    for B, T, D, heads in SPLIT_CASES:
        heads_out = np.ascontiguousarray(split_reference(labelled_input(B, T, D), heads))
        right = merge_reference(heads_out)
        for name, (wrong, _) in known_wrong_merges(heads_out).items():
            same = wrong.shape == right.shape and np.array_equal(wrong, right)
            assert not same, f"{name} equals the right merge for {(B, T, D, heads)}"


def _sizes(a: Array) -> tuple[int, int, int, int]:
    B, h, T, d_h = a.shape
    return B, h, T, d_h


WRONG_MERGES = {
    "direct reshape": (
        lambda a: a.reshape(a.shape[0], a.shape[2], a.shape[1] * a.shape[3]),
        "in row-major index order all of head 0 comes first",
    ),
    "interleaved features": (
        lambda a: a.transpose(0, 2, 3, 1).reshape(a.shape[0], a.shape[2], -1),
        "the features of the heads alternate",
    ),
    "missing reshape": (lambda a: a.transpose(0, 2, 1, 3), "not yet joined into one axis of width D"),
    "heads averaged": (lambda a: a.mean(axis=1), "you averaged the heads"),
    "heads summed": (lambda a: a.sum(axis=1), "you summed the heads"),
    "heads glued along the tokens": (
        lambda a: np.concatenate(list(a.transpose(1, 0, 2, 3)), axis=1),
        "one after another along the token axis",
    ),
}


@pytest.mark.parametrize("mistake", sorted(WRONG_MERGES))
def test_check_merge_names_each_known_mistake(mistake: str) -> None:
    fn, phrase = WRONG_MERGES[mistake]
    verdict = check_merge(fn)
    assert verdict.message.startswith(mistake + ":"), verdict
    assert_not_yet(verdict, phrase)


def blank_merge(heads_out: Array) -> Any:
    """A blank exercise."""
    ...


@pytest.mark.parametrize("fn", [None, blank_merge], ids=["None", "blank body"])
def test_check_merge_says_not_answered_yet_for_a_blank_function(fn: Any) -> None:
    assert_unanswered(check_merge(fn), "return the (B, T, D) array")


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        ("merge", "expected a function, got str 'merge'"),
        (lambda a: 1 / 0, "raised ZeroDivisionError"),
        (lambda a: {"a": 1}, "expected an array of numbers"),
        (lambda a: a.transpose(0, 2, 1, 3).reshape(2, 3, 8), "(B, h, T, d_h) = (1, 3, 5, 5) your function raised"),
        (lambda a: _sizes(a) and a[:, 0], "you returned (2, 3, 4) = (B, T, d_h): one head's width"),
        (lambda a: np.hstack(a), "expected shape (B, T, D) = (2, 3, 8) but got (2, 6, 4)"),
        (lambda a: 2 * merge_reference(a), "different numbers from the input"),
        (lambda a: merge_reference(a)[:, ::-1], "at [b=0, t=0, f=0] expected batch 0, token 0, feature 0 but found "
                                                "batch 0, token 2, feature 0"),
        (lambda a: mha_numpy.merge_heads(a), "calls the library's merge_heads"),
    ],
    ids=["not a function", "raises", "a dict", "hard-coded sizes", "one head", "hstack", "scaled", "tokens reversed",
         "library"],
)
def test_check_merge_explains_other_wrong_answers(fn: Any, phrase: str) -> None:
    assert_not_yet(check_merge(fn), phrase)


# --- check_view_merge ----------------------------------------------------------------------

def torch_like(dtype_name: str = "float64") -> Any:
    torch = pytest.importorskip("torch")
    return torch.zeros(1, dtype=getattr(torch, dtype_name))


def right_view_merge(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).contiguous().view(B, T, h * d_h)


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
def test_check_view_merge_accepts_contiguous_then_view(dtype_name: str) -> None:
    verdict = check_view_merge(right_view_merge, torch_like(dtype_name))
    assert verdict.ok, verdict
    assert repr(verdict).startswith("[view merge] correct:")


def test_check_view_merge_explains_a_view_of_the_transposed_tensor() -> None:
    def view_too_early(heads_out: Any) -> Any:
        B, h, T, d_h = heads_out.shape
        return heads_out.transpose(1, 2).view(B, T, h * d_h)

    assert_not_yet(check_view_merge(view_too_early, torch_like()), ".view refused the transposed tensor")


def test_check_view_merge_wants_view_not_reshape() -> None:
    def with_reshape(heads_out: Any) -> Any:
        B, h, T, d_h = heads_out.shape
        return heads_out.transpose(1, 2).reshape(B, T, h * d_h)

    def reshape_then_view(heads_out: Any) -> Any:  # the .view does nothing: the reshape made the copy
        B, h, T, d_h = heads_out.shape
        return heads_out.transpose(1, 2).reshape(B, T, h * d_h).view(B, T, h * d_h)

    def flatten_then_view(heads_out: Any) -> Any:
        B, h, T, d_h = heads_out.shape
        return heads_out.transpose(1, 2).flatten(2).view(B, T, h * d_h)

    def concatenated_then_view(heads_out: Any) -> Any:  # no transpose: the .view has nothing to do
        import torch

        B, h, T, d_h = heads_out.shape
        return torch.cat(heads_out.unbind(1), dim=-1).view(B, T, h * d_h)

    def permuted_copy_without_contiguous(heads_out: Any) -> Any:
        import torch

        B, h, T, d_h = heads_out.shape
        return torch.stack(heads_out.transpose(1, 2).unbind(1), dim=1).view(B, T, h * d_h)

    assert_not_yet(check_view_merge(with_reshape, torch_like()), "your code calls .reshape")
    assert_not_yet(check_view_merge(reshape_then_view, torch_like()), "your code calls .reshape")
    assert_not_yet(check_view_merge(flatten_then_view, torch_like()), "your code calls .flatten")
    assert_not_yet(check_view_merge(concatenated_then_view, torch_like()), "never swaps the token and head axes")
    assert_not_yet(check_view_merge(permuted_copy_without_contiguous, torch_like()), "no copy into the new order")

    def no_view(heads_out: Any) -> Any:
        import torch

        return torch.cat(heads_out.unbind(1), dim=-1)

    assert_not_yet(check_view_merge(no_view, torch_like()), "the question asks for .view and your code never calls it")


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda t: t.view(t.shape[0], t.shape[2], -1), "direct .view"),
        (lambda t: t.permute(0, 2, 3, 1).contiguous().view(t.shape[0], t.shape[2], -1), "interleaved features"),
        (lambda t: t.transpose(1, 2).contiguous(), "missing reshape"),
        (lambda t: t.mean(1), "heads averaged"),
    ],
    ids=["view without transpose", "interleaved", "no view", "averaged"],
)
def test_check_view_merge_names_the_merge_mistakes(fn: Any, mistake: str) -> None:
    verdict = check_view_merge(fn, torch_like())
    assert verdict.message.startswith(mistake + ":"), verdict
    assert_not_yet(verdict, mistake)


def blank_view_merge(heads_out: Any) -> Any:
    """A blank exercise."""
    ...


@pytest.mark.parametrize("fn", [None, blank_view_merge], ids=["None", "blank body"])
def test_check_view_merge_says_not_answered_yet_for_a_blank_function(fn: Any) -> None:
    assert_unanswered(check_view_merge(fn, torch_like()), "return the (B, T, D) tensor")


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [(3.5, "expected a function, got float 3.5"), (lambda t: t.numpy_missing(), "raised AttributeError")],
)
def test_check_view_merge_never_raises_on_odd_answers(fn: Any, phrase: str) -> None:
    assert_not_yet(check_view_merge(fn, torch_like()), phrase)


def test_check_view_merge_needs_a_torch_tensor_to_make_its_inputs() -> None:
    with pytest.raises(TypeError, match="like must be a torch tensor"):
        check_view_merge(right_view_merge, np.zeros(1))
