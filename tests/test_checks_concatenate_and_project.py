"""Tests for `lessons_lib.checks.concatenate_and_project`: each checker on a blank answer, on the right
answer and on every wrong answer it recognises (the verdict must name the mistake, and no "not yet"
message may give the solution away), on answers of the wrong kind (it must never raise), plus bad
reference arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.checks import Verdict
from lessons_lib.checks.concatenate_and_project import (
    check_fixed_forward,
    check_head_contribution,
    check_linear_from_numpy,
    check_linear_weight,
    check_merge,
    check_merge_function,
    check_time_major_merge,
)

B, h, T, d_h = 2, 3, 4, 2
D = h * d_h
Floats = NDArray[np.float64]

# What a solution cell writes; a "not yet" message must contain none of these.
SOLUTION_SNIPPETS = (
    "w.T", "@ wo", "@ w_o", "transpose(0, 2, 1, 3)", "np.concatenate", "np.sqrt", "sqrt(d_h)"
)


@pytest.fixture
def heads_out() -> Floats:
    """Per-head outputs ``(B, h, T, d_h)``."""
    return np.random.default_rng(1).normal(size=(B, h, T, d_h))


@pytest.fixture
def wo() -> Floats:
    """An output projection ``(D, D)`` in NumPy's ``(in, out)`` layout (not symmetric)."""
    return mha_numpy.init_weights(D, seed=2)["wo"]


def assert_fails(verdict: Verdict, *words: str) -> None:
    """A "not yet" verdict that names the mistake (``words``) without giving the solution away."""
    assert not verdict.ok, verdict
    assert verdict.answered, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not yet: "), verdict
    for word in words:
        assert word in verdict.message, (word, verdict.message)
    for snippet in SOLUTION_SNIPPETS:
        assert snippet not in verdict.message, (snippet, verdict.message)


def assert_unanswered(verdict: Verdict, *words: str) -> None:
    assert not verdict.ok and not verdict.answered, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not answered yet: "), verdict
    for word in words:
        assert word in verdict.message, (word, verdict.message)
    for snippet in SOLUTION_SNIPPETS:
        assert snippet not in verdict.message, (snippet, verdict.message)


def assert_passes(verdict: Verdict, *words: str) -> None:
    assert verdict.ok, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] correct: "), verdict
    for word in words:
        assert word in verdict.message, (word, verdict.message)


def blank(heads_out: Any) -> None:
    """A learner's function not written yet."""
    ...


