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
    BLOCKING_MARGIN,
    check_cached_causal_mha,
    check_float_mask,
    check_key_padding_function,
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
    # one policy for the lesson's boolean questions: a right additive mask is named and refused
    assert_fails(check_mha_mask(np.where(allowed, 0.0, -np.inf), allowed), "asks for a boolean mask", "float additive")
    assert_fails(check_mha_mask(np.where(allowed, 0.0, -1e4), allowed), "asks for a boolean mask")
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


def judged(mask: Any) -> Verdict:
    """The verdict on a key padding function that returns ``mask`` whatever it is given (the lesson's
    lengths are tried first, so the verdict is the one on ``mask`` for them)."""
    return check_key_padding_function(lambda lengths, size: mask, LENGTHS, S, T)


@pytest.mark.parametrize("mistake, wrong, words", KEY_PADDING_MISTAKES, ids=[m[0] for m in KEY_PADDING_MISTAKES])
def test_key_padding_mistakes(mistake: str, wrong: Any, words: tuple[str, ...]) -> None:
    assert_fails(judged(wrong), *words)


def test_key_padding_numbers_instead_of_booleans() -> None:
    assert_fails(judged(padding().astype(int)), "expected booleans", "pattern is right")
    assert_fails(judged((~padding()).astype(int)), "dtype int", "inverted")
    assert_fails(judged(np.where(padding(), -np.inf, 0.0)), "expected booleans")


def test_key_padding_other_shape_and_pattern() -> None:
    assert_fails(judged(np.zeros((3, S), dtype=bool)), "expected shape (B, S)")
    assert_fails(judged(np.zeros((B, S), dtype=bool)), "row 1 marks no padding at all")
    assert_fails(judged(np.eye(B, S, dtype=bool)), "wrong pattern")


def _padding_function(lengths: Any, size: int) -> Any:
    return torch.arange(size)[None, :] >= lengths[:, None]


def test_key_padding_function_right_blank_and_typed_by_hand() -> None:
    lengths = torch.tensor([6, 3])
    assert_passes(check_key_padding_function(_padding_function, lengths, S, T), "True at each sequence's padding")
    assert_passes(check_key_padding_function(lambda n, size: np.arange(size)[None, :] >= n[:, None], LENGTHS, S, T))

    def blank(lengths: Any, size: int) -> Any:
        """Nothing written yet."""
        ...

    assert_unanswered(check_key_padding_function(blank, lengths, S, T), "write the body", "True = padding")
    typed = torch.from_numpy(padding())
    assert_fails(check_key_padding_function(lambda n, size: typed, lengths, S, T),
                 "right for the lesson's lengths [6, 3] and S = 6", "serves any batch")
    assert_fails(check_key_padding_function(lambda n, size: torch.arange(S)[None, :] >= n[:, None], lengths, S, T),
                 "S = 7", "expected shape (B, S) = (3, 7)")
    assert_fails(check_key_padding_function(lambda n, size: torch.arange(size)[None, :] < n[:, None], lengths, S, T),
                 "inverted convention")
    assert_fails(check_key_padding_function(lambda n, size: _padding_function(n, size).numpy(), lengths, S, T),
                 "NumPy array")
    assert_fails(check_key_padding_function(lambda n, size: _padding_function(n, size).double(), lengths, S, T),
                 "expected booleans")
    assert_fails(check_key_padding_function(lambda n, size: 1 / 0, lengths, S, T), "raised ZeroDivisionError")
    assert_fails(check_key_padding_function(_padding_function(lengths, S), lengths, S, T), "expected a function")


