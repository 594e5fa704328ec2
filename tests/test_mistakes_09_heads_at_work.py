"""Lesson 09's typical mistakes: each wrong answer a learner is likely to hand in to a Quick-check
exercise of "Heads at work", and the words its diagnosis must contain (format in `mistake_table`).

The answers to Your turn 4 are computed on the lesson's own model. The right answers use its whole
evaluation batch, so that the numbers are the ones a learner sees (4.10 nats, rounded as the lesson
prints it, is accepted); the mistakes use its first 64 sequences, which keeps the table quick (each
check runs the model several times) and diagnoses them just the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id
from numpy.typing import NDArray

from lessons_lib import induction
from lessons_lib.block_numpy import Block, layer_norm
from lessons_lib.checks import Verdict
from lessons_lib.checks.heads_at_work import (
    check_block_function,
    check_double_ablation,
    check_induction_function,
    check_offset_function,
    check_rms_norm_function,
)
from lessons_lib.mha_numpy import causal_mask

Floats = NDArray[np.floating[Any]]
BlockFunction = Callable[[Floats, Block], Any]


# ---- Your turn 1: the pre-norm block -------------------------------------------------------------
def _ln1(x: Floats, block: Block) -> Floats:
    return layer_norm(x, block.norm1_gain, block.norm1_bias)


def _ln2(x: Floats, block: Block) -> Floats:
    return layer_norm(x, block.norm2_gain, block.norm2_bias)


def _block(attend: Callable[[Floats, Block], Any], read_ffn: str = "after", norm2: bool = True) -> BlockFunction:
    """A block with the attention update ``attend(x, block)`` (what is added to x), then the
    feed-forward reading the stream ``"after"`` or ``"before"`` the attention update."""

    def function(x: Floats, block: Block) -> Any:
        x1 = x + attend(x, block)
        z = x1 if read_ffn == "after" else x
        return x1 + block.ffn(_ln2(z, block) if norm2 else _ln1(z, block))

    return function


def _attend(mask: Callable[[int], Any] | None = causal_mask, norm: Callable[[Floats, Block], Floats] = _ln1,
            unpack: bool = True) -> Callable[[Floats, Block], Any]:
    def attend(x: Floats, block: Block) -> Any:
        out = block.attention(norm(x, block), allowed=None if mask is None else mask(x.shape[1]))
        return out[0] if unpack else out

    return attend


right_block = _block(_attend())


def _post_norm(x: Floats, block: Block) -> Floats:
    x = _ln1(x + block.attention(x, allowed=causal_mask(x.shape[1]))[0], block)
    return _ln2(x + block.ffn(x), block)


def _no_attention_residual(x: Floats, block: Block) -> Floats:
    a = _attend()(x, block)
    return a + block.ffn(_ln2(a, block))  # type: ignore[no-any-return]


def _no_ffn_residual(x: Floats, block: Block) -> Floats:
    return block.ffn(_ln2(x + _attend()(x, block), block))


def _no_norms(x: Floats, block: Block) -> Floats:
    x = x + block.attention(x, allowed=causal_mask(x.shape[1]))[0]
    return x + block.ffn(x)


def _called_block(x: Floats, block: Block) -> Floats:
    return block(x)[0]


def _first_sizes_only(x: Floats, block: Block) -> Any:
    return right_block(x, block) if x.shape[-1] == 12 else x


def _ones_like_stream(x: Floats, block: Block) -> Floats:
    return 2 * x


BLOCK = "09 YT1 block"
BLOCK_ROWS: list[tuple[str, BlockFunction, str, bool]] = [
    ("an inverted mask (PyTorch's True = blocked)", _block(_attend(mask=lambda T: ~causal_mask(T))),
     "your mask is inverted", True),
    ("block.attention's pair not unpacked", _block(_attend(unpack=False)), "returns a pair (output, weights)", True),
    ("post-norm", _post_norm, "post-norm", True),
    ("no residual around the attention", _no_attention_residual, "heads' output replaced the stream", True),
    ("no residual around the feed-forward", _no_ffn_residual, "feed-forward output replaced the stream", True),
    ("the parallel block", _block(_attend(), read_ffn="before"), "'parallel' block", True),
    ("no LayerNorm", _no_norms, "no LayerNorm", True),
    ("no causal mask", _block(_attend(mask=None)), "not causal", True),
    ("an anti-causal mask (upper triangle)", _block(_attend(mask=lambda T: causal_mask(T).T)), "upper triangle", True),
    ("the two LayerNorms swapped", _block(_attend(norm=_ln2), norm2=False), "swapped them", True),
    ("LayerNorm 1 for both sub-layers", _block(_attend(), norm2=False), "both sub-layers used LayerNorm 1", True),
    ("the notebook's T = 5 in the mask", _block(_attend(mask=lambda T: causal_mask(5))), "build it from x.shape[1]",
     True),
    ("calls block(x)", _called_block, "you called the finished block", True),
    ("returns (stream, weights)", lambda x, block: (right_block(x, block), None), "return only the stream", True),
    ("right for one size only", _first_sizes_only, "right for the first sizes, not with others", True),
    ("converts to float32", lambda x, block: right_block(x.astype(np.float32), block).astype(np.float32),
     "returned float32", True),
    ("something else (2 x)", _ones_like_stream, "not the pre-norm block", False),
]


# ---- Your turn 3: RMSNorm ------------------------------------------------------------------------
def _rms(z: Floats, gain: Floats, square_mean: Callable[[Floats], Floats] | None = None, eps: float = 1e-5) -> Floats:
    ms = (z**2).mean(axis=-1, keepdims=True) if square_mean is None else square_mean(z)
    out: Floats = z / np.sqrt(ms + eps) * gain
    return out


def _right_rms(z: Floats, gain: Floats, eps: float = 1e-5) -> Floats:
    return _rms(z, gain, eps=eps)


def _eps_ignored(z: Floats, gain: Floats, eps: float = 1e-5) -> Floats:
    return _rms(z, gain)


def _no_eps(z: Floats, gain: Floats, eps: float = 1e-5) -> Floats:
    return _rms(z, gain, eps=0.0)


def _rms_by_sum(z: Floats, gain: Floats, eps: float = 1e-5) -> Floats:
    return _rms(z, gain, lambda z: (z**2).sum(axis=-1, keepdims=True) / z.shape[-1], eps)


def _eps_outside(z: Floats, gain: Floats, eps: float = 1e-5) -> Floats:
    out: Floats = z / (np.sqrt((z**2).mean(axis=-1, keepdims=True)) + eps) * gain
    return out


RMS = "09 YT3 RMSNorm"
RMS_ROWS: list[tuple[str, Callable[[Floats, Floats], Any], str, bool]] = [
    ("a sum of squares instead of their mean", lambda z, g: _rms(z, g, lambda z: (z**2).sum(axis=-1, keepdims=True)),
     "you summed the squares", True),
    ("LayerNorm (the mean subtracted)", lambda z, g: layer_norm(z, g), "that is LayerNorm", True),
    ("no square root", lambda z, g: z / ((z**2).mean(axis=-1, keepdims=True) + 1e-5) * g, "take its square root", True),
    ("the mean over axis 0", lambda z, g: _rms(z, g, lambda z: (z**2).mean(axis=0, keepdims=True)), "wrong axis", True),
    ("one mean over the whole array", lambda z, g: _rms(z, g, lambda z: (z**2).mean()), "one mean over the whole array",
     True),
    ("no gain", lambda z, g: _rms(z, np.ones_like(g)), "the gain is missing", True),
    ("the gain added", lambda z, g: _rms(z, np.ones_like(g)) + g, "you added the gain", True),
    ("divided by the standard deviation", lambda z, g: _rms(z, g, lambda z: z.var(axis=-1, keepdims=True)),
     "standard deviation", True),
    ("D = 6 hard-coded", lambda z, g: _rms(z, g, lambda z: (z**2).sum(axis=-1, keepdims=True) / 6),
     "you divided the sum of squares by 6, a fixed width", True),
    ("float64 returned for float32", lambda z, g: _rms(z.astype(np.float64), g.astype(np.float64)),
     "returned float64", True),
    ("one position dropped", lambda z, g: _rms(z, g)[..., :-1], "keeps z's shape", True),
    ("eps outside the square root", _eps_outside, "eps is outside the square root", True),
    ("eps argument ignored (1e-5 always)", _eps_ignored, "whatever the eps argument says", True),
    ("no eps at all", _no_eps, "eps is missing", True),
    ("z unchanged", lambda z, g: z, "not RMSNorm", False),
]


# ---- the induction score checker (kept, no longer an exercise) ------------------------------------------------------
def _pick(query_from: Callable[[int], int], key: Callable[[Any, int], Any], axes: Any = (0, 2),
          total: bool = False) -> Callable[[Floats, int], Any]:
    def score(weights: Floats, L: int) -> Any:
        t = np.arange(query_from(L), weights.shape[-1])
        picked = weights[..., t, key(t, L)]
        return picked.sum(axis=axes) if total else picked.mean(axis=axes)

    return score


def _right_induction(weights: Floats, L: int) -> Floats:
    t = np.arange(L, weights.shape[-1])
    out: Floats = weights[..., t, t - L + 1].mean(axis=(0, 2))
    return out


INDUCTION = "09 induction score (checker kept, no longer an exercise)"
INDUCTION_ROWS: list[tuple[str, Callable[[Floats, int], Any], str, bool]] = [
    ("calls induction.induction_score", lambda w, L: induction.induction_score(w, L),
     "calls the library's induction_score", True),
    ("the earlier copy itself (t - L)", _pick(lambda L: L, lambda t, L: t - L), "earlier copy of the token itself",
     True),
    ("the previous token (t - 1)", _pick(lambda L: L, lambda t, L: t - 1), "previous token (t - 1)", True),
    ("queries from L - 1", _pick(lambda L: L - 1, lambda t, L: t - L + 1), "start at t = L", True),
    ("a sum instead of a mean", _pick(lambda L: L, lambda t, L: t - L + 1, total=True), "you summed", True),
    ("the batch not averaged", _pick(lambda L: L, lambda t, L: t - L + 1, axes=2), "average over the batch as well",
     True),
    ("one score for all heads", _pick(lambda L: L, lambda t, L: t - L + 1, axes=None), "keep the head axis", True),
    ("the notebook's L = 12 hard-coded", lambda w, L: _right_induction(w, 5), "not with other sizes (T=7, L=3)", True),
    ("something else", lambda w, L: _right_induction(w, L) + 0.5, "not the induction score", False),
]


# ---- Your turn 2 (in section 3): the offset score ------------------------------------------------
def _offset(keys: Callable[[Any, int], Any] = lambda t, o: t - o, axes: Any = (0, 2), total: bool = False,
            queries: Callable[[Floats, int, Any], Any] | None = None) -> Callable[[Floats, int, Any], Any]:
    def score(weights: Floats, offset: int, given: Any) -> Any:
        t = given if queries is None else queries(weights, offset, given)
        picked = weights[..., t, keys(t, offset)]
        return picked.sum(axis=axes) if total else picked.mean(axis=axes)

    return score


def _right_offset(weights: Floats, offset: int, queries: Any) -> Floats:
    out: Floats = weights[..., queries, queries - offset].mean(axis=(0, 2))
    return out


def _offset_loop(weights: Floats, offset: int, queries: Any) -> Floats:
    total = np.zeros(weights.shape[1])
    for t in queries:
        total += weights[:, :, t, t - offset].mean(axis=0)
    out: Floats = total / len(queries)
    return out


def _block_not_diagonal(weights: Floats, offset: int, queries: Any) -> Any:
    return weights[..., queries, :][..., queries - offset].mean(axis=(0, 2, 3))


def _first_sequence(weights: Floats, offset: int, queries: Any) -> Any:
    return weights[0][:, queries, queries - offset].mean(axis=-1)


T = 10  # a notebook-like global `T` for the row below (the checker's first T, as a learner's notebook might hold)


def _reads_global_t(weights: Floats, offset: int, queries: Any) -> Any:
    t = np.arange(queries[0], T)
    return weights[..., t, t - offset].mean(axis=(0, 2))


OFFSET = "09 YT2 offset score"
OFFSET_ROWS: list[tuple[str, Callable[[Floats, int, Any], Any], str, bool]] = [
    ("calls induction.offset_score", lambda w, o, q: induction.offset_score(w, o, q),
     "calls the library's offset_score", True),
    ("query and key swapped", lambda w, o, q: w[..., q - o, q].mean(axis=(0, 2)), "every score is 0", True),
    ("a key after the query (t + offset)", _offset(keys=lambda t, o: np.minimum(t + o, t.max())),
     "right shape (", False),
    ("key one too late", _offset(keys=lambda t, o: t - o + 1), "one position too late", True),
    ("key one too early", _offset(keys=lambda t, o: t - o - 1), "one position too early", True),
    ("every query, not those given", _offset(queries=lambda w, o, q: np.arange(o, w.shape[-1])),
     "score only the query positions given", True),
    ("every query paired with every key", _block_not_diagonal, "paired every query with every key", True),
    ("the first sequence only", _first_sequence, "the first sequence only", True),
    ("a sum instead of a mean", _offset(total=True), "you summed", True),
    ("the batch not averaged", _offset(axes=2), "average over the batch as well", True),
    ("the heads averaged away", _offset(axes=(0, 1)), "averaged the heads away", True),
    ("one score for all heads", _offset(axes=None), "keep the head axis", True),
    ("the notebook's T read as a global", _reads_global_t, "reads the notebook's T", True),
]


# ---- Your turn 4: both induction heads zeroed ----------------------------------------------------
MODEL = induction.load_induction_model()
TOKENS = induction.repeated_tokens(256, MODEL.config.vocab, MODEL.config.half, seed=induction.EVAL_SEED)
PAIRS = [(1, 2), (1, 3)]  # the lesson's induction heads
L = MODEL.config.half


FEW = TOKENS[:64]


def _loss(ablate: list[tuple[int, int]], tokens: NDArray[np.int64] = FEW) -> Floats:
    return induction.loss_per_position(MODEL, tokens, ablate=ablate)


def _double(answer: Callable[[], Any], tokens: NDArray[np.int64] = FEW) -> Callable[[], Any]:
    return lambda: check_double_ablation(answer(), MODEL, tokens, PAIRS)


DOUBLE = "09 YT4 double ablation"
DOUBLE_ROWS: list[tuple[str, Callable[[], Any], str, bool]] = [
    ("the same heads zeroed in layer 0", lambda: _loss([(0, 2), (0, 3)])[L:].mean(), "of layer 0", True),
    ("only one head zeroed", lambda: _loss([(1, 2)])[L:].mean(), "only layer 1, head 2 zeroed", True),
    ("the single-head losses added", lambda: _loss([(1, 2)])[L:].mean() + _loss([(1, 3)])[L:].mean(),
     "added the single-head losses", True),
    ("no head zeroed", lambda: _loss([])[L:].mean(), "no head zeroed", True),
    ("the first half", lambda: _loss(PAIRS)[:L].mean(), "that is the first half", True),
    ("the repeated half from L - 1", lambda: _loss(PAIRS)[L - 1 :].mean(), "you started at position L - 1", True),
    ("every position", lambda: _loss(PAIRS).mean(), "mean over every position", True),
    ("a sum over the positions", lambda: _loss(PAIRS)[L:].sum(), "summed the losses over the positions", True),
    ("ln V, the uniform guess", lambda: np.log(MODEL.config.vocab), "that is ln V", True),
    ("a number copied wrong, 0.008 off", lambda: float(_loss(PAIRS)[L:].mean()) - 0.008,
     "more than rounding to 2 decimals explains", True),
    ("the model run on tokens[:, :-1]",
     lambda: induction.loss_per_position(MODEL, FEW[:, :-1], ablate=PAIRS)[L:].mean(), "you passed tokens[:, :-1]",
     True),
    ("0.03 off: not a rounding", lambda: float(_loss(PAIRS)[L:].mean()) - 0.03, "is not it", False),
    ("a string", lambda: "4.10", "expected one number", True),
    ("some other number", lambda: 123.0, "is not it", False),
]


def _checked(checker: Callable[[Any], Verdict], function: Any) -> Callable[[], Verdict]:
    return lambda: checker(function)


MISTAKES: list[Mistake] = [
    *[Mistake(BLOCK, text, _checked(check_block_function, f), words, named) for text, f, words, named in BLOCK_ROWS],
    *[Mistake(RMS, text, _checked(check_rms_norm_function, f), words, named) for text, f, words, named in RMS_ROWS],
    *[Mistake(INDUCTION, text, _checked(check_induction_function, f), words, named)
      for text, f, words, named in INDUCTION_ROWS],
    *[Mistake(DOUBLE, text, _double(answer), words, named) for text, answer, words, named in DOUBLE_ROWS],
    Mistake(DOUBLE, "4.09 (truncated) on the lesson's batch", _double(lambda: 4.09, TOKENS),
            "more than rounding to 2 decimals"),
    *[Mistake(OFFSET, text, _checked(check_offset_function, f), words, named) for text, f, words, named in OFFSET_ROWS],
]

RIGHT: list[RightAnswer] = [
    RightAnswer(BLOCK, "the two residual updates", lambda: check_block_function(right_block)),
    RightAnswer(RMS, "z / sqrt(mean(z**2) + eps) * gain", lambda: check_rms_norm_function(_right_rms)),
    RightAnswer(RMS, "divided by the root of sum / z.shape[-1]",
                lambda: check_rms_norm_function(_rms_by_sum)),
    RightAnswer(OFFSET, "fancy indexing with both arrays", lambda: check_offset_function(_right_offset)),
    RightAnswer(OFFSET, "a loop over the queries", lambda: check_offset_function(_offset_loop)),
    RightAnswer(OFFSET, "np.mean over a list of pairs", lambda: check_offset_function(
        lambda w, o, q: np.mean([w[:, :, t, t - o] for t in q], axis=(0, 1)))),
    RightAnswer(INDUCTION, "fancy indexing, mean over batch and positions",
                lambda: check_induction_function(_right_induction)),
    RightAnswer(DOUBLE, "4.10 (rounded as the lesson prints it)", _double(lambda: 4.10, TOKENS)),
    RightAnswer(DOUBLE, "4.1", _double(lambda: 4.1, TOKENS)),
    RightAnswer(DOUBLE, "every digit", _double(lambda: _loss(PAIRS)[L:].mean())),
    RightAnswer(DOUBLE, "a float32", _double(lambda: np.float32(_loss(PAIRS)[L:].mean()))),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