def hand_split(y: Floats, heads: int) -> Floats:
    """A learner's split (B, T, D) -> (B, h, T, d_h), written out: Your turn 4 refuses the library's."""
    b, t, width = y.shape
    return y.reshape(b, t, heads, width // heads).transpose(0, 2, 1, 3)


def batch_first(folded: Floats, heads: int) -> Floats:
    """A learner's (B*h, T, d_h) -> (B, T, D), written out: Your turn 5 refuses the library's merge."""
    rows, t, width = folded.shape
    return folded.reshape(rows // heads, heads, t, width).transpose(0, 2, 1, 3).reshape(rows // heads, t, -1)


def raises(*args: Any) -> Any:
    raise IndexError("tuple index out of range")


def returns_nothing(*args: Any) -> None:
    np.zeros(1)


class Misbehaving:
    """An object whose every attribute access raises something unusual."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} here")


ODD_ANSWERS: list[Any] = ["abc", 3, [[1.0], [2.0, 3.0]], {"a": 1}, Misbehaving(), np.full((2, 2), "x"), object()]


# ---- merge (an array) --------------------------------------------------------------------


def test_merge_blank(heads_out: Floats) -> None:
    assert_unanswered(check_merge(None, heads_out), "replace None with", "(B, T, D)")


def test_merge_correct_and_equal_to_library(heads_out: Floats) -> None:
    merged = heads_out.transpose(0, 2, 1, 3).reshape(B, T, D)
    assert_passes(check_merge(merged, heads_out), "head 0")
    assert check_merge(mha_numpy.merge_heads(heads_out), heads_out).ok


def test_merge_accepts_torch_float32(heads_out: Floats) -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    assert check_merge(mha_torch.merge_heads(torch.from_numpy(heads_out).float()), heads_out).ok


MERGE_MISTAKES: list[tuple[str, Callable[[Floats], Floats], tuple[str, ...]]] = [
    ("direct reshape", lambda x: x.reshape(B, T, D), ("direct reshape", "without moving any axis")),
    ("interleaved", lambda x: x.transpose(0, 2, 3, 1).reshape(B, T, D), ("interleaved", "(B, T, d_h, h)")),
    ("averaged", lambda x: x.mean(axis=1), ("averaged", "lost the head axis")),
    ("summed", lambda x: x.sum(axis=1), ("summed", "lost the head axis")),
    ("no reshape", lambda x: x.transpose(0, 2, 1, 3), ("reshape", "missing")),
    ("stacked", lambda x: np.stack([x[:, i] for i in range(h)], axis=2), ("not yet glued",)),
    ("reversed", lambda x: np.concatenate([x[:, i] for i in reversed(range(h))], axis=-1), ("reverse order",)),
    ("token axis", lambda x: np.concatenate([x[:, i] for i in range(h)], axis=1), ("token axis", "(B, h*T, d_h)")),
]


@pytest.mark.parametrize("mistake, wrong, words", MERGE_MISTAKES, ids=[m[0] for m in MERGE_MISTAKES])
def test_merge_mistakes(
    heads_out: Floats, mistake: str, wrong: Callable[[Floats], Floats], words: tuple[str, ...]
) -> None:
    assert_fails(check_merge(wrong(heads_out), heads_out), *words)


def test_merge_mistakes_have_their_own_messages(heads_out: Floats) -> None:
    messages = {check_merge(wrong(heads_out), heads_out).message for _, wrong, _ in MERGE_MISTAKES}
    assert len(messages) == len(MERGE_MISTAKES) - 1  # stacking the heads is the transpose without the reshape


def test_merge_other_shape_and_other_numbers(heads_out: Floats) -> None:
    assert_fails(check_merge(np.zeros((B, D)), heads_out), "expected shape", str((B, T, D)))
    assert_fails(check_merge(np.zeros((B, T, D)), heads_out), "right shape (B, T, D), wrong numbers")
    assert_fails(check_merge(np.zeros((B, T, D), dtype=int), heads_out), "wrong numbers: not a merge")


@pytest.mark.parametrize("odd", ODD_ANSWERS, ids=[type(a).__name__ for a in ODD_ANSWERS])
def test_merge_never_raises_on_odd_answers(heads_out: Floats, odd: Any) -> None:
    verdict = check_merge(odd, heads_out)
    assert not verdict.ok and verdict.answered


def test_merge_bad_reference() -> None:
    with pytest.raises(ValueError, match=r"heads_out must have 4 axes"):
        check_merge(np.zeros((B, T, D)), np.zeros((B, T, D)))
    with pytest.raises(TypeError, match=r"heads_out must hold floating-point"):
        check_merge(np.zeros((B, T, D)), np.zeros((B, h, T, d_h), dtype=int))


# ---- merge (a function) ------------------------------------------------------------------


def concatenate_heads(x: Floats) -> Floats:
    """The paper's route: glue the h blocks of (B, T, d_h) side by side."""
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=-1)


def test_merge_function_blank(heads_out: Floats) -> None:
    assert_unanswered(check_merge_function(blank, heads_out), "write the body", "(B, T, D)")
    assert_unanswered(check_merge_function(None, heads_out), "write")


def test_merge_function_correct_by_both_routes(heads_out: Floats) -> None:
    assert_passes(check_merge_function(concatenate_heads, heads_out), str((B, T, D)))
    in_place = lambda x: x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert_passes(check_merge_function(in_place, heads_out))


def test_merge_function_accepts_torch_results(heads_out: Floats) -> None:
    torch = pytest.importorskip("torch")

    def torch_merge(x: Floats) -> Any:
        b, heads, t, width = x.shape
        return torch.from_numpy(x).transpose(1, 2).reshape(b, t, heads * width)

    assert check_merge_function(torch_merge, heads_out).ok


def test_merge_function_refuses_the_library(heads_out: Floats) -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    for library in (mha_numpy.merge_heads, lambda x: mha_numpy.merge_heads(x),
                    lambda x: mha_torch.merge_heads(torch.from_numpy(x))):
        assert_fails(check_merge_function(library, heads_out), "calls the library's merge_heads")


def test_merge_function_refuses_the_lessons_merge_and_private_helpers(heads_out: Floats) -> None:
    from lessons_lib.plotting import head_merge

    def merge(x: Floats) -> Floats:  # the notebook's own merge, defined after the exercise
        return concatenate_heads(x)

    assert_fails(check_merge_function(lambda x: merge(x), heads_out), "calls the lesson's merge")
    assert_fails(check_merge_function(lambda x: mha_numpy._merge_heads(x), heads_out), "_merge_heads")
    per_sequence = lambda x: np.stack([head_merge.merge_blocks(s)[0] for s in x])  # noqa: E731
    assert_fails(check_merge_function(per_sequence, heads_out), "merge_blocks")


def test_merge_function_names_axis_mix_ups(heads_out: Floats) -> None:
    all_axes = lambda x: x.T.reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert_fails(check_merge_function(all_axes, heads_out), "reverses ALL four axes")
    last_two = lambda x: x.swapaxes(-1, -2).reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert_fails(check_merge_function(last_two, heads_out), "swapped the last two axes")
    blocks = lambda x: [x[:, i] for i in range(x.shape[1])]  # noqa: E731
    assert_fails(check_merge_function(blocks, heads_out), "one after another", "(h, B, T, d_h)")


def test_merge_function_names_concatenate_of_the_array() -> None:
    square = np.random.default_rng(1).normal(size=(2, 2, 4, 4))  # B = h: np.concatenate(array, -1) fits (B, T, D)
    verdict = check_merge_function(lambda x: np.concatenate(x, axis=-1), square)
    assert_fails(verdict, "walks its FIRST axis", "the batch")


@pytest.mark.parametrize("mistake, wrong, words", MERGE_MISTAKES, ids=[m[0] for m in MERGE_MISTAKES])
def test_merge_function_mistakes(
    heads_out: Floats, mistake: str, wrong: Callable[[Floats], Floats], words: tuple[str, ...]
) -> None:
    assert_fails(check_merge_function(wrong, heads_out), *words)


def test_merge_function_hard_coded_shape(heads_out: Floats) -> None:
    verdict = check_merge_function(lambda x: x.transpose(0, 2, 1, 3).reshape(B, T, D), heads_out)
    assert_fails(verdict, "sizes hard-coded", "Right for heads_out of shape", "(1, 3, 5, 2)", "raised ValueError",
                 "argument's shape")
    width_4 = lambda x: x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], x.shape[1] * 4)  # noqa: E731
    assert_fails(check_merge_function(width_4, np.ones((2, 2, 4, 4))), "sizes hard-coded")