def test_key_padding_answer_blocks_the_padding_in_pytorch() -> None:
    """With the accepted mask, padded keys get zero weight in nn.MultiheadAttention."""
    mha = nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64)
    x = torch.randn(B, S, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    lengths = torch.from_numpy(LENGTHS)
    assert check_key_padding_function(_padding_function, lengths, S).ok
    mask = _padding_function(lengths, S)
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


def test_float_mask_large_finite_penalty_passes_saying_only_that_it_blocks() -> None:
    """What a row blocked everywhere becomes is the lesson's Predict after Your turn 3: not the checker's to tell."""
    allowed = allowed_ts()
    for mask in (np.where(allowed, 0.0, -1e9), torch.where(torch.from_numpy(allowed), 0.0, -1e9),
                 np.where(allowed, 0.0, -1e20)):
        verdict = check_float_mask(mask, allowed)
        assert_passes(verdict, "blocks these keys", "exactly 0")
        for answer in ("blocked everywhere", "mean", "no mask", "float16", "apart"):
            assert answer not in verdict.message


PENALTIES_THAT_BLOCK = [
    (-1e4, torch.float32),  # BERT's classic -10000.0
    (-1e4, torch.float64),
    (-1e4, torch.float16),
    (torch.finfo(torch.float16).min, torch.float16),  # what Hugging Face uses for float16 masks
    (torch.finfo(torch.float16).min, torch.float32),
    (torch.finfo(torch.float32).min, torch.float32),
    (-1e3, torch.float32),
]


@pytest.mark.parametrize("penalty, dtype", PENALTIES_THAT_BLOCK, ids=[f"{p:g}-{d}" for p, d in PENALTIES_THAT_BLOCK])
def test_a_penalty_whose_exp_is_zero_is_accepted_and_really_blocks(penalty: float, dtype: torch.dtype) -> None:
    """Judged by its effect: SDPA with the penalty equals SDPA with -inf, bit for bit, in that dtype."""
    allowed = torch.from_numpy(allowed_ts())
    mask = torch.zeros(T, S, dtype=dtype).masked_fill(~allowed, penalty)
    assert_passes(check_float_mask(mask, allowed), "blocks these keys", "exactly 0")
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(B, h, n, D // h, generator=generator).mul(3).to(dtype) for n in (T, S, S))
    with_inf = torch.zeros(T, S, dtype=dtype).masked_fill(~allowed, float("-inf"))
    torch_sdpa: Any = torch.nn.functional.scaled_dot_product_attention
    assert torch.equal(torch_sdpa(q, k, v, attn_mask=mask), torch_sdpa(q, k, v, attn_mask=with_inf))


def test_minus_1e9_in_float16_is_minus_inf() -> None:
    allowed = torch.from_numpy(allowed_ts())
    mask = torch.where(allowed, 0.0, -1e9).half()
    assert torch.isneginf(mask[~allowed]).all()
    assert_passes(check_float_mask(mask, allowed), "-inf")


def test_a_penalty_that_keeps_weight_is_refused_with_the_weight_it_keeps() -> None:
    allowed = torch.from_numpy(allowed_ts())
    for dtype in (torch.float32, torch.float64):  # exp(-100) = 3.7e-44 is a (tiny) float32 and float64 number
        verdict = check_float_mask(torch.zeros(T, S, dtype=dtype).masked_fill(~allowed, -100.0), allowed)
        assert_fails(verdict, "penalty of -100", "keeps some weight", "4e-44")
        weights = torch.softmax(torch.zeros(S, dtype=dtype) + torch.where(allowed[0], 0.0, -100.0).to(dtype), -1)
        assert (weights[~allowed[0]] > 0).all()  # what the message says: the blocked keys keep some weight
    margin = check_float_mask(torch.zeros(T, S).masked_fill(~allowed, -110.0), allowed)  # exp(-110) is 0 in float32
    assert_fails(margin, "blocks only while the scores are close", f"scores {BLOCKING_MARGIN:g} above")


def test_a_numpy_mask_is_refused_when_the_lesson_holds_tensors() -> None:
    allowed = mha_torch.causal_mask(T, S)
    numpy_blocked = (~allowed).numpy()
    assert_fails(check_mha_mask(numpy_blocked, allowed), "pattern is right", "NumPy array", "TypeError")
    assert check_mha_mask(numpy_blocked, allowed.numpy()).ok  # a NumPy lesson may answer in NumPy
    float_answer = np.where(allowed.numpy(), 0.0, -np.inf)
    assert_fails(check_float_mask(float_answer, allowed), "NumPy array", "scaled_dot_product_attention")
    with pytest.raises(TypeError, match="must be Tensor"):  # what the message says PyTorch does
        nn.MultiheadAttention(D, h, batch_first=True)(*(torch.zeros(B, T, D),) * 3, attn_mask=np.zeros((T, T), bool))


def test_a_square_mask_for_a_rectangular_question_is_named() -> None:
    allowed = allowed_ts()
    square = nn.Transformer.generate_square_subsequent_mask(T)  # (T, T) float, 0 / -inf
    assert_fails(check_float_mask(square, allowed), "square (T, T) = (4, 4)", "(T, S) = (4, 6)")
    assert_fails(check_mha_mask(square.isinf(), allowed), "square (T, T) = (4, 4)")


# ---- the combined float mask (B, 1, T, S) for SDPA: causal and padding ----------------------

PAD_LENGTHS = torch.tensor([5, 2])


def combined(lengths: Any = PAD_LENGTHS) -> torch.Tensor:
    """The right (B, 1, T, S) boolean pattern, written independently of the checker."""
    allowed = allowed_ts()
    rows = [[[[bool(allowed[t, s]) and s < n for s in range(S)] for t in range(T)]] for n in lengths.tolist()]
    return torch.tensor(rows)


def as_float(pattern: torch.Tensor, fill: float = float("-inf")) -> torch.Tensor:
    return torch.zeros(pattern.shape, dtype=torch.float64).masked_fill(~pattern, fill)


def test_combined_float_mask_blank_and_right() -> None:
    allowed = torch.from_numpy(allowed_ts())
    assert_unanswered(check_float_mask(None, allowed, PAD_LENGTHS), "(B, 1, T, S)")
    assert_passes(check_float_mask(as_float(combined()), allowed, PAD_LENGTHS), "broadcasts over the heads")
    assert check_float_mask(as_float(combined(), -1e4), allowed, PAD_LENGTHS).ok


def test_combined_float_mask_equals_nn_multihead_attention_with_both_masks() -> None:
    """What the exercise claims: SDPA with the accepted mask is the layer with attn_mask and key_padding_mask."""
    layer = mha_torch.MultiHead(D, h, seed=0, dtype=torch.float64)
    generator = torch.Generator().manual_seed(4)
    x, context = torch.randn(B, T, D, generator=generator).double(), torch.randn(B, S, D, generator=generator).double()
    allowed = torch.from_numpy(allowed_ts())
    padding_mask = torch.arange(S)[None, :] >= PAD_LENGTHS[:, None]
    with torch.no_grad():
        ours, _ = layer(x, context, allowed=allowed & ~padding_mask[:, None, None, :])
        q = mha_torch.split_heads(layer.wq(x), h)
        k, v = (mha_torch.split_heads(proj(context), h) for proj in (layer.wk, layer.wv))
        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=as_float(combined()))
        assert torch.allclose(layer.wo(mha_torch.merge_heads(heads)), ours)


def _not_real() -> torch.Tensor:
    return torch.arange(S)[None, :] >= PAD_LENGTHS[:, None]  # (B, S), True = padding


COMBINED_MISTAKES: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
    ("causal only", lambda: as_float(torch.from_numpy(allowed_ts()).expand(B, 1, T, S)), ("only the causal part",)),
    ("causal only, (T, S)", lambda: as_float(torch.from_numpy(allowed_ts())), ("holds no padding",)),
    ("padding only", lambda: as_float(~_not_real()[:, None, None, :]), ("only the padding part",)),
    ("padding only, expanded", lambda: as_float((~_not_real())[:, None, None, :].expand(B, 1, T, S)),
     ("only the padding part",)),
    ("(B, T, S)", lambda: as_float(combined()[:, 0]), ("shape (B, T, S) = (2, 4, 6)", "heads axis")),
    ("padding inverted", lambda: as_float(torch.from_numpy(allowed_ts()) & _not_real()[:, None, None, :]),
     ("padding part is inverted",)),
    ("causal inverted", lambda: as_float(~torch.from_numpy(allowed_ts()) & ~_not_real()[:, None, None, :]),
     ("causal part is inverted",)),
    ("padding off by one", lambda: as_float(combined(PAD_LENGTHS + 1)), ("off by one", "first padding position")),
    ("(~may) * -inf", lambda: (~combined()).double() * float("-inf"), ("0 * -inf is NaN",)),
    ("0/1", lambda: combined().double(), ("0s and 1s",)),
    ("(B, 2, T, S)", lambda: as_float(combined().expand(B, 2, T, S)), ("second axis must have size 1",)),
    ("inverted", lambda: torch.zeros(B, 1, T, S, dtype=torch.float64).masked_fill(combined(), float("-inf")),
     ("inverted", "-inf where it is allowed")),
    ("(1, B, T, S)", lambda: as_float(combined().transpose(0, 1)), ("batch and heads axes are swapped",)),
    ("(1, B, T, S), zeros", lambda: torch.zeros(1, B, T, S), ("batch and heads axes are swapped",)),
    ("a boolean", lambda: combined(), ("boolean mask",)),
]


