"""Quick check of the lesson "Heads at work" (checkers in ``lessons_lib.checks.heads_at_work``).

Each checker recognises the usual wrong answers and says what went wrong, without giving the right
answer away. Function exercises are tried on the checker's own inputs (a block with LayerNorm gains
and biases that are not 1 and 0, attention weights with known entries), so a function that only
fits the notebook's arrays is caught.

Notation: ``B`` batch, ``h`` heads, ``T`` positions, ``D`` model width, ``L`` the length of the
repeated run. NumPy only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.block_numpy import Block, layer_norm
from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    function_answer,
    number_answer,
    passed,
    same,
)
from lessons_lib.induction import InductionModel, induction_score, loss_per_position
from lessons_lib.mha_numpy import causal_mask, softmax
from lessons_lib.validation import check_instance, check_int

__all__ = ["check_block_function", "check_double_ablation", "check_induction_function", "check_rms_norm_function"]

Floats = NDArray[np.floating[Any]]
BORROWED_BLOCK = "you called the finished block; write the two residual updates yourself from its pieces"


class _WatchedBlock(Block):
    """A block that notes when it is called whole, so the checker can tell the learner's two
    updates from a call of the finished block."""

    called = False

    def __call__(self, x: Floats, causal: bool = True) -> tuple[Floats, Floats]:
        self.called = True
        return super().__call__(x, causal)


def _checker_block(seed: int = 4) -> tuple[_WatchedBlock, Floats]:
    """A small block whose LayerNorms have gains and biases of their own, and an input stream."""
    rng = np.random.default_rng(seed)
    block = _WatchedBlock(8, 2, 16, seed=seed)
    block.norm1_gain, block.norm2_gain = 1 + 0.5 * rng.normal(size=8), 1 + 0.5 * rng.normal(size=8)
    block.norm1_bias, block.norm2_bias = 0.3 * rng.normal(size=8), 0.3 * rng.normal(size=8)
    return block, rng.normal(size=(2, 5, 8))


def _block_routes(block: Block, x: Floats) -> dict[str, Callable[[], Floats]]:
    """The right update and the usual mistakes, each as a computation of the new stream."""
    allowed = causal_mask(x.shape[1])

    def ln1(z: Floats) -> Floats:
        return layer_norm(z, block.norm1_gain, block.norm1_bias)

    def ln2(z: Floats) -> Floats:
        return layer_norm(z, block.norm2_gain, block.norm2_bias)

    def attn(z: Floats, mask: Any = allowed) -> Floats:
        return block.attention(z, allowed=mask)[0]

    def post_norm() -> Floats:
        x1 = ln1(x + attn(x))
        return ln2(x1 + block.ffn(x1))

    def no_attention_residual() -> Floats:
        a = attn(ln1(x))
        return a + block.ffn(ln2(a))

    def no_ffn_residual() -> Floats:
        return block.ffn(ln2(x + attn(ln1(x))))

    def parallel() -> Floats:
        return x + attn(ln1(x)) + block.ffn(ln2(x))

    def no_norms() -> Floats:
        x1 = x + attn(x)
        return x1 + block.ffn(x1)

    def not_causal() -> Floats:
        x1 = x + attn(ln1(x), None)
        return x1 + block.ffn(ln2(x1))

    def norms_swapped() -> Floats:
        x1 = x + attn(ln2(x))
        return x1 + block.ffn(ln1(x1))

    def one_norm() -> Floats:
        x1 = x + attn(ln1(x))
        return x1 + block.ffn(ln1(x1))

    return {
        "post-norm": post_norm,
        "no attention residual": no_attention_residual,
        "no ffn residual": no_ffn_residual,
        "parallel": parallel,
        "no norms": no_norms,
        "not causal": not_causal,
        "norms swapped": norms_swapped,
        "one norm": one_norm,
    }


BLOCK_MISTAKES = {
    "post-norm": "you normalised after adding (the post-norm block of the original Transformer); pre-norm "
                 "normalises a copy before each sub-layer and adds the result to the raw stream",
    "no attention residual": "the heads' output replaced the stream instead of being added to it: keep x + ...",
    "no ffn residual": "the feed-forward output replaced the stream at the end: add it to the stream, x + ...",
    "parallel": "the feed-forward read the stream from before the heads wrote to it (a 'parallel' block); "
                "here it reads the stream after the attention update",
    "no norms": "no LayerNorm: each sub-layer reads a normalised copy of the stream",
    "not causal": "your attention is not causal: position t may read only positions 0 .. t (pass a causal mask)",
    "norms swapped": "LayerNorm 1 belongs to the attention sub-layer and LayerNorm 2 to the feed-forward; you "
                     "swapped them",
    "one norm": "both sub-layers used LayerNorm 1: the feed-forward has LayerNorm 2, with its own gain and bias",
}


def check_block_function(function: Any) -> Verdict:
    """Question "block": ``function(x, block) -> new stream (B, T, D)``, one causal pre-norm block.

    Tried on the checker's own block (LayerNorm gains and biases not 1 and 0) and stream. Recognises:
    a call of the finished block, post-norm, a missing residual on either sub-layer, the parallel
    block, missing or swapped or shared LayerNorms, and attention without the causal mask.
    """
    question = "block"
    block, x = _checker_block()
    result = function_answer(question, function, (x.copy(), block), "the body: return the new stream, shape (B, T, D)")
    if isinstance(result, Verdict):
        return result
    if block.called:
        return failed(question, BORROWED_BLOCK)
    right = Block.__call__(block, x)[0]
    if isinstance(result, tuple) and len(result) == 2 and same(result[0], right):
        return failed(question, "right stream, but return only the stream, not a pair")
    got = array_answer(question, result, "the new stream")
    if isinstance(got, Verdict):
        return got
    if same(got, right):
        return passed(question, "x + MHA(LN1(x)), then x + FFN(LN2(x)): the pre-norm residual updates")
    if got.shape != x.shape:
        return failed(question, f"the block keeps the stream's shape (B, T, D) = {x.shape}; yours is {got.shape}")
    routes = _block_routes(block, x)
    mistake = first_match(got, [(routes[name], message) for name, message in BLOCK_MISTAKES.items()])
    return failed(question, mistake or "not the pre-norm block: read a LayerNorm'd copy, add the heads' output, "
                                       "then read a LayerNorm'd copy of the new stream and add the feed-forward's")


def check_rms_norm_function(function: Any) -> Verdict:
    """Question "RMSNorm": ``function(z, gain) -> z / sqrt(mean(z**2) + eps) * gain`` over the last axis.

    Tried with ``eps = 1e-5`` on inputs whose mean is far from 0. Recognises: LayerNorm (the mean
    subtracted), no square root, the wrong axis, no gain, a bias-like addition of ``gain``, and
    dividing by the standard deviation.
    """
    question = "RMSNorm"
    rng = np.random.default_rng(5)
    z = rng.normal(loc=1.5, size=(3, 4, 6))  # far from zero mean: LayerNorm and RMSNorm differ
    gain = 1 + 0.5 * rng.normal(size=6)
    result = function_answer(question, function, (z.copy(), gain.copy()), "the body: return an array shaped like z")
    if isinstance(result, Verdict):
        return result
    got = array_answer(question, result, "the normalised array")
    if isinstance(got, Verdict):
        return got
    eps = 1e-5
    rms = np.sqrt((z**2).mean(axis=-1, keepdims=True) + eps)
    if same(got, z / rms * gain):
        return passed(question, "z / sqrt(mean(z**2) + eps) * gain: no mean subtracted, no bias")
    square_mean = (z**2).mean(axis=-1, keepdims=True)
    mistake = first_match(got, [
        (lambda: layer_norm(z, gain),
         "you subtracted the mean: that is LayerNorm; RMSNorm divides by the root mean square and never centres"),
        (lambda: z / (square_mean + eps) * gain, "you divided by the mean square: take its square root"),
        (lambda: z / np.sqrt((z**2).mean(axis=0, keepdims=True) + eps) * gain,
         "the mean runs over the wrong axis: normalise each position's D features"),
        (lambda: z / rms, "the gain is missing: multiply by it after normalising"),
        (lambda: z / rms + gain, "you added the gain: it multiplies (RMSNorm has no bias)"),
        (lambda: z / np.sqrt(z.var(axis=-1, keepdims=True) + eps) * gain,
         "you divided by the standard deviation (a centred spread): RMSNorm uses mean(z**2)"),
    ])
    if mistake is None and got.shape != z.shape:
        mistake = f"the result keeps z's shape {z.shape}; yours is {got.shape}"
    return failed(question, mistake or "not RMSNorm: divide each position by the root of its mean square, then "
                                       "multiply by the gain")


def _causal_weights(rng: np.random.Generator, B: int, h: int, T: int) -> Floats:
    """Random causal attention weights ``(B, h, T, T)``: rows sum to 1, nothing above the diagonal."""
    scores = np.where(causal_mask(T), rng.normal(scale=2.0, size=(B, h, T, T)), -np.inf)
    weights: Floats = softmax(scores)
    return weights


def check_induction_function(function: Any) -> Verdict:
    """Question "induction score": ``function(weights, L) -> (h,)``, the mean over ``b`` and
    ``t = L .. T-1`` of ``weights[b, head, t, t - L + 1]``.

    Tried on random causal weights ``(3, 4, 9, 9)`` with ``L = 5`` and then ``(2, 2, 7, 7)`` with
    ``L = 3``. Recognises: a call of `induction.induction_score`, the earlier copy itself
    (``t - L``), the previous token (``t - 1``), every position instead of the repeated half, a sum
    instead of a mean, and the batch or head axis averaged away.
    """
    question = "induction score"
    if "induction_score" in getattr(getattr(function, "__code__", None), "co_names", ()):
        return failed(question, "you called the finished induction_score; index the weights yourself")
    rng = np.random.default_rng(6)
    for trial, (B, h, T, L) in enumerate([(3, 4, 9, 5), (2, 2, 7, 3)]):
        weights = _causal_weights(rng, B, h, T)
        result = function_answer(question, function, (weights.copy(), L), "the body: return one score per head, (h,)")
        if isinstance(result, Verdict):
            return result if trial == 0 else failed(question, f"with other sizes: {result.message}")
        got = array_answer(question, result, "the scores")
        if isinstance(got, Verdict):
            return got
        right = induction_score(weights, L)
        if same(got, right):
            continue
        t = np.arange(L, T)
        mistake = first_match(got, [
            (weights[..., t, t - L].mean(axis=(0, 2)), "that is the weight on the earlier copy of the token itself "
             "(t - L); an induction head attends to the token right after it"),
            (weights[..., t, t - 1].mean(axis=(0, 2)), "that is the weight on the previous token (t - 1), a "
             "previous-token head's score"),
            (weights[..., np.arange(L - 1, T), np.arange(L - 1, T) - L + 1].mean(axis=(0, 2)),
             "start at t = L: position L - 1 is still in the first half, where nothing has repeated yet"),
            (weights[..., t, t - L + 1].sum(axis=(0, 2)), "you summed: average over the batch and the positions"),
            (weights[..., t, t - L + 1].mean(axis=2), "keep one score per head: average over the batch as well"),
            (weights[..., t, t - L + 1].mean(), "one score per head, not one for all heads: keep the head axis"),
        ])
        if mistake is None and got.shape != right.shape:
            mistake = f"expected one score per head, shape {right.shape}; yours has shape {got.shape}"
        if trial == 1:
            return failed(question, f"right for the first sizes, not with other sizes (T={T}, L={L}): "
                                    f"{mistake or 'read T and L from the arguments, not from the notebook'}")
        return failed(question, mistake or f"not the induction score: average weights[b, head, t, t - L + 1] over "
                                           f"b and t = L .. T-1 (here L={L}, T={T})")
    return passed(question, "mean weight on position t - L + 1, the token after the earlier copy, over the repeat")


def check_double_ablation(answer: Any, model: InductionModel, tokens: Any, heads: list[tuple[int, int]]) -> Verdict:
    """Question "double ablation": the mean repeated-half loss (positions ``L .. 2L-2``) with every
    head in ``heads`` zeroed at once, on ``tokens (B, 2L)``.

    Recognises: only one of the heads zeroed, the single-head losses added, no head zeroed, the
    first half's loss, and the mean over every position.
    """
    question = "double ablation"
    check_instance("model", model, InductionModel, "the trained model from induction.load_induction_model()")
    if not (isinstance(heads, list) and len(heads) >= 2):
        raise ValueError(f"heads must list at least two (layer, head) pairs, got {heads!r}")
    L = check_int("model.config.half", model.config.half, symbol="L")
    value = number_answer(question, answer, "one number: the repeated-half loss with those heads zeroed together")
    if isinstance(value, Verdict):
        return value
    both = loss_per_position(model, tokens, ablate=heads)
    right = float(both[L:].mean())
    if same(value, right):
        return passed(question, f"{right:.3f} nats with {len(heads)} heads zeroed together")
    singles = [float(loss_per_position(model, tokens, ablate=[pair])[L:].mean()) for pair in heads]
    intact = loss_per_position(model, tokens)
    candidates = [(single, f"that is the loss with only layer {pair[0]}, head {pair[1]} zeroed: zero them "
                           f"together, in one ablate list") for single, pair in zip(singles, heads, strict=True)]
    candidates += [
        (sum(singles), "you added the single-head losses; zero the heads together and measure once"),
        (float(intact[L:].mean()), "that is the loss with no head zeroed: pass the heads in ablate=[...]"),
        (float(both[:L].mean()), "that is the first half (positions 0 .. L-1); the repeated half is L .. 2L-2"),
        (float(both.mean()), "that is the mean over every position; take the repeated half, positions L .. 2L-2"),
    ]
    return failed(question, first_match(value, candidates) or f"{value} is not it: zero the heads in one run of "
                                                              f"loss_per_position, then average positions L ..")