def test_merge_function_raises_returns_nothing_or_odd_things(heads_out: Floats) -> None:
    assert_fails(check_merge_function(raises, heads_out), "raised IndexError", "tuple index out of range")
    assert_fails(check_merge_function(returns_nothing, heads_out), "returned None", "return")
    assert_fails(check_merge_function("merge", heads_out), "expected a function")
    for odd in ODD_ANSWERS:
        verdict = check_merge_function(lambda x, odd=odd: odd, heads_out)
        assert not verdict.ok and verdict.answered, verdict


def test_merge_function_does_not_let_the_learner_change_the_problem(heads_out: Floats) -> None:
    def spoils(x: Floats) -> Floats:
        x[...] = 0.0
        return np.zeros((x.shape[0], x.shape[2], x.shape[1] * x.shape[3]))

    before = heads_out.copy()
    assert not check_merge_function(spoils, heads_out).ok
    assert np.array_equal(heads_out, before)


# ---- one head's contribution (a function) -------------------------------------------------


def rows_of_head(x: Floats, w: Floats, i: int) -> Floats:
    """The right answer: head i's features meet rows i*d_h .. (i+1)*d_h - 1 of W_o."""
    width = x.shape[-1]
    result: Floats = x[:, i] @ w[i * width : (i + 1) * width]
    return result


def test_head_contribution_blank(heads_out: Floats, wo: Floats) -> None:
    assert_unanswered(check_head_contribution(blank, heads_out, wo), "write the body", "(B, T, D)")
    assert_unanswered(check_head_contribution(None, heads_out, wo), "write")


def test_head_contribution_correct_and_adds_up(heads_out: Floats, wo: Floats) -> None:
    assert_passes(check_head_contribution(rows_of_head, heads_out, wo), "add up")
    total = sum(rows_of_head(heads_out, wo, i) for i in range(h))
    assert np.allclose(total, mha_numpy.merge_heads(heads_out) @ wo)

    def zero_the_others(x: Floats, w: Floats, i: int) -> Floats:
        kept = np.zeros_like(x)
        kept[:, i] = x[:, i]
        result: Floats = mha_numpy.merge_heads(kept) @ w
        return result

    assert check_head_contribution(zero_the_others, heads_out, wo).ok


def test_head_contribution_accepts_torch_float32(heads_out: Floats, wo: Floats) -> None:
    torch = pytest.importorskip("torch")

    def in_torch(x: Floats, w: Floats, i: int) -> Any:
        return torch.from_numpy(rows_of_head(x, w, i)).float()

    assert check_head_contribution(in_torch, heads_out, wo).ok


CONTRIBUTION_MISTAKES: list[tuple[str, Callable[[Floats, Floats, int], Any], tuple[str, ...]]] = [
    ("transposed", lambda x, w, i: rows_of_head(x, w.T, i), ("W_o is transposed",)),
    ("next head", lambda x, w, i: rows_of_head(x, w, (i + 1) % x.shape[1]), ("counted from 0",)),
    ("first rows", lambda x, w, i: x[:, i] @ w[: x.shape[-1]], ("belong to head 0",)),
    ("every h-th row", lambda x, w, i: x[:, i] @ w[i :: x.shape[1]], ("every h-th row",)),
    ("whole output", lambda x, w, i: mha_numpy.merge_heads(x) @ w, ("the whole output",)),
    ("equal share", lambda x, w, i: mha_numpy.merge_heads(x) @ w / x.shape[1], ("equal share", "1/h = 1/3")),
    ("no W_o", lambda x, w, i: x[:, i], ("W_o is missing",)),
    ("averaged blocks", lambda x, w, i: x[:, i] @ w.reshape(x.shape[1], x.shape[-1], -1).mean(axis=0),
     ("averaged W_o's h blocks",)),
    ("columns", lambda x, w, i: x[:, i] @ w[:, i * x.shape[-1] : (i + 1) * x.shape[-1]],
     ("for i = 0", "columns, not rows", "meet d_h rows of wo")),
]


@pytest.mark.parametrize("mistake, wrong, words", CONTRIBUTION_MISTAKES, ids=[m[0] for m in CONTRIBUTION_MISTAKES])
def test_head_contribution_mistakes(
    heads_out: Floats, wo: Floats, mistake: str, wrong: Callable[[Floats, Floats, int], Any], words: tuple[str, ...]
) -> None:
    assert_fails(check_head_contribution(wrong, heads_out, wo), *words)


