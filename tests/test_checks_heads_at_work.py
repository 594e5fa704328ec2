"""Lesson 09 Quick-check functions: a blank answer is "not answered yet", the right answer passes,
each recognised wrong answer gets its own message, and no "not yet" message gives the answer away."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib import induction
from lessons_lib.block_numpy import Block, layer_norm
from lessons_lib.checks import Verdict
from lessons_lib.checks.heads_at_work import (
    check_block_function,
    check_double_ablation,
    check_offset_function,
    check_repeat_loss_function,
    check_rms_norm_function,
)
from lessons_lib.induction import InductionConfig, InductionModel
from lessons_lib.mha_numpy import MultiHead, causal_mask

Floats = NDArray[np.floating[Any]]


def assert_not_yet(verdict: Verdict, phrase: str, label: str) -> None:
    assert not verdict.ok and verdict.answered, verdict
    assert phrase in verdict.message, (phrase, verdict)
    assert repr(verdict).startswith(f"[{label}] not yet: "), verdict


def assert_unanswered(verdict: Verdict, label: str) -> None:
    assert not verdict.ok and not verdict.answered, verdict
    assert repr(verdict).startswith(f"[{label}] not answered yet: "), verdict


def assert_distinct(verdicts: list[Verdict]) -> None:
    messages = [v.message for v in verdicts]
    assert len(set(messages)) == len(messages), messages


# ---- the block ---------------------------------------------------------------------------------
def _ln1(x: Floats, block: Block) -> Floats:
    return layer_norm(x, block.norm1_gain, block.norm1_bias)


def _ln2(x: Floats, block: Block) -> Floats:
    return layer_norm(x, block.norm2_gain, block.norm2_bias)


def _attn(z: Floats, block: Block, causal: bool = True) -> Floats:
    return block.attention(z, allowed=causal_mask(z.shape[1]) if causal else None)[0]


def right_block(x: Floats, block: Block) -> Floats:
    x = x + _attn(_ln1(x, block), block)
    return x + block.ffn(_ln2(x, block))


def post_norm(x: Floats, block: Block) -> Floats:
    x = _ln1(x + _attn(x, block), block)
    return _ln2(x + block.ffn(x), block)


def no_attention_residual(x: Floats, block: Block) -> Floats:
    a = _attn(_ln1(x, block), block)
    return a + block.ffn(_ln2(a, block))


def no_ffn_residual(x: Floats, block: Block) -> Floats:
    return block.ffn(_ln2(x + _attn(_ln1(x, block), block), block))


def parallel(x: Floats, block: Block) -> Floats:
    return x + _attn(_ln1(x, block), block) + block.ffn(_ln2(x, block))


def no_norms(x: Floats, block: Block) -> Floats:
    x = x + _attn(x, block)
    return x + block.ffn(x)


def not_causal(x: Floats, block: Block) -> Floats:
    x = x + _attn(_ln1(x, block), block, causal=False)
    return x + block.ffn(_ln2(x, block))


def norms_swapped(x: Floats, block: Block) -> Floats:
    x = x + _attn(_ln2(x, block), block)
    return x + block.ffn(_ln1(x, block))


def one_norm(x: Floats, block: Block) -> Floats:
    x = x + _attn(_ln1(x, block), block)
    return x + block.ffn(_ln1(x, block))


def inverted_mask(x: Floats, block: Block) -> Floats:
    x = x + block.attention(_ln1(x, block), allowed=~causal_mask(x.shape[1]))[0]
    return x + block.ffn(_ln2(x, block))


def anti_causal(x: Floats, block: Block) -> Floats:
    x = x + block.attention(_ln1(x, block), allowed=causal_mask(x.shape[1]).T)[0]
    return x + block.ffn(_ln2(x, block))


def tuple_not_unpacked(x: Floats, block: Block) -> Floats:
    x = x + block.attention(_ln1(x, block), allowed=causal_mask(x.shape[1]))
    return x + block.ffn(_ln2(x, block))


def notebook_length(x: Floats, block: Block) -> Floats:
    x = x + block.attention(_ln1(x, block), allowed=causal_mask(5))[0]  # the notebook's T = 5
    return x + block.ffn(_ln2(x, block))


def first_sizes_only(x: Floats, block: Block) -> Floats:
    return right_block(x, block) if x.shape[-1] == 12 else x


def test_block_blank_and_right() -> None:
    def blank(x: Floats, block: Block) -> Any: ...

    assert_unanswered(check_block_function(blank), "block")
    assert check_block_function(right_block).ok
    assert check_block_function(lambda x, block: block(x)[0]).message.startswith("you called the finished block")


BLOCK_MISTAKES: list[tuple[Callable[[Floats, Block], Any], str]] = [
    (post_norm, "post-norm"),
    (no_attention_residual, "heads' output replaced the stream"),
    (no_ffn_residual, "feed-forward output replaced the stream"),
    (parallel, "'parallel' block"),
    (no_norms, "no LayerNorm"),
    (not_causal, "not causal"),
    (norms_swapped, "swapped them"),
    (one_norm, "both sub-layers used LayerNorm 1"),
    (inverted_mask, "your mask is inverted"),
    (anti_causal, "upper triangle"),
    (tuple_not_unpacked, "returns a pair (output, weights): unpack it"),
    (notebook_length, "build it from x.shape[1]"),
    (first_sizes_only, "right for the first sizes, not with others"),
    (lambda x, block: right_block(x.astype(np.float32), block).astype(np.float32), "returned float32"),
    (lambda x, block: (right_block(x, block), None), "return only the stream"),
    (lambda x, block: right_block(x, block)[:, :-1], "keeps the stream's shape"),
    (lambda x, block: 2 * x, "not the pre-norm block"),
]


@pytest.mark.parametrize(("function", "phrase"), BLOCK_MISTAKES, ids=[p for _, p in BLOCK_MISTAKES])
def test_block_mistakes(function: Callable[[Floats, Block], Any], phrase: str) -> None:
    assert_not_yet(check_block_function(function), phrase, "block")


def test_block_mistakes_are_told_apart() -> None:
    assert_distinct([check_block_function(f) for f, _ in BLOCK_MISTAKES])


def test_block_reports_a_raising_function() -> None:
    def broken(x: Floats, block: Block) -> Any:
        return block.nowhere(x)  # type: ignore[attr-defined]

    verdict = check_block_function(broken)
    assert_not_yet(verdict, "AttributeError", "block")


# ---- partial RMSNorm (pRMSNorm) ----------------------------------------------------------------
def right_rms(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Floats:
    k = math.ceil(p * z.shape[-1])
    out: Floats = z / np.sqrt((z[..., :k] ** 2).mean(axis=-1, keepdims=True) + eps) * gain
    return out


def _head(z: Floats, p: float) -> Floats:
    return z[..., : math.ceil(p * z.shape[-1])]


RmsFunction = Callable[..., Any]
RMS_MISTAKES: list[tuple[RmsFunction, str]] = [
    (lambda z, g, p, eps=1e-5: z / np.sqrt((z**2).mean(axis=-1, keepdims=True) + eps) * g, "plain RMSNorm"),
    (lambda z, g, p, eps=1e-5: right_rms(z, g, math.floor(p * z.shape[-1]) / z.shape[-1], eps), "floor(p * width)"),
    (lambda z, g, p, eps=1e-5: layer_norm(z, g), "you computed LayerNorm"),
    (lambda z, g, p, eps=1e-5: z / ((_head(z, p) ** 2).mean(axis=-1, keepdims=True) + eps) * g,
     "take its square root"),
    (lambda z, g, p, eps=1e-5: z / np.sqrt((_head(z, p) ** 2).sum(axis=-1, keepdims=True) + eps) * g,
     "you summed the k squares"),
    (lambda z, g, p, eps=1e-5: z / np.sqrt((_head(z, p) ** 2).mean() + eps) * g, "one mean over the whole array"),
    (lambda z, g, p, eps=1e-5: z / np.sqrt((_head(z, p) ** 2).mean(axis=-1) + eps) * g, "keepdims=True"),
    (lambda z, g, p, eps=1e-5: right_rms(z, g, p, eps).astype(np.float64), "returned float64"),
    (lambda z, g, p, eps=1e-5: right_rms(z, np.ones_like(g), p, eps), "gain is missing"),
    (lambda z, g, p, eps=1e-5: right_rms(z, np.ones_like(g), p, eps) + g, "you added the gain"),
    (lambda z, g, p, eps=1e-5: z / np.sqrt(_head(z, p).var(axis=-1, keepdims=True) + eps) * g, "standard deviation"),
    (lambda z, g, p, eps=1e-5: right_rms(z, g, p, eps)[..., :3], "keeps z's shape"),
    (lambda z, g, p, eps=1e-5: z / np.sqrt((z[: math.ceil(p * z.shape[-1])] ** 2).mean(axis=-1, keepdims=True)
                                           + eps) * g, "slice the last axis, the features: z[..., :k]"),
    (lambda z, g, p, eps=1e-5: z / np.sqrt((z[..., : np.ceil(p * z.shape[-1])] ** 2).mean(axis=-1, keepdims=True)
                                           + eps) * g, "k must be an int"),
    (lambda z, g, p, eps=1e-5: z, "right shape, wrong numbers"),
]


def test_rms_blank_and_right() -> None:
    def blank(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Any: ...

    assert_unanswered(check_rms_norm_function(blank), "RMSNorm")
    assert check_rms_norm_function(right_rms).ok
    float32 = check_rms_norm_function(
        lambda z, g, p, eps=1e-5: right_rms(z.astype(np.float32), g.astype(np.float32), p, eps))
    assert_not_yet(float32, "was given float64 numbers and returned float32", "RMSNorm")


@pytest.mark.parametrize(("function", "phrase"), RMS_MISTAKES, ids=[p for _, p in RMS_MISTAKES])
def test_rms_mistakes(function: RmsFunction, phrase: str) -> None:
    assert_not_yet(check_rms_norm_function(function), phrase, "RMSNorm")


def test_rms_mistakes_are_told_apart() -> None:
    assert_distinct([check_rms_norm_function(f) for f, _ in RMS_MISTAKES])


# ---- the repeated half's loss from the logits ------------------------------------------------------
def right_repeat_loss(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[:, half:, 0].mean())


def _repeat_losses(logits: Floats, tokens: Any, normalise_axis: int = -1) -> Floats:
    """``-ln p(token t + 1)`` at every position, the softmax's sum taken over ``normalise_axis``."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=normalise_axis, keepdims=True))
    losses: Floats = -np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]
    return losses


