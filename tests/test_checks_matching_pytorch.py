"""Tests for `lessons_lib.checks.matching_pytorch`: each checker on a blank answer, on the right
answer and on every wrong answer it recognises (the verdict must name the mistake, and no "not yet"
message may give the solution away), on answers of the wrong kind (it must never raise), plus bad
reference arguments."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from numpy.typing import NDArray
from torch import nn

from lessons_lib import mha_numpy, mha_torch
from lessons_lib.checks import Verdict
from lessons_lib.checks.matching_pytorch import (
    check_causal_mha,
    check_float_mask,
    check_key_padding_mask,
    check_mha_mask,
)

B, T, S, D, h = 2, 4, 6, 8, 2

# What a solution cell writes; a "not yet" message must contain none of these.
SOLUTION_SNIPPETS = ("~allowed", "~causal", ">= lengths", "masked_fill", "torch.where", "np.where", "attn_mask=~")


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


def assert_passes(verdict: Verdict, *words: str) -> None:
    assert verdict.ok, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] correct: "), verdict
    for word in words:
        assert word in verdict.message, (word, verdict.message)


class Misbehaving:
    """An object whose every attribute access raises something unusual."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} here")


ODD_ANSWERS: list[Any] = ["abc", 3, [[1.0], [2.0, 3.0]], {"a": 1}, Misbehaving(), np.full((2, 2), "x"), object()]


# ---- nn.MultiheadAttention mask (moved here from lesson 03) ------------------------------


def test_mha_mask_blank() -> None:
    assert_unanswered(check_mha_mask(None, mha_numpy.causal_mask(T)), "replace None with", "boolean (T, S)")


def test_mha_mask_correct() -> None:
    allowed = mha_numpy.causal_mask(T)
    assert_passes(check_mha_mask(~allowed, allowed), "blocked")


def test_mha_mask_accepts_torch() -> None:
    allowed = mha_torch.causal_mask(T, T + 2)
    assert check_mha_mask(~allowed, allowed).ok
    assert_fails(check_mha_mask(allowed, allowed), "inverted convention")
    assert_fails(check_mha_mask(allowed.double(), allowed), "0s and 1s")


def test_mha_mask_inverted() -> None:
    allowed = mha_numpy.causal_mask(T)
    assert_fails(check_mha_mask(allowed, allowed), "inverted convention", "True as blocked")


def test_mha_mask_transposed() -> None:
    allowed = mha_numpy.causal_mask(T)
    assert_fails(check_mha_mask((~allowed).T, allowed), "transposed")
    rectangular = mha_numpy.causal_mask(T, T + 2)
    assert_fails(check_mha_mask((~rectangular).T, rectangular), "transposed")


def test_mha_mask_float_masks() -> None:
    allowed = mha_numpy.causal_mask(T, T + 2)
    assert_passes(check_mha_mask(np.where(allowed, 0.0, -np.inf), allowed), "additive")
    assert_fails(check_mha_mask(np.where(allowed, -np.inf, 0.0), allowed), "inverted additive")
    assert_fails(check_mha_mask(allowed.astype(float), allowed), "0s and 1s", "block nothing")
    assert_fails(check_mha_mask((~allowed).astype(float), allowed), "0s and 1s", "block nothing")
    assert_fails(check_mha_mask(np.zeros(allowed.shape), allowed), "-inf blocks")


def test_mha_mask_nan_anti_causal_and_top_left() -> None:
    allowed = allowed_ts()  # (T, S) = (4, 6), bottom-right causal
    rows, cols = np.indices(allowed.shape)
    assert_fails(check_mha_mask(torch.from_numpy(~allowed) * float("-inf"), allowed), "0 * -inf is NaN")
    assert_fails(check_mha_mask(cols < rows + S - T, allowed), "anti-causal", "blocks the past")
    assert_fails(check_mha_mask(cols > rows, allowed), "top-left alignment", "is_causal")
    square = mha_numpy.causal_mask(T)  # T = S: no top-left mistake to recognise, the anti-causal one remains
    assert_fails(check_mha_mask(np.tril(np.ones((T, T), dtype=bool), -1), square), "anti-causal")