def test_head_contribution_the_notebooks_wo_or_sizes(heads_out: Floats, wo: Floats) -> None:
    lesson_wo = lambda x, w, i: rows_of_head(x, wo, i)  # noqa: E731
    assert_fails(check_head_contribution(lesson_wo, heads_out, wo), "your W_o is not the wo given")
    width_2 = lambda x, w, i: x[:, i] @ w[i * 2 : (i + 1) * 2]  # noqa: E731  d_h = 2 hard-coded
    assert_fails(check_head_contribution(width_2, heads_out, wo), "sizes hard-coded", "Read B, h, T, d_h")


def test_head_contribution_shape_and_numbers(heads_out: Floats, wo: Floats) -> None:
    assert_fails(check_head_contribution(lambda x, w, i: np.zeros((B, D)), heads_out, wo), "expected shape")
    assert_fails(check_head_contribution(lambda x, w, i: np.zeros((B, T, D)), heads_out, wo),
                 "right shape (B, T, D), wrong numbers")
    for odd in ODD_ANSWERS:
        verdict = check_head_contribution(lambda x, w, i, odd=odd: odd, heads_out, wo)
        assert not verdict.ok and verdict.answered, verdict


def test_head_contribution_bad_reference(heads_out: Floats) -> None:
    with pytest.raises(ValueError, match=r"wo must be \(D, D\)"):
        check_head_contribution(blank, heads_out, np.zeros((D, D + 1)))
    with pytest.raises(ValueError, match=r"heads_out must have 4 axes"):
        check_head_contribution(blank, np.zeros((B, T, D)), np.zeros((D, D)))


# ---- the sequence-first merge of folded heads (a function) --------------------------------


