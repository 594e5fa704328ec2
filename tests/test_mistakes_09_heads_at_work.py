"""Lesson 09's typical mistakes: each wrong answer a learner is likely to hand in to a Quick-check
exercise of "Heads at work", and the words its diagnosis must contain (format in `mistake_table`).

Your turn 4's functions are tried by the checker on logits of its own. The double-ablation checker
(no longer an exercise) is tried on the lesson's own model: its right answers use the whole
evaluation batch (4.10 nats, rounded as the lesson printed it, is accepted); its mistakes use the
first 64 sequences, which keeps the table quick and diagnoses them just the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id
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
from lessons_lib.mha_numpy import causal_mask, softmax

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


def _no_gain_bias(x: Floats, block: Block) -> Floats:
    def plain(z: Floats) -> Floats:
        return layer_norm(z, np.ones(z.shape[-1]))

    x1 = x + block.attention(plain(x), allowed=causal_mask(x.shape[1]))[0]
    return x1 + block.ffn(plain(x1))


def _norm_over_positions(x: Floats, block: Block) -> Floats:
    def norm(z: Floats, gain: Floats, bias: Floats | None) -> Floats:
        mean = z.mean(axis=1, keepdims=True)
        out: Floats = (z - mean) / np.sqrt(z.var(axis=1, keepdims=True) + 1e-5) * gain + (0.0 if bias is None else bias)
        return out

    attended: Floats = block.attention(norm(x, block.norm1_gain, block.norm1_bias), allowed=causal_mask(x.shape[1]))[0]
    x1: Floats = x + attended
    result: Floats = x1 + block.ffn(norm(x1, block.norm2_gain, block.norm2_bias))
    return result


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
    ("LayerNorm without its gain and bias", _no_gain_bias,
     "leave out the learned gain and bias", True),
    ("LayerNorm over the positions (axis 1)", _norm_over_positions, "averages over the positions", True),
    ("something else (2 x)", _ones_like_stream, "not the pre-norm block", False),
]


# ---- Your turn 3: partial RMSNorm (pRMSNorm) ------------------------------------------------------
RmsFunction = Callable[..., Any]


def _prms(k_of: Callable[[float, int], int] = lambda p, n: math.ceil(p * n),
          eps_of: Callable[[float], float] = lambda e: e,
          square_mean: Callable[[Floats], Floats] | None = None, last: bool = False) -> RmsFunction:
    """pRMSNorm with the choices a learner makes: how k is found, which eps, the mean, first or last k."""

    def function(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Floats:
        k = k_of(p, z.shape[-1])
        part = z[..., -k:] if last else z[..., :k]
        ms = (part**2).mean(axis=-1, keepdims=True) if square_mean is None else square_mean(part)
        out: Floats = z / np.sqrt(ms + eps_of(eps)) * gain
        return out

    return function


_right_prms = _prms()


def _prms_no_keepdims(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Floats:
    k = math.ceil(p * z.shape[-1])
    out: Floats = z / np.sqrt((z[..., :k] ** 2).mean(axis=-1) + eps) * gain
    return out


def _prms_eps_outside(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Floats:
    k = math.ceil(p * z.shape[-1])
    out: Floats = z / (np.sqrt((z[..., :k] ** 2).mean(axis=-1, keepdims=True)) + eps) * gain
    return out


def _prms_first_axis(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Floats:
    k = math.ceil(p * z.shape[-1])
    out: Floats = z / np.sqrt((z[:k] ** 2).mean(axis=-1, keepdims=True) + eps) * gain
    return out


def _prms_float_k(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Floats:
    k = np.ceil(p * z.shape[-1])
    out: Floats = z / np.sqrt((z[..., :k] ** 2).mean(axis=-1, keepdims=True) + eps) * gain
    return out


def _torch_rms_norm(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Any:
    tz = torch.from_numpy(z)
    return torch.nn.functional.rms_norm(tz, (z.shape[-1],), torch.from_numpy(gain), eps).numpy()


def _prms_loop(z: Floats, gain: Floats, p: float, eps: float = 1e-5) -> Floats:
    k = int(np.ceil(p * z.shape[-1]))
    flat = z.reshape(-1, z.shape[-1])
    rows = [row / np.sqrt(np.mean(row[:k] ** 2) + eps) * gain for row in flat]
    return np.array(rows, dtype=z.dtype).reshape(z.shape)


RMS = "09 YT3 pRMSNorm"
RMS_ROWS: list[tuple[str, RmsFunction, str, bool]] = [
    ("every feature (plain RMSNorm)", _prms(k_of=lambda p, n: n), "that is plain RMSNorm", True),
    ("torch.nn.functional.rms_norm", _torch_rms_norm, "that is plain RMSNorm", True),
    ("k = floor(p * n)", _prms(k_of=lambda p, n: int(p * n)), "k = floor(p * width)", True),
    ("k = round(p * n)", _prms(k_of=lambda p, n: max(1, round(p * n))), "k = floor(p * width)", True),
    ("the last k features", _prms(last=True), "the last k features", True),
    ("only the first k returned",
     lambda z, g, p, eps=1e-5: _right_prms(z, g, p, eps)[..., : math.ceil(p * z.shape[-1])],
     "returned only the first k", True),
    ("the k squares summed, divided by n", lambda z, g, p, eps=1e-5: _prms(
        square_mean=lambda part: (part**2).sum(axis=-1, keepdims=True) / z.shape[-1])(z, g, p, eps),
     "divided the sum of the k squares by the width", True),
    ("the mean without keepdims (a shape error)", _prms_no_keepdims, "keepdims=True", True),
    ("a sum of squares instead of their mean", _prms(square_mean=lambda part: (part**2).sum(axis=-1, keepdims=True)),
     "you summed the k squares", True),
    ("LayerNorm over every feature", lambda z, g, p, eps=1e-5: layer_norm(z, g), "you computed LayerNorm", True),
    ("no square root", lambda z, g, p, eps=1e-5: z / ((z[..., : math.ceil(p * z.shape[-1])] ** 2).mean(
        axis=-1, keepdims=True) + eps) * g, "take its square root", True),
    ("one mean over the whole array", _prms(square_mean=lambda part: (part**2).mean()), "one mean over the whole array",
     True),
    ("no gain", lambda z, g, p, eps=1e-5: _right_prms(z, np.ones_like(g), p, eps), "the gain is missing", True),
    ("the gain added", lambda z, g, p, eps=1e-5: _right_prms(z, np.ones_like(g), p, eps) + g, "you added the gain",
     True),
    ("divided by the standard deviation", _prms(square_mean=lambda part: part.var(axis=-1, keepdims=True)),
     "standard deviation", True),
    ("float64 returned for float32", lambda z, g, p, eps=1e-5: _right_prms(z.astype(np.float64),
                                                                           g.astype(np.float64), p, eps),
     "returned float64", True),
    ("eps outside the square root", _prms_eps_outside, "eps is outside the square root", True),
    ("eps argument ignored (1e-5 always)", _prms(eps_of=lambda e: 1e-5), "whatever the eps argument says", True),
    ("no eps at all", _prms(eps_of=lambda e: 0.0), "eps is missing", True),
    ("z[:k]: the positions sliced, not the features (a shape error)", _prms_first_axis,
     "slice the last axis, the features: z[..., :k]", True),
    ("k = np.ceil(p * n), a float (a slice error)", _prms_float_k, "k must be an int: int(np.ceil(...)) or math.ceil",
     True),
    ("z unchanged", lambda z, g, p, eps=1e-5: z, "right shape, wrong numbers", True),
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


def _lesson_queries(weights: Floats, offset: int, queries: Any) -> Any:
    """The lesson's repeated-half positions 12 .. 22 instead of the argument (blind trial, round 3)."""
    lesson = np.arange(12, 23)
    t = lesson[lesson < weights.shape[-1]]  # none fits the checker's sizes: an empty mean, NaN
    return weights[..., t, t - offset].mean(axis=(0, 2))