def test_mha_mask_wrong_shape_pattern_and_dtype() -> None:
    allowed = mha_numpy.causal_mask(T)
    assert_fails(check_mha_mask(np.ones((T, T + 1), dtype=bool), allowed), "expected shape")
    assert_fails(check_mha_mask(np.zeros((T, T), dtype=bool), allowed), "pattern")
    assert_fails(check_mha_mask((~allowed).astype(int), allowed), "dtype int")


@pytest.mark.parametrize("odd", ODD_ANSWERS, ids=[type(a).__name__ for a in ODD_ANSWERS])
def test_mha_mask_never_raises_on_odd_answers(odd: Any) -> None:
    verdict = check_mha_mask(odd, mha_numpy.causal_mask(T))
    assert not verdict.ok and verdict.answered


def test_mha_mask_bad_reference() -> None:
    with pytest.raises(TypeError, match=r"allowed must hold booleans .* laid out as \(T, S\)"):
        check_mha_mask(np.zeros((T, T), dtype=bool), np.zeros((T, T)))


def test_mha_mask_really_works_in_pytorch() -> None:
    """The answer the checker accepts makes nn.MultiheadAttention equal our layer; the inverted one does not."""
    allowed = mha_torch.causal_mask(T)
    layer = mha_torch.MultiHead(D, h, seed=0, dtype=torch.float64)
    mha = nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([layer.wq.weight, layer.wk.weight, layer.wv.weight]))
        mha.out_proj.weight.copy_(layer.wo.weight)
        x = torch.randn(B, T, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        ours = layer(x, allowed=allowed)[0]
        assert check_mha_mask(~allowed, allowed).ok and torch.allclose(mha(x, x, x, attn_mask=~allowed)[0], ours)
        assert not torch.allclose(mha(x, x, x, attn_mask=allowed)[0], ours)


# ---- key_padding_mask from lengths -------------------------------------------------------

LENGTHS = np.array([6, 3])


def padding(lengths: Any = LENGTHS, size: int = S) -> NDArray[np.bool_]:
    """The right answer, written independently of the checker."""
    return np.array([[s >= n for s in range(size)] for n in lengths])


def test_key_padding_blank() -> None:
    assert_unanswered(check_key_padding_mask(None, LENGTHS, S, T), "replace None with", "(B, S)", "True = padding")


def test_key_padding_correct_numpy_and_torch() -> None:
    assert_passes(check_key_padding_mask(padding(), LENGTHS, S, T), "(B, S) = (2, 6)")
    lengths = torch.tensor([6, 3])
    assert_passes(check_key_padding_mask(torch.arange(S)[None, :] >= lengths[:, None], lengths, S, T))
    assert check_key_padding_mask(padding(), LENGTHS, S).ok  # T is optional


KEY_PADDING_MISTAKES: list[tuple[str, Any, tuple[str, ...]]] = [
    ("inverted", ~padding(), ("inverted convention", "True as padding")),
    ("queries", padding(size=T), ("shape (B, T) = (2, 4)", "(B, S) = (2, 6)", "keys")),
    ("queries inverted", ~padding(size=T), ("shape (B, T)",)),
    ("transposed", padding().T, ("transposed", "(S, B)")),
    ("last real token kept as padding", np.array([[s >= n - 1 for s in range(S)] for n in LENGTHS]),
     ("off by one", "last real token")),
    ("first padding position missed", np.array([[s > n for s in range(S)] for n in LENGTHS]),
     ("off by one", "first padding position")),
]


@pytest.mark.parametrize("mistake, wrong, words", KEY_PADDING_MISTAKES, ids=[m[0] for m in KEY_PADDING_MISTAKES])
def test_key_padding_mistakes(mistake: str, wrong: Any, words: tuple[str, ...]) -> None:
    assert_fails(check_key_padding_mask(wrong, LENGTHS, S, T), *words)


def test_key_padding_numbers_instead_of_booleans() -> None:
    assert_fails(check_key_padding_mask(padding().astype(int), LENGTHS, S, T), "expected booleans", "pattern is right")
    assert_fails(check_key_padding_mask((~padding()).astype(int), LENGTHS, S, T), "dtype int", "inverted")
    assert_fails(check_key_padding_mask(np.where(padding(), -np.inf, 0.0), LENGTHS, S, T), "expected booleans")


def test_key_padding_other_shape_and_pattern() -> None:
    assert_fails(check_key_padding_mask(np.zeros((3, S), dtype=bool), LENGTHS, S, T), "expected shape (B, S)")
    assert_fails(check_key_padding_mask(np.zeros((B, S), dtype=bool), LENGTHS, S, T), "pattern")


@pytest.mark.parametrize("odd", ODD_ANSWERS, ids=[type(a).__name__ for a in ODD_ANSWERS])
def test_key_padding_never_raises_on_odd_answers(odd: Any) -> None:
    verdict = check_key_padding_mask(odd, LENGTHS, S, T)
    assert not verdict.ok and verdict.answered


def test_key_padding_bad_reference() -> None:
    with pytest.raises(ValueError, match=r"lengths must be a 1-D integer array"):
        check_key_padding_mask(padding(), np.array([7, 3]), S)
    with pytest.raises(ValueError, match=r"lengths must be a 1-D integer array"):
        check_key_padding_mask(padding(), np.array([6.0, 3.0]), S)


def test_key_padding_answer_blocks_the_padding_in_pytorch() -> None:
    """With the accepted mask, padded keys get zero weight in nn.MultiheadAttention."""
    mha = nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64)
    x = torch.randn(B, S, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    mask = torch.from_numpy(padding())
    assert check_key_padding_mask(mask, LENGTHS, S).ok
    with torch.no_grad():
        _, weights = mha(x, x, x, key_padding_mask=mask, average_attn_weights=False)
    assert torch.all(weights[1, :, :, 3:] == 0) and torch.allclose(weights.sum(-1), torch.ones(()).double())


# ---- the float (additive) mask -----------------------------------------------------------


def allowed_ts() -> NDArray[np.bool_]:
    return mha_numpy.causal_mask(T, S)


def test_float_mask_blank() -> None:
    assert_unanswered(check_float_mask(None, allowed_ts()), "replace None with", "float (T, S)", "added")


def test_float_mask_correct() -> None:
    allowed = allowed_ts()
    additive = np.zeros((T, S))
    additive[~allowed] = -np.inf
    assert_passes(check_float_mask(additive, allowed), "-inf")
    torch_allowed = torch.from_numpy(allowed)
    as_torch = torch.zeros(T, S).masked_fill(~torch_allowed, float("-inf"))
    assert check_float_mask(as_torch, torch_allowed).ok


def test_float_mask_large_finite_penalty_passes_with_the_caveat() -> None:
    allowed = allowed_ts()
    verdict = check_float_mask(np.where(allowed, 0.0, -1e9), allowed)
    assert_passes(verdict, "large finite penalty", "blocked everywhere", "in float64 it attends as if it had no mask",
                  "in float32", "plain mean of the values")
    assert check_float_mask(np.where(allowed, 0.0, np.finfo(np.float32).min), allowed).ok


FLOAT_MISTAKES: list[tuple[str, Callable[[NDArray[np.bool_]], Any], tuple[str, ...]]] = [
    ("ones and zeros", lambda a: a.astype(float), ("0s and 1s", "block nothing")),
    ("zeros and ones", lambda a: (~a).astype(float), ("0s and 1s",)),
    ("sign flipped", lambda a: np.where(a, 0.0, np.inf), ("sign is flipped", "+inf", "NaN")),
    ("inverted", lambda a: np.where(a, -np.inf, 0.0), ("inverted", "allowed")),
    ("small penalty", lambda a: np.where(a, 0.0, -10.0), ("penalty of -10", "keeps some weight")),
    ("transposed", lambda a: np.where(a, 0.0, -np.inf).T, ("transposed",)),
    ("boolean", lambda a: a, ("boolean mask", "floats")),
    ("boolean inverted", lambda a: ~a, ("boolean mask",)),
    ("(~allowed) * -inf", lambda a: torch.from_numpy(~a) * float("-inf"), ("0 * -inf is NaN", "NaN")),
    ("allowed * -inf", lambda a: torch.from_numpy(a) * float("-inf"), ("0 * -inf is NaN",)),
    ("anti-causal", lambda a: np.where(np.indices(a.shape)[1] >= np.indices(a.shape)[0] + S - T, 0.0, -np.inf),
     ("anti-causal", "blocks the past")),
]


@pytest.mark.parametrize("mistake, wrong, words", FLOAT_MISTAKES, ids=[m[0] for m in FLOAT_MISTAKES])
def test_float_mask_mistakes(mistake: str, wrong: Callable[[NDArray[np.bool_]], Any], words: tuple[str, ...]) -> None:
    allowed = allowed_ts()
    assert_fails(check_float_mask(wrong(allowed), allowed), *words)


def test_float_mask_other_shape_and_numbers() -> None:
    allowed = allowed_ts()
    assert_fails(check_float_mask(np.zeros((T, S + 1)), allowed), "expected shape (T, S)")
    assert_fails(check_float_mask(np.full((T, S), -np.inf), allowed), "do not keep the allowed scores")


@pytest.mark.parametrize("odd", ODD_ANSWERS, ids=[type(a).__name__ for a in ODD_ANSWERS])
def test_float_mask_never_raises_on_odd_answers(odd: Any) -> None:
    verdict = check_float_mask(odd, allowed_ts())
    assert not verdict.ok and verdict.answered


def test_float_mask_bad_reference() -> None:
    with pytest.raises(ValueError, match=r"allowed must have 2 axes"):
        check_float_mask(np.zeros((T, S)), np.ones(S, dtype=bool))


# ---- calling nn.MultiheadAttention like our causal layer ---------------------------------


@pytest.fixture
def mha() -> nn.MultiheadAttention:
    torch.manual_seed(0)
    return nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64)


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(B, T, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))