@pytest.mark.parametrize("mistake, wrong, words", COMBINED_MISTAKES, ids=[m[0] for m in COMBINED_MISTAKES])
def test_combined_float_mask_mistakes(mistake: str, wrong: Callable[[], Any], words: tuple[str, ...]) -> None:
    assert_fails(check_float_mask(wrong(), torch.from_numpy(allowed_ts()), PAD_LENGTHS), *words)


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
    assert_fails(check_float_mask(np.where(allowed, 0.0, 2.0), allowed), "positive numbers", "block")


@pytest.mark.parametrize("odd", ODD_ANSWERS, ids=[type(a).__name__ for a in ODD_ANSWERS])
def test_float_mask_never_raises_on_odd_answers(odd: Any) -> None:
    verdict = check_float_mask(odd, allowed_ts())
    assert not verdict.ok and verdict.answered


def test_float_mask_bad_reference() -> None:
    with pytest.raises(ValueError, match=r"allowed must have 2 axes"):
        check_float_mask(np.zeros((T, S)), np.ones(S, dtype=bool))


# ---- nn.MultiheadAttention called like our causal layer, after a cache -------------------


@pytest.fixture
def mha() -> nn.MultiheadAttention:
    torch.manual_seed(0)
    return nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64)


# ---- the module --------------------------------------------------------------------------