OFFSET = "09 YT2 offset score"
OFFSET_ROWS: list[tuple[str, Callable[[Floats, int, Any], Any], str, bool]] = [
    ("calls induction.offset_score", lambda w, o, q: induction.offset_score(w, o, q),
     "calls the library's offset_score", True),
    ("query and key swapped", lambda w, o, q: w[..., q - o, q].mean(axis=(0, 2)), "every score is 0", True),
    ("a key after the query (t + offset, clipped to the last query)",
     _offset(keys=lambda t, o: np.minimum(t + o, t.max())), "the key is t - offset, `offset` positions behind", True),
    ("a key after the query (t + offset: IndexError)", _offset(keys=lambda t, o: t + o),
     "your key is t + offset, ahead of the query", True),
    ("the queries moved to t + offset (IndexError)", lambda w, o, q: w[..., q + o, q].mean(axis=(0, 2)),
     "you moved the queries to t + offset", True),
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
    ("the batch kept, the heads averaged", _offset(axes=(1, 2)), "kept the batch axis and averaged the heads", True),
    ("only the batch averaged", _offset(axes=0), "average the positions too", True),
    ("only the heads averaged", _offset(axes=1), "averaged the heads away (axis 1)", True),
    ("the lesson's positions 12 .. 22 instead of `queries` (an empty mean)", _lesson_queries,
     "Take the query positions from the `queries` argument", True),
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


DOUBLE = "09 double ablation (checker kept, no longer an exercise)"
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


# ---- Your turn 4: the repeated half's loss from the logits -----------------------------------------
def _log_p(logits: Floats, axis: int = -1) -> Floats:
    shifted = logits - logits.max(axis=axis, keepdims=True)
    out: Floats = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return out


def _losses(logits: Floats, tokens: Any, shift: int = 1, axis: int = -1) -> Floats:
    """``-ln p`` of ``tokens[:, t + shift]`` at every position ``t``: ``(n, 2L-1)``."""
    targets = tokens[:, shift : shift + logits.shape[1]]
    out: Floats = -np.take_along_axis(_log_p(logits, axis), targets[..., None], axis=-1)[..., 0]
    return out


def _right_repeat_loss(logits: Floats, tokens: Any) -> float:
    return float(_losses(logits, tokens)[:, tokens.shape[1] // 2 :].mean())


def _repeat_loss_torch(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    flat = torch.from_numpy(logits[:, half:]).reshape(-1, logits.shape[-1])
    return float(torch.nn.functional.cross_entropy(flat, torch.from_numpy(tokens[:, half + 1 :]).reshape(-1)))


def _repeat_loss_softmax(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    p = softmax(logits, axis=-1)
    n, T = tokens.shape[0], logits.shape[1]
    right = p[np.arange(n)[:, None], np.arange(T)[None, :], tokens[:, 1:]]
    return float(-np.log(right[:, half:]).mean())


def _repeat_loss_no_keepdims(logits: Floats, tokens: Any) -> float:
    shifted = logits - logits.max(axis=-1)
    return float(shifted.mean())


V = 32  # a notebook-like global `V`, as the learner's notebook holds it


def _repeat_loss_global_l(logits: Floats, tokens: Any) -> float:
    return float(_losses(logits, tokens)[:, L:].mean())


def _repeat_loss_from(start: Callable[[int], int], stop: Callable[[int], int | None] = lambda L: None,
                      reduce: str = "mean", shift: int = 1, axis: int = -1) -> Callable[[Floats, Any], Any]:
    def function(logits: Floats, tokens: Any) -> Any:
        half = tokens.shape[1] // 2
        part = _losses(logits, tokens, shift, axis)[:, start(half) : stop(half)]
        if reduce == "sum":
            return float(part.sum())
        if reduce == "sum-positions":
            return float(part.sum(axis=1).mean())
        if reduce == "per position":
            return part.mean(axis=0)
        if reduce == "per sequence":
            return part.mean(axis=1)
        return float(part.mean())

    return function


def _minus_p(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    p = np.exp(-_losses(logits, tokens))
    return float(-p[:, half:].mean())


def _log_of_mean_p(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    return float(-np.log(np.exp(-_losses(logits, tokens))[:, half:].mean()))


def _top_token(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    return float(-_log_p(logits).max(axis=-1)[:, half:].mean())


def _repeat_loss_l_from_logits(logits: Floats, tokens: Any) -> float:
    half = logits.shape[1] // 2  # (2L - 1) // 2 = L - 1
    return float(_losses(logits, tokens)[:, half:].mean())


def _repeat_loss_l_from_logits_window(logits: Floats, tokens: Any) -> float:
    L = logits.shape[1] // 2  # (2L - 1) // 2 = L - 1: the window L .. 2L-2 written from it is moved back
    return float(_losses(logits, tokens)[:, L : 2 * L - 1].mean())


def _repeat_loss_normaliser_over_positions(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[:, half:, 0].mean())


def _repeat_loss_written_l(logits: Floats, tokens: Any) -> float:
    return float(_losses(logits, tokens)[:, 12:].mean())


def _repeat_loss_written_loop(logits: Floats, tokens: Any) -> float:
    log_p = _log_p(logits)
    total = 0.0
    for b in range(tokens.shape[0]):
        for t in range(12, 23):
            total -= float(log_p[b, t, tokens[b, t + 1]])
    return float(total / (tokens.shape[0] * 11))


def _repeat_loss_in_bits(logits: Floats, tokens: Any) -> float:
    half = tokens.shape[1] // 2
    return float(_losses(logits, tokens)[:, half:].mean() / math.log(2))


REPEAT = "09 YT4 repeated-half loss"
REPEAT_ROWS: list[tuple[str, Callable[[Floats, Any], Any], str, bool]] = [
    ("calls induction.loss_per_position", lambda logits, tokens: induction.loss_per_position(MODEL, tokens),
     "calls the library's loss_per_position", True),
    ("the token at t itself (no shift)", _repeat_loss_from(lambda L: L, shift=0), "the token at position t itself",
     True),
    ("softmax over the positions", _repeat_loss_from(lambda L: L, axis=1), "softmax runs over the positions", True),
    ("-p instead of -ln p", _minus_p, "you averaged -p", True),
    ("the sign dropped", lambda logits, tokens: -_right_repeat_loss(logits, tokens), "the sign", True),
    ("-ln of the mean probability", _log_of_mean_p, "-ln of the mean probability", True),
    ("the top token's probability", _top_token, "the top token's", True),
    ("from position L - 1", _repeat_loss_from(lambda L: L - 1), "you started at position L - 1", True),
    ("every position", _repeat_loss_from(lambda L: 0), "mean over every position", True),
    ("the first half", _repeat_loss_from(lambda L: 0, lambda L: L - 1), "that is the first half", True),
    ("a sum over the positions", _repeat_loss_from(lambda L: L, reduce="sum-positions"), "summed over the positions",
     True),
    ("a sum of every loss", _repeat_loss_from(lambda L: L, reduce="sum"), "you summed the losses", True),
    ("one loss per position", _repeat_loss_from(lambda L: L, reduce="per position"), "one loss per position", True),
    ("one loss per sequence", _repeat_loss_from(lambda L: L, reduce="per sequence"), "one loss per sequence", True),
    ("the notebook's L = 12 read as a global", _repeat_loss_global_l, "reads the notebook's L", True),
    ("a max without keepdims (shape error)", _repeat_loss_no_keepdims, "keepdims=True", True),
    ("L from logits.shape[1] // 2 (= L - 1)", _repeat_loss_l_from_logits, "take L from tokens.shape[1] // 2", True),
    ("L from logits.shape[1] // 2, the window [L : 2L-1] from it", _repeat_loss_l_from_logits_window,
     "take L from tokens.shape[1] // 2", True),
    ("the softmax normaliser over the positions (axis 1)", _repeat_loss_normaliser_over_positions,
     "normaliser sums over the positions (axis 1)", True),
    ("L = 12 written in, slicing (nan)", _repeat_loss_written_l, "the lesson's 12 written in", True),
    ("L = 12 written in, a loop (IndexError)", _repeat_loss_written_loop, "the lesson's 12, 23 written in", True),
    ("a log in base 2", _repeat_loss_in_bits, "natural log", True),
    ("something else", lambda logits, tokens: 123.0, "is not it", False),
]


def _checked(checker: Callable[[Any], Verdict], function: Any) -> Callable[[], Verdict]:
    return lambda: checker(function)


MISTAKES: list[Mistake] = [
    *[Mistake(BLOCK, text, _checked(check_block_function, f), words, named) for text, f, words, named in BLOCK_ROWS],
    *[Mistake(RMS, text, _checked(check_rms_norm_function, f), words, named) for text, f, words, named in RMS_ROWS],
    *[Mistake(REPEAT, text, _checked(check_repeat_loss_function, f), words, named)
      for text, f, words, named in REPEAT_ROWS],
    *[Mistake(DOUBLE, text, _double(answer), words, named) for text, answer, words, named in DOUBLE_ROWS],
    Mistake(DOUBLE, "4.09 (truncated) on the lesson's batch", _double(lambda: 4.09, TOKENS),
            "more than rounding to 2 decimals"),
    *[Mistake(OFFSET, text, _checked(check_offset_function, f), words, named) for text, f, words, named in OFFSET_ROWS],
]

RIGHT: list[RightAnswer] = [
    RightAnswer(BLOCK, "the two residual updates", lambda: check_block_function(right_block)),
    RightAnswer(RMS, "z / sqrt(mean(z[..., :k]**2) + eps) * gain", lambda: check_rms_norm_function(_right_prms)),
    RightAnswer(RMS, "the k squares summed, divided by k", lambda: check_rms_norm_function(_prms(
        square_mean=lambda part: (part**2).sum(axis=-1, keepdims=True) / part.shape[-1]))),
    RightAnswer(RMS, "a loop over the rows", lambda: check_rms_norm_function(_prms_loop)),
    RightAnswer(OFFSET, "fancy indexing with both arrays", lambda: check_offset_function(_right_offset)),
    RightAnswer(OFFSET, "a loop over the queries", lambda: check_offset_function(_offset_loop)),
    RightAnswer(OFFSET, "np.mean over a list of pairs", lambda: check_offset_function(
        lambda w, o, q: np.mean([w[:, :, t, t - o] for t in q], axis=(0, 1)))),
    RightAnswer(REPEAT, "a log-softmax and take_along_axis", lambda: check_repeat_loss_function(_right_repeat_loss)),
    RightAnswer(REPEAT, "torch cross_entropy", lambda: check_repeat_loss_function(_repeat_loss_torch)),
    RightAnswer(REPEAT, "np.log of a softmax, fancy indexing",
                lambda: check_repeat_loss_function(_repeat_loss_softmax)),
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