def blocked_upper(t: int) -> torch.Tensor:
    """True above the diagonal: the future, in nn.MultiheadAttention's convention (written independently)."""
    return torch.ones(t, t, dtype=torch.bool).triu(diagonal=1)


def right_call(mha: nn.MultiheadAttention, x: torch.Tensor) -> torch.Tensor:
    output: torch.Tensor = mha(x, x, x, attn_mask=blocked_upper(x.shape[1]))[0]
    return output


def test_causal_mha_blank(mha: nn.MultiheadAttention, x: torch.Tensor) -> None:
    def blank(mha: Any, x: Any) -> None:
        ...

    assert_unanswered(check_causal_mha(blank, mha, x), "write the body", "(B, T, D)")
    assert_unanswered(check_causal_mha(None, mha, x), "write")


def test_causal_mha_correct_and_equal_to_our_layer(mha: nn.MultiheadAttention, x: torch.Tensor) -> None:
    assert_passes(check_causal_mha(right_call, mha, x), "same output as our layer")
    fast = lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1]), need_weights=False)[0]  # noqa: E731
    assert check_causal_mha(fast, mha, x).ok
    hinted = lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1]), is_causal=True)[0]  # noqa: E731
    assert check_causal_mha(hinted, mha, x).ok
    # the checker's NumPy reference equals our PyTorch layer with the same weights
    wq, wk, wv = mha.in_proj_weight.detach().chunk(3)  # (D, D) each, (out, in)
    layer = mha_torch.MultiHead.from_weights(wq, wk, wv, mha.out_proj.weight.detach(), h)
    with torch.no_grad():
        assert torch.allclose(right_call(mha, x), layer(x, allowed=mha_torch.causal_mask(T))[0])