def test_repeat_loss_blank_right_and_borrowed() -> None:
    def blank(logits: Floats, tokens: Any) -> Any: ...

    assert_unanswered(check_repeat_loss_function(blank), "repeated-half loss")
    assert check_repeat_loss_function(right_repeat_loss).ok
    borrowed = check_repeat_loss_function(lambda logits, tokens: induction.loss_per_position(MODEL, tokens))
    assert_not_yet(borrowed, "calls the library's loss_per_position", "repeated-half loss")


def test_repeat_loss_matches_the_library_on_a_model() -> None:
    tokens = induction.repeated_tokens(8, 7, 3, seed=3)
    logits, _ = induction.run(MODEL, tokens[:, :-1], ablate=PAIRS)
    library = induction.loss_per_position(MODEL, tokens, ablate=PAIRS)[3:].mean()
    assert np.isclose(right_repeat_loss(logits, tokens), library)


REPEAT_MISTAKES: list[tuple[Callable[[Floats, Any], Any], str]] = [
    (lambda logits, tokens: right_repeat_loss(logits, np.concatenate([tokens[:, :1], tokens], axis=1)[:, :-1]),
     "the token at position t itself"),
    (lambda logits, tokens: -right_repeat_loss(logits, tokens), "the sign"),
    (lambda logits, tokens: 2 * right_repeat_loss(logits, tokens), "is not it"),
    (lambda logits, tokens: float(_repeat_losses(logits, tokens)[:, logits.shape[1] // 2 : logits.shape[1] - 2].mean()),
     "logits.shape[1] // 2 is (2L - 1) // 2 = L - 1"),
    (lambda logits, tokens: float(_repeat_losses(logits, tokens, normalise_axis=1)[:, tokens.shape[1] // 2 :].mean()),
     "normaliser sums over the positions"),
    (lambda logits, tokens: np.full(3, right_repeat_loss(logits, tokens)), "expected one number"),
]


@pytest.mark.parametrize(("function", "phrase"), REPEAT_MISTAKES, ids=[p for _, p in REPEAT_MISTAKES])
def test_repeat_loss_mistakes(function: Callable[[Floats, Any], Any], phrase: str) -> None:
    assert_not_yet(check_repeat_loss_function(function), phrase, "repeated-half loss")


# ---- double ablation ---------------------------------------------------------------------------
def tiny_model() -> InductionModel:
    config = InductionConfig(vocab=7, half=3, width=8, heads=2, shortest=2)
    rng = np.random.default_rng(0)
    layers = tuple(MultiHead(8, 2, seed=i) for i in range(2))
    return InductionModel(config, rng.normal(size=(7, 8)), rng.normal(size=(5, 8)), layers, rng.normal(size=(8, 7)))


MODEL = tiny_model()
TOKENS = induction.repeated_tokens(16, 7, 3, seed=2)
PAIRS = [(1, 0), (1, 1)]


def _repeated(loss: Floats) -> float:
    return float(loss[3:].mean())


def test_double_ablation_blank_and_right() -> None:
    assert_unanswered(check_double_ablation(None, MODEL, TOKENS, PAIRS), "double ablation")
    right = _repeated(induction.loss_per_position(MODEL, TOKENS, ablate=PAIRS))
    assert check_double_ablation(right, MODEL, TOKENS, PAIRS).ok
    assert check_double_ablation(np.float32(right), MODEL, TOKENS, PAIRS).ok
    assert check_double_ablation(round(right, 2), MODEL, TOKENS, PAIRS).ok  # rounded as the lesson prints it
    close = check_double_ablation(right + 0.008, MODEL, TOKENS, PAIRS)
    assert_not_yet(close, "more than rounding to 2 decimals explains", "double ablation")
    # 0.02 off is no rounding: the checker does not call it one (review 3, finding 13)
    assert "rounding" not in check_double_ablation(right + 0.02, MODEL, TOKENS, PAIRS).message
    short = _repeated(induction.loss_per_position(MODEL, TOKENS[:, :-1], ablate=PAIRS))
    assert_not_yet(check_double_ablation(short, MODEL, TOKENS, PAIRS), "you passed tokens[:, :-1]", "double ablation")
    with pytest.raises(ValueError, match="at least two"):
        check_double_ablation(right, MODEL, TOKENS, [(1, 0)])


def test_double_ablation_mistakes_and_no_answer_given_away() -> None:
    loss = induction.loss_per_position
    both = loss(MODEL, TOKENS, ablate=PAIRS)
    singles = [_repeated(loss(MODEL, TOKENS, ablate=[pair])) for pair in PAIRS]
    right = f"{_repeated(both):.3f}"
    cases = [
        (singles[0], "only layer 1, head 0 zeroed"),
        (singles[1], "only layer 1, head 1 zeroed"),
        (sum(singles), "added the single-head losses"),
        (_repeated(loss(MODEL, TOKENS)), "no head zeroed"),
        (float(both[:3].mean()), "that is the first half"),
        (float(both.mean()), "mean over every position"),
        (_repeated(loss(MODEL, TOKENS, ablate=[(0, 0), (0, 1)])), "of layer 0; the heads asked for are in layer 1"),
        (float(both[2:].mean()), "you started at position L - 1"),
        (float(both[3:].sum()), "summed the losses over the positions"),
        (float(np.log(7)), "that is ln V"),
        (123.0, "is not it"),
    ]
    verdicts = [check_double_ablation(value, MODEL, TOKENS, PAIRS) for value, _ in cases]
    for verdict, (_, phrase) in zip(verdicts, cases, strict=True):
        assert_not_yet(verdict, phrase, "double ablation")
        assert not re.search(rf"(?<![\d.]){re.escape(right)}(?![\d.])", verdict.message), verdict
    assert_distinct(verdicts)


# ----- the offset score (Your turn 2, in section 3) ------------------------------------------------------
def right_offset(weights: Floats, offset: int, queries: Any) -> Floats:
    out: Floats = weights[..., queries, queries - offset].mean(axis=(0, 2))
    return out


OFFSET_MISTAKES: list[tuple[Callable[[Floats, int, Any], Any], str]] = [
    (lambda w, o, q: w[..., q - o, q].mean(axis=(0, 2)), "every score is 0"),
    (lambda w, o, q: w[..., q, q - o + 1].mean(axis=(0, 2)), "one position too late"),
    (lambda w, o, q: w[..., q, q - o - 1].mean(axis=(0, 2)), "one position too early"),
    (lambda w, o, q: right_offset(w, o, np.arange(o, w.shape[-1])), "score only the query positions given"),
    (lambda w, o, q: w[..., q, :][..., q - o].mean(axis=(0, 2, 3)), "paired every query with every key"),
    (lambda w, o, q: w[0][:, q, q - o].mean(axis=-1), "the first sequence only"),
    (lambda w, o, q: w[..., q, q - o].sum(axis=(0, 2)), "you summed"),
    (lambda w, o, q: w[..., q, q - o].mean(axis=2), "average over the batch as well"),
    (lambda w, o, q: w[..., q, q - o].mean(axis=(0, 1)), "averaged the heads away"),
]


def test_offset_blank_right_and_borrowed() -> None:
    def blank(weights: Floats, offset: int, queries: Any) -> Any: ...

    assert_unanswered(check_offset_function(blank), "offset score")
    assert check_offset_function(right_offset).ok
    borrowed = check_offset_function(lambda w, o, q: induction.offset_score(w, o, q))
    assert_not_yet(borrowed, "calls the library's offset_score", "offset score")


@pytest.mark.parametrize(("function", "phrase"), OFFSET_MISTAKES)
def test_offset_mistakes(function: Callable[[Floats, int, Any], Any], phrase: str) -> None:
    assert_not_yet(check_offset_function(function), phrase, "offset score")


def test_offset_mistakes_are_told_apart() -> None:
    assert_distinct([check_offset_function(f) for f, _ in OFFSET_MISTAKES])


def test_offset_score_library_function() -> None:
    rng = np.random.default_rng(1)
    weights = rng.random((2, 3, 8, 8))
    q = np.arange(4, 8)
    np.testing.assert_allclose(induction.offset_score(weights, 3, q), induction.induction_score(weights, 4))
    every = np.arange(1, 8)
    np.testing.assert_allclose(induction.offset_score(weights, 1, every), induction.previous_token_score(weights))
    with pytest.raises(ValueError, match=r"queries must lie in offset \.\. T-1 = 3 \.\. 7, got 2 \.\. 7"):
        induction.offset_score(weights, 3, np.arange(2, 8))
    with pytest.raises(TypeError, match="queries must be a non-empty 1-D array of integer positions"):
        induction.offset_score(weights, 1, [1.5, 2.5])
    with pytest.raises(ValueError, match="offset"):
        induction.offset_score(weights, 8, q)