def sequence_first(folded: Floats, heads: int) -> Floats:
    """The right answer, written independently: unfold, merge each sequence, then put T first."""
    rows = folded.shape[0]
    per_sequence = [concatenate_heads(folded[b * heads : (b + 1) * heads][None])[0] for b in range(rows // heads)]
    return np.stack(per_sequence, axis=1)  # (T, B, D)


@pytest.fixture
def folded(heads_out: Floats) -> Floats:
    """``heads_out`` folded to ``(B*h, T, d_h)``: row ``b*h + i`` is head ``i`` of sequence ``b``."""
    return heads_out.reshape(B * h, T, d_h)


def test_time_major_merge_blank(folded: Floats) -> None:
    assert_unanswered(check_time_major_merge(blank, folded, h), "write the body", "(T, B, D)")


def test_time_major_merge_correct(folded: Floats) -> None:
    assert_passes(check_time_major_merge(sequence_first, folded, h), str((T, B, D)))
    swap = lambda f, n: f.swapaxes(0, 1).reshape(f.shape[1], f.shape[0] // n, -1)  # noqa: E731
    assert check_time_major_merge(swap, folded, h).ok


TIME_MAJOR_MISTAKES: list[tuple[str, Callable[[Floats, int], Any], tuple[str, ...]]] = [
    ("batch first", lambda f, n: batch_first(f, n), ("batch first",)),
    ("head-major", lambda f, n: sequence_first(f.reshape(n, -1, *f.shape[1:]).swapaxes(0, 1).reshape(f.shape), n),
     ("head-major",)),
    ("direct", lambda f, n: f.reshape(f.shape[1], f.shape[0] // n, -1), ("direct reshape",)),
    ("no reshape", lambda f, n: f.swapaxes(0, 1), ("a reshape is missing",)),
    ("reshape of batch first",
     lambda f, n: batch_first(f, n).reshape(f.shape[1], f.shape[0] // n, -1),
     ("relabels the numbers",)),
    ("reversed", lambda f, n: sequence_first(f.reshape(-1, n, *f.shape[1:])[:, ::-1].reshape(f.shape), n),
     ("reverse order",)),
]


@pytest.mark.parametrize("mistake, wrong, words", TIME_MAJOR_MISTAKES, ids=[m[0] for m in TIME_MAJOR_MISTAKES])
def test_time_major_merge_mistakes(
    folded: Floats, mistake: str, wrong: Callable[[Floats, int], Any], words: tuple[str, ...]
) -> None:
    assert_fails(check_time_major_merge(wrong, folded, h), *words)


def test_time_major_merge_hard_coded_sizes(folded: Floats) -> None:
    fixed = lambda f, n: f.swapaxes(0, 1).reshape(T, B, D)  # noqa: E731
    assert_fails(check_time_major_merge(fixed, folded, h), "sizes hard-coded", "raised ValueError")
    notebook_b = lambda f, n: f.swapaxes(0, 1).reshape(f.shape[1], B, -1)  # noqa: E731
    assert_fails(check_time_major_merge(notebook_b, folded, h), "sizes hard-coded", "folded.shape[0] // heads")


def test_time_major_merge_odd_answers_and_bad_reference(folded: Floats) -> None:
    assert_fails(check_time_major_merge(raises, folded, h), "raised IndexError")
    for odd in ODD_ANSWERS:
        verdict = check_time_major_merge(lambda f, n, odd=odd: odd, folded, h)
        assert not verdict.ok and verdict.answered, verdict
    with pytest.raises(ValueError, match=r"heads must be a positive int dividing"):
        check_time_major_merge(blank, folded, 5)
    with pytest.raises(ValueError, match=r"folded must have 3 axes"):
        check_time_major_merge(blank, folded[0], h)


# ---- nn.Linear weight (a tensor) ---------------------------------------------------------


def test_linear_weight_blank(wo: Floats) -> None:
    assert_unanswered(check_linear_weight(None, wo), "replace None with", "(out_features, in_features)")


def test_linear_weight_correct(wo: Floats) -> None:
    assert_passes(check_linear_weight(wo.T, wo), "(out_features, in_features)")


def test_linear_weight_from_library_layer() -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    numpy_layer = mha_numpy.MultiHead(D, h, seed=3)
    torch_layer = mha_torch.MultiHead(D, h, seed=3, dtype=torch.float32)
    assert check_linear_weight(torch_layer.wq.weight, numpy_layer.wq).ok
    assert_fails(check_linear_weight(torch.from_numpy(numpy_layer.wq), numpy_layer.wq), "not transposed")


def test_linear_weight_not_transposed(wo: Floats) -> None:
    assert_fails(check_linear_weight(wo, wo), "not transposed", "(out_features, in_features)")
    w = np.random.default_rng(0).normal(size=(D, 2 * D))  # (in, out), rectangular
    assert check_linear_weight(w.T, w).ok
    assert_fails(check_linear_weight(w, w), "not transposed")


def test_linear_weight_wrong_shape_and_numbers(wo: Floats) -> None:
    assert_fails(check_linear_weight(np.zeros((D, D + 1)), wo), "expected shape")
    assert_fails(check_linear_weight(wo.T + 1.0, wo), "right shape, wrong numbers", "not those of w_in_out")
    assert_fails(check_linear_weight(-wo.T, wo), "wrong sign")
    w = np.random.default_rng(0).normal(size=(D, 2 * D))  # (in, out), rectangular
    assert_fails(check_linear_weight(w.reshape(2 * D, D), w), "reshaped, not transposed")


@pytest.mark.parametrize("odd", ODD_ANSWERS, ids=[type(a).__name__ for a in ODD_ANSWERS])
def test_linear_weight_never_raises_on_odd_answers(wo: Floats, odd: Any) -> None:
    verdict = check_linear_weight(odd, wo)
    assert not verdict.ok and verdict.answered


def test_linear_weight_bad_reference() -> None:
    with pytest.raises(ValueError, match=r"w_in_out must have 2 axes"):
        check_linear_weight(np.zeros((D, D)), np.zeros(D))


# ---- nn.Linear from NumPy (a function) ---------------------------------------------------


@pytest.fixture
def w_wide() -> Floats:
    """A rectangular ``(in, out) = (D, 3D)`` matrix, so that the layout shows in the shape."""
    return np.random.default_rng(4).uniform(-0.5, 0.5, size=(D, 3 * D))


def make_linear(
    transpose: bool = True, bias: bool = False, swap: bool = False, dtype: Any = None
) -> Callable[[Floats], Any]:
    """A learner's ``linear_from_numpy``, right or with one of the known mistakes."""
    torch = pytest.importorskip("torch")

    def linear_from_numpy(w: Floats) -> Any:
        n_in, n_out = w.shape
        layer = torch.nn.Linear(n_out if swap else n_in, n_in if swap else n_out, bias=bias, dtype=dtype)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(w.T if transpose else w))
        return layer

    return linear_from_numpy


def test_linear_from_numpy_blank(w_wide: Floats) -> None:
    assert_unanswered(check_linear_from_numpy(blank, w_wide), "write the body", "nn.Linear")


def test_linear_from_numpy_correct(w_wide: Floats) -> None:
    torch = pytest.importorskip("torch")
    verdict = check_linear_from_numpy(make_linear(dtype=torch.float64), w_wide)
    assert_passes(verdict, "(out_features, in_features) = (18, 6)")
    assert_fails(check_linear_from_numpy(make_linear(), w_wide), "default dtype is float32")  # float64 required


def test_linear_from_numpy_layer_computes_x_at_w(w_wide: Floats) -> None:
    torch = pytest.importorskip("torch")
    layer = make_linear(dtype=torch.float64)(w_wide)
    probe = np.random.default_rng(5).normal(size=(3, D))
    with torch.no_grad():
        assert np.allclose(layer(torch.from_numpy(probe)).numpy(), probe @ w_wide)


def test_linear_from_numpy_untransposed_copy(w_wide: Floats) -> None:
    # nn.Linear(in, out) cannot take the (in, out) matrix: copy_ raises, and the verdict says so
    verdict = check_linear_from_numpy(make_linear(transpose=False), w_wide)
    assert_fails(verdict, "raised RuntimeError", "(out_features, in_features)", "(in, out) = (6, 18)")
    # with in_features and out_features swapped to make it fit, the weight is the untransposed matrix
    assert_fails(check_linear_from_numpy(make_linear(transpose=False, swap=True), w_wide), "not transposed")


def test_linear_from_numpy_bias(w_wide: Floats) -> None:
    assert_fails(check_linear_from_numpy(make_linear(bias=True), w_wide), "has a bias")


def test_linear_from_numpy_returns_a_tensor_or_odd_things(w_wide: Floats) -> None:
    torch = pytest.importorskip("torch")
    assert_fails(check_linear_from_numpy(lambda w: torch.from_numpy(w.T), w_wide), "expected an nn.Linear", "Tensor")
    assert_fails(check_linear_from_numpy(raises, w_wide), "raised IndexError")
    assert_fails(check_linear_from_numpy(returns_nothing, w_wide), "returned None")
    for odd in ODD_ANSWERS:
        verdict = check_linear_from_numpy(lambda w, odd=odd: odd, w_wide)
        assert not verdict.ok and verdict.answered, verdict


# ---- fix the broken layer ----------------------------------------------------------------


Problem = tuple[Floats, Floats, Floats, Floats, Floats]


@pytest.fixture
def problem() -> Problem:
    """``x (B, T, D)`` and the four ``(D, D)`` weights ``wq, wk, wv, wo`` of one layer."""
    w = mha_numpy.init_weights(D, seed=6)
    return np.random.default_rng(7).normal(size=(B, T, D)), w["wq"], w["wk"], w["wv"], w["wo"]


def check(answer: Any, problem: Problem, heads: int = h) -> Verdict:
    x, wq, wk, wv, wo = problem
    return check_fixed_forward(answer, x, wq, wk, wv, wo, heads)


def library_layer(problem: Problem) -> mha_numpy.MultiHead:
    _, wq, wk, wv, wo = problem
    return mha_numpy.MultiHead.from_weights(wq, wk, wv, wo, heads=h)


def forward(split_direct: bool = False, scale: str = "sqrt(d_h)", merge_direct: bool = False) -> Callable[..., Floats]:
    """A learner's ``fixed_forward``, written independently of the checker, right or with known bugs."""

    def fixed_forward(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Floats:
        b, t, width = x.shape
        size = width // heads
        factor = {"sqrt(d_h)": size**0.5, "none": 1.0, "d_h": size, "sqrt(D)": width**0.5}[scale]

        def split(y: Floats) -> Floats:
            split_up = y.reshape(b, heads, t, size) if split_direct else hand_split(y, heads)
            return split_up.astype(np.float64)

        q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
        heads_out: Floats = mha_numpy.softmax(q @ np.swapaxes(k, -1, -2) / factor) @ v
        merged = heads_out.reshape(b, t, width) if merge_direct else mha_numpy.merge_heads(heads_out)
        result: Floats = merged @ wo
        return result

    return fixed_forward


def test_fixed_forward_blank(problem: Problem) -> None:
    assert_unanswered(check(blank, problem), "write the body", "(B, T, D)")


def test_fixed_forward_correct(problem: Problem) -> None:
    assert_passes(check(forward(), problem), "both bugs fixed")


def test_fixed_forward_refuses_the_library_layer(problem: Problem) -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    def numpy_library(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Any:
        return mha_numpy.MultiHead.from_weights(wq, wk, wv, wo, heads=heads)(x)[0]

    def torch_library(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Any:
        qt, kt, vt, ot = (torch.from_numpy(m.T.copy()) for m in (wq, wk, wv, wo))
        return mha_torch.MultiHead.from_weights(qt, kt, vt, ot, heads=heads)(torch.from_numpy(x))[0].detach().numpy()

    for library in (numpy_library, torch_library):
        assert_fails(check(library, problem), "calls the library's MultiHead")


def test_fixed_forward_refuses_an_answer_that_ignores_the_arguments(problem: Problem) -> None:
    library = library_layer(problem)
    fixed = library(problem[0])[0]
    assert_fails(check(lambda *args: library(problem[0])[0], problem), "same output whatever it is given")
    assert_fails(check(lambda *args: fixed, problem), "same output whatever it is given")
    assert_fails(check(lambda x, *args: library(x)[0], problem), "not with the weights it was given")


def test_fixed_forward_names_the_notebooks_head_count(problem: Problem) -> None:
    right = forward()
    assert_fails(check(lambda x, wq, wk, wv, wo, heads: right(x, wq, wk, wv, wo, h), problem), "sizes hard-coded")
    w = mha_numpy.init_weights(8, seed=2)
    x8 = np.random.default_rng(3).normal(size=(2, 4, 8))  # the lesson's sizes: 2 heads divide every D tried
    two_heads = check_fixed_forward(lambda x, wq, wk, wv, wo, heads: right(x, wq, wk, wv, wo, 2),
                                    x8, w["wq"], w["wk"], w["wv"], w["wo"], 2)
    assert_fails(two_heads, "used 2 heads", "argument `heads`")


def test_fixed_forward_names_the_softmax_over_queries(problem: Problem) -> None:
    def by_columns(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Floats:
        q, k, v = (hand_split(x @ m, heads) for m in (wq, wk, wv))
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        return mha_numpy.merge_heads(mha_numpy.softmax(scores, axis=-2) @ v) @ wo

    assert_fails(check(by_columns, problem), "axis -2, the query axis")


def test_fixed_forward_accepts_torch_float32(problem: Problem) -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    def in_float32(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Any:
        xt, qt, kt, vt, ot = (torch.from_numpy(m).float() for m in (x, wq, wk, wv, wo))
        b, t, width = xt.shape
        q, k, v = ((xt @ m).view(b, t, heads, -1).transpose(1, 2) for m in (qt, kt, vt))
        out = torch.softmax(q @ k.transpose(-2, -1) / (width // heads) ** 0.5, dim=-1) @ v
        return mha_torch.merge_heads(out) @ ot

    assert check(in_float32, problem).ok


def test_fixed_forward_refuses_the_librarys_split_and_attention(problem: Problem) -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    def numpy_steps(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Any:
        q, k, v = (mha_numpy.split_heads(x @ m, heads) for m in (wq, wk, wv))
        return mha_numpy.merge_heads(mha_numpy.attention(q, k, v)[0]) @ wo

    def torch_attention(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Any:
        q, k, v = (torch.from_numpy(hand_split(x @ m, heads)) for m in (wq, wk, wv))
        return mha_numpy.merge_heads(mha_torch.attention(q, k, v)[0].numpy()) @ wo

    def private(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Any:
        q, k, v = (hand_split(x @ m, heads) for m in (wq, wk, wv))
        return mha_numpy.merge_heads(mha_numpy._attention(q, k, v, None)[0]) @ wo

    assert_fails(check(numpy_steps, problem), "calls the library's split_heads")
    assert_fails(check(torch_attention, problem), "calls the library's attention")
    assert_fails(check(private, problem), "calls the library's _attention")


def test_fixed_forward_names_an_interleaved_split(problem: Problem) -> None:
    def interleaved(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Floats:
        b, t, width = x.shape
        q, k, v = ((x @ m).reshape(b, t, width // heads, heads).transpose(0, 3, 1, 2) for m in (wq, wk, wv))
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(width // heads)
        result: Floats = mha_numpy.merge_heads(mha_numpy.softmax(scores) @ v) @ wo
        return result

    assert_fails(check(interleaved, problem), "the features are interleaved", "(B, T, d_h, h)")


def test_time_major_merge_refuses_a_finished_merge(folded: Floats) -> None:
    def library(f: Floats, n: int) -> Any:
        return mha_numpy.merge_heads(f.reshape(-1, n, *f.shape[1:])).swapaxes(0, 1)

    assert_fails(check_time_major_merge(library, folded, h), "calls the library's merge_heads")


def test_linear_from_numpy_refuses_the_librarys_linear() -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    w = np.random.default_rng(4).uniform(-0.5, 0.5, size=(6, 18))
    built = lambda m: mha_torch.linear(torch.from_numpy(m.T.copy()))  # noqa: E731
    assert_fails(check_linear_from_numpy(built, w), "calls the library's linear")


def test_head_contribution_names_columns_that_raise(heads_out: Floats, wo: Floats) -> None:
    columns = lambda x, w, i: x[:, i] @ w[..., i * x.shape[-1] : (i + 1) * x.shape[-1]]  # noqa: E731
    verdict = check_head_contribution(columns, heads_out, wo)
    assert_fails(verdict, "COLUMNS of wo", "columns, not rows")
    assert "matmul" not in verdict.message


FORWARD_MISTAKES: list[tuple[str, Callable[..., Floats], tuple[str, ...]]] = [
    ("both bugs", forward(split_direct=True, scale="none"), ("both bugs remain", "split", "unscaled")),
    ("scale missing", forward(scale="none"), ("split is fixed", "one bug remains", "unscaled")),
    ("split direct", forward(split_direct=True), ("scale is fixed", "one bug remains", "straight to (B, h, T, d_h)")),
    ("scale d_h", forward(scale="d_h"), ("divided by d_h = 2", "too much")),
    ("scale sqrt(D)", forward(scale="sqrt(D)"), ("divided by sqrt(D) = sqrt(6)",)),
    ("merge direct", forward(merge_direct=True), ("merge is now a direct reshape",)),
]


@pytest.mark.parametrize("mistake, wrong, words", FORWARD_MISTAKES, ids=[m[0] for m in FORWARD_MISTAKES])
def test_fixed_forward_mistakes(
    problem: Problem, mistake: str, wrong: Callable[..., Floats], words: tuple[str, ...]
) -> None:
    assert_fails(check(wrong, problem), *words)


def test_fixed_forward_names_a_split_fixed_for_some_of_q_k_v(problem: Problem) -> None:
    def partly(direct: str, scaled: bool = True) -> Callable[..., Floats]:
        def fixed_forward(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Floats:
            b, t, width = x.shape
            size = width // heads
            q, k, v = (y.reshape(b, heads, t, size) if name in direct else hand_split(y, heads)
                       for name, y in zip("qkv", (x @ wq, x @ wk, x @ wv), strict=True))
            scores = q @ np.swapaxes(k, -1, -2) / (size**0.5 if scaled else 1.0)
            result: Floats = mha_numpy.merge_heads(mha_numpy.softmax(scores) @ v) @ wo
            return result

        return fixed_forward

    assert_fails(check(partly("v"), problem), "q and k are split right", "v is still split by a direct reshape")
    assert_fails(check(partly("qk"), problem), "v is split right", "q and k are still split")
    assert_fails(check(partly("v", scaled=False), problem), "v is still split", "unscaled")


def test_fixed_forward_names_a_4d_transpose(problem: Problem) -> None:
    def keys_t(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Floats:
        q, k, v = (hand_split(x @ m, heads) for m in (wq, wk, wv))
        result: Floats = mha_numpy.merge_heads(mha_numpy.softmax(q @ k.T) @ v) @ wo
        return result

    assert_fails(check(keys_t, problem), "raised ValueError", "reverses all four axes")


def test_fixed_forward_names_a_misplaced_scale_and_a_missing_projection(problem: Problem) -> None:
    def layer(scale_at: str) -> Callable[..., Floats]:
        def fixed_forward(x: Floats, wq: Floats, wk: Floats, wv: Floats, wo: Floats, heads: int) -> Floats:
            factor = (x.shape[-1] // heads) ** 0.5
            q, k, v = (hand_split(x @ m, heads) for m in (wq, wk, wv))
            scores = q @ np.swapaxes(k, -1, -2)
            weights = {"weights": mha_numpy.softmax(scores) / factor, "times": mha_numpy.softmax(scores * factor),
                       "right": mha_numpy.softmax(scores / factor)}[scale_at if scale_at != "no W_o" else "right"]
            merged = mha_numpy.merge_heads(weights @ v).astype(np.float64)
            result: Floats = merged if scale_at == "no W_o" else merged @ wo
            return result

        return fixed_forward

    assert_fails(check(layer("weights"), problem), "to the weights, after the softmax")
    assert_fails(check(layer("times"), problem), "multiplied by the scale factor")
    assert_fails(check(layer("no W_o"), problem), "W_o is missing")


def test_head_contribution_names_slices_of_the_wrong_thing(heads_out: Floats, wo: Floats) -> None:
    def block(x: Floats, w: Floats, i: int) -> Floats:
        rows = slice(i * x.shape[-1], (i + 1) * x.shape[-1])
        return x[:, i] @ w[rows, rows]

    assert_fails(check_head_contribution(block, heads_out, wo), "diagonal block")
    sliced = lambda x, w, i: (mha_numpy.merge_heads(x) @ w)[..., i * d_h : (i + 1) * d_h]  # noqa: E731
    assert_fails(check_head_contribution(sliced, heads_out, wo), "sliced the OUTPUT")


def test_merge_function_names_a_torch_style_transpose(heads_out: Floats) -> None:
    two_axes = lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)  # noqa: E731
    assert_fails(check_merge_function(two_axes, heads_out), "ALL the axes")
    old_places = lambda x: x.swapaxes(1, 2).reshape(x.shape[0], x.shape[1], -1)  # noqa: E731
    assert_fails(check_merge_function(old_places, heads_out), "from the wrong axes")


def test_fixed_forward_mistakes_have_their_own_messages(problem: Problem) -> None:
    messages = {check(wrong, problem).message for _, wrong, _ in FORWARD_MISTAKES}
    assert len(messages) == len(FORWARD_MISTAKES)


def test_fixed_forward_tuple_shape_and_numbers(problem: Problem) -> None:
    library = library_layer(problem)
    assert_fails(check(lambda *args: library(args[0]), problem), "tuple of 2", "output (B, T, D) only")
    assert_fails(check(lambda *args: np.zeros((B, D)), problem), "expected shape")
    assert_fails(check(lambda *args: np.zeros((B, T, D)), problem), "not the layer's output")


def test_fixed_forward_raises_returns_nothing_or_odd_things(problem: Problem) -> None:
    assert_fails(check(raises, problem), "raised IndexError")
    assert_fails(check(returns_nothing, problem), "returned None")
    assert_fails(check(42, problem), "expected a function")
    for odd in ODD_ANSWERS:
        verdict = check(lambda *args, odd=odd: odd, problem)
        assert not verdict.ok and verdict.answered, verdict


def test_fixed_forward_bad_reference(problem: Problem) -> None:
    x, wq, wk, wv, wo = problem
    with pytest.raises(ValueError, match=r"heads must divide D = 6"):
        check(forward(), problem, heads=4)
    with pytest.raises(ValueError, match=r"x must have 3 axes"):
        check_fixed_forward(forward(), x[0], wq, wk, wv, wo, h)
    with pytest.raises(ValueError, match=r"weights must be \(D, D\)"):
        check_fixed_forward(forward(), x, wq[:, :2], wk, wv, wo, h)


# ---- the module --------------------------------------------------------------------------


def test_each_exercise_has_its_own_label(
    heads_out: Floats, wo: Floats, w_wide: Floats, problem: Problem, folded: Floats
) -> None:
    verdicts = [
        check_merge(None, heads_out),
        check_merge_function(blank, heads_out),
        check_head_contribution(blank, heads_out, wo),
        check_time_major_merge(blank, folded, h),
        check_linear_weight(None, wo),
        check_linear_from_numpy(blank, w_wide),
        check(blank, problem),
    ]
    labels = [verdict.question for verdict in verdicts]
    assert labels == [
        "merge", "merge by hand", "head contribution", "sequence-first merge", "nn.Linear weight",
        "nn.Linear from NumPy",
        "fixed layer",
    ]


def test_lesson03_checks_do_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, lessons_lib.checks.concatenate_and_project; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