def test_causal_mha_with_biases(x: torch.Tensor) -> None:
    torch.manual_seed(1)
    biased = nn.MultiheadAttention(D, h, bias=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        biased.in_proj_bias.normal_()
        biased.out_proj.bias.normal_()
    assert check_causal_mha(right_call, biased, x).ok
    assert_fails(check_causal_mha(lambda m, x: m(x, x, x)[0], biased, x), "no mask")


CALL_MISTAKES: list[tuple[str, Callable[[Any, Any], Any], tuple[str, ...]]] = [
    ("no mask", lambda m, x: m(x, x, x)[0], ("no mask", "future")),
    ("inverted, NaN", lambda m, x: m(x, x, x, attn_mask=~blocked_upper(x.shape[1]))[0],
     ("inverted convention", "NaN")),
    ("inverted, zeros", lambda m, x: m(x, x, x, attn_mask=~blocked_upper(x.shape[1]), need_weights=False)[0],
     ("inverted convention", "zeros")),
    ("diagonal blocked", lambda m, x: m(x, x, x, attn_mask=~blocked_upper(x.shape[1]).T)[0],
     ("diagonal is blocked", "itself")),
    ("hint only", lambda m, x: m(x, x, x, is_causal=True)[0], ("raised RuntimeError", "only a hint")),
    ("tuple", lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1])), ("tuple of 2", "output (B, T, D) only")),
    ("weights", lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1]), average_attn_weights=False)[1],
     ("attention weights",)),
    ("averaged weights", lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1]))[1], ("attention weights",)),
    ("fixed length", lambda m, x: m(x, x, x, attn_mask=blocked_upper(T))[0],
     ("right for the lesson's x (B, T) = (2, 4) but not for (B, T) = (2, 3)", "from x itself")),
    ("fixed batch", lambda m, x: m(x[:2], x[:2], x[:2], attn_mask=blocked_upper(x.shape[1]))[0],
     ("but not for (B, T) = (3, 6)", "from x itself")),
    ("anti-causal", lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1]).T)[0],
     ("anti-causal", "blocks the past")),
    ("NumPy array", lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1]))[0].detach().numpy(),
     ("given a torch tensor and must return a torch tensor", "got NumPy array")),
    ("float32", lambda m, x: m(x, x, x, attn_mask=blocked_upper(x.shape[1]))[0].float(),
     ("given torch.float64 numbers and returned torch.float32",)),
]