def test_each_exercise_has_its_own_label(mha: nn.MultiheadAttention) -> None:
    labels = [
        check_mha_mask(None, allowed_ts()).question,
        check_key_padding_function(None, LENGTHS, S).question,
        check_float_mask(None, allowed_ts()).question,
        check_cached_causal_mha(None, mha, *past_and_new()).question,
    ]
    assert labels == ["nn.MultiheadAttention mask", "key padding mask", "float mask",
                      "cached causal nn.MultiheadAttention"]


def test_lesson04_checks_do_not_import_torch() -> None:
    code = "import sys, lessons_lib.checks.matching_pytorch; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# ---- T new tokens after S - T cached ones ------------------------------------------------


def past_and_new() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    everything = torch.randn(B, S, D, dtype=torch.float64, generator=generator)
    return everything[:, : S - T], everything[:, S - T :]


def decode_right(m: Any, past: Any, new: Any) -> Any:
    keys = torch.cat([past, new], dim=1)
    n, s = new.shape[1], keys.shape[1]
    blocked = torch.ones(n, s, dtype=torch.bool).triu(diagonal=s - n + 1)  # the future of each new token
    return m(new, keys, keys, attn_mask=blocked)[0]


def decode_full_then_slice(m: Any, past: Any, new: Any) -> Any:
    keys = torch.cat([past, new], dim=1)
    s = keys.shape[1]
    return m(keys, keys, keys, attn_mask=torch.ones(s, s, dtype=torch.bool).triu(1))[0][:, -new.shape[1] :]


def test_cached_blank_and_right(mha: nn.MultiheadAttention) -> None:
    past, new = past_and_new()

    def blank(m: Any, past: Any, new: Any) -> None:
        ...

    assert_unanswered(check_cached_causal_mha(blank, mha, past, new), "write the body")
    assert_passes(check_cached_causal_mha(decode_right, mha, past, new), "bottom-right (T, S)", "last T rows")
    assert check_cached_causal_mha(decode_full_then_slice, mha, past, new).ok


def test_cached_equals_the_last_rows_of_our_causal_layer(mha: nn.MultiheadAttention) -> None:
    past, new = past_and_new()
    wq, wk, wv = mha.in_proj_weight.detach().chunk(3)
    layer = mha_torch.MultiHead.from_weights(wq, wk, wv, mha.out_proj.weight.detach(), h)
    everything = torch.cat([past, new], dim=1)
    with torch.no_grad():
        full, _ = layer(everything, allowed=mha_torch.causal_mask(S))
        assert torch.allclose(decode_right(mha, past, new), full[:, -T:])


def _ones(n: int, s: int) -> torch.Tensor:
    return torch.ones(n, s, dtype=torch.bool)


CACHED_MISTAKES: list[tuple[str, Callable[[Any, Any, Any], Any], tuple[str, ...]]] = [
    ("no past", lambda m, p, x: m(x, x, x, attn_mask=_ones(x.shape[1], x.shape[1]).triu(1))[0], ("past is missing",)),
    ("no mask", lambda m, p, x: m(x, torch.cat([p, x], 1), torch.cat([p, x], 1))[0], ("no mask",)),
    ("top-left", lambda m, p, x: m(x, torch.cat([p, x], 1), torch.cat([p, x], 1),
                                   attn_mask=_ones(x.shape[1], p.shape[1] + x.shape[1]).triu(1))[0],
     ("top-left alignment",)),
    ("not inverted", lambda m, p, x: m(x, torch.cat([p, x], 1), torch.cat([p, x], 1),
                                       attn_mask=mha_torch.causal_mask(x.shape[1], p.shape[1] + x.shape[1]))[0],
     ("inverted convention",)),
    ("order swapped", lambda m, p, x: m(x, torch.cat([x, p], 1), torch.cat([x, p], 1),
                                        attn_mask=~mha_torch.causal_mask(x.shape[1], p.shape[1] + x.shape[1]))[0],
     ("order is swapped",)),
    ("all S rows", lambda m, p, x: m(torch.cat([p, x], 1), torch.cat([p, x], 1), torch.cat([p, x], 1),
                                     attn_mask=_ones(p.shape[1] + x.shape[1], p.shape[1] + x.shape[1]).triu(1))[0],
     ("all S positions",)),
    ("hint only", lambda m, p, x: m(x, torch.cat([p, x], 1), torch.cat([p, x], 1), is_causal=True)[0],
     ("only a hint",)),
    ("hint replaced the right mask", lambda m, p, x: m(
        x, torch.cat([p, x], 1), torch.cat([p, x], 1), need_weights=False, is_causal=True,
        attn_mask=~mha_torch.causal_mask(x.shape[1], p.shape[1] + x.shape[1]))[0],
     ("is_causal=True replaced your mask", "your mask itself is right", "SDPA path", "top-left")),
    ("hint replaced a top-left mask", lambda m, p, x: m(
        x, torch.cat([p, x], 1), torch.cat([p, x], 1), need_weights=False, is_causal=True,
        attn_mask=_ones(x.shape[1], p.shape[1] + x.shape[1]).triu(1))[0],
     ("is_causal=True replaced your mask: with need_weights=False",)),
    ("square mask", lambda m, p, x: m(x, torch.cat([p, x], 1), torch.cat([p, x], 1),
                                      attn_mask=_ones(x.shape[1], x.shape[1]).triu(1))[0],
     ("raised RuntimeError", "one row per new query")),
    ("sizes of the lesson", lambda m, p, x: m(x, torch.cat([p, x], 1), torch.cat([p, x], 1),
                                              attn_mask=~mha_torch.causal_mask(T, S))[0],
     ("right for the lesson's (B, S - T, T) = (2, 2, 4)", "take every size from past and new")),
    ("the tuple", lambda m, p, x: m(x, torch.cat([p, x], 1), torch.cat([p, x], 1),
                                    attn_mask=~mha_torch.causal_mask(x.shape[1], p.shape[1] + x.shape[1])),
     ("tuple of 2",)),
]


@pytest.mark.parametrize("mistake, wrong, words", CACHED_MISTAKES, ids=[m[0] for m in CACHED_MISTAKES])
def test_cached_mistakes(mha: nn.MultiheadAttention, mistake: str, wrong: Callable[[Any, Any, Any], Any],
                         words: tuple[str, ...]) -> None:
    past, new = past_and_new()
    assert_fails(check_cached_causal_mha(wrong, mha, past, new), *words)


def test_cached_a_function_that_ignores_its_layer(mha: nn.MultiheadAttention) -> None:
    past, new = past_and_new()
    notebook_layer = mha
    assert_fails(check_cached_causal_mha(lambda m, p, x: decode_right(notebook_layer, p, x), mha, past, new),
                 "does not use the layer it is given")


def test_cached_bad_reference(mha: nn.MultiheadAttention) -> None:
    past, new = past_and_new()
    with pytest.raises(ValueError, match=r"past must be \(B, S - T, D\) and new \(B, T, D\)"):
        check_cached_causal_mha(decode_right, mha, past[:1], new)
    with pytest.raises(TypeError, match=r"mha must be an nn.MultiheadAttention"):
        check_cached_causal_mha(decode_right, object(), past, new)