@pytest.mark.parametrize("mistake, wrong, words", CALL_MISTAKES, ids=[m[0] for m in CALL_MISTAKES])
def test_causal_mha_mistakes(
    mha: nn.MultiheadAttention, x: torch.Tensor, mistake: str, wrong: Callable[[Any, Any], Any], words: tuple[str, ...]
) -> None:
    assert_fails(check_causal_mha(wrong, mha, x), *words)


def test_causal_mha_other_shapes_and_numbers(mha: nn.MultiheadAttention, x: torch.Tensor) -> None:
    assert_fails(check_causal_mha(lambda m, x: torch.zeros(B, D), mha, x), "expected shape (B, T, D)")
    assert_fails(check_causal_mha(lambda m, x: torch.zeros(B, x.shape[1], D), mha, x), "not our causal layer")
    nan = torch.full((B, T, D), float("nan"))
    assert_fails(check_causal_mha(lambda m, x: nan, mha, x), "NaN")


def test_causal_mha_raises_or_odd_things(mha: nn.MultiheadAttention, x: torch.Tensor) -> None:
    assert_fails(check_causal_mha("mha", mha, x), "expected a function")
    for odd in ODD_ANSWERS:
        verdict = check_causal_mha(lambda m, x, odd=odd: odd, mha, x)
        assert not verdict.ok and verdict.answered, verdict


def test_causal_mha_bad_reference(mha: nn.MultiheadAttention, x: torch.Tensor) -> None:
    with pytest.raises(TypeError, match=r"mha must be an nn.MultiheadAttention"):
        check_causal_mha(right_call, object(), x)
    with pytest.raises(ValueError, match=r"x must be \(B, T, D\) with D = 8"):
        check_causal_mha(right_call, mha, torch.zeros(B, T, D + 1, dtype=torch.float64))


# ---- the module --------------------------------------------------------------------------


def test_each_exercise_has_its_own_label(mha: nn.MultiheadAttention, x: torch.Tensor) -> None:
    labels = [
        check_mha_mask(None, allowed_ts()).question,
        check_key_padding_mask(None, LENGTHS, S).question,
        check_float_mask(None, allowed_ts()).question,
        check_causal_mha(None, mha, x).question,
    ]
    assert labels == ["nn.MultiheadAttention mask", "key padding mask", "float mask", "causal nn.MultiheadAttention"]


def test_lesson04_checks_do_not_import_torch() -> None:
    code = "import sys, lessons_lib.checks.matching_pytorch; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
