"""Quick check of the lesson "Heads at work" (checkers in ``lessons_lib.checks.heads_at_work``).

Each checker recognises the usual wrong answers and says what went wrong, without giving the right
answer away. Function exercises are tried on the checker's own inputs of two sizes that differ in
every size a function could hard-code (blocks with LayerNorm gains and biases that are not 1 and 0,
random causal attention weights), so a function that only fits the notebook's arrays is caught; a
call of the library function an exercise asks for is refused with the shared `forbidden_call`.

Notation: ``B`` batch, ``h`` heads, ``T`` positions, ``D`` model width, ``L`` the length of the
repeated run. NumPy only.
"""

from __future__ import annotations

import math
import warnings
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
    forbidden_call,
    function_answer,
    number_answer,
    passed,
    precision_problem,
    rounded_match,
    same,
    same_kind,
)
from lessons_lib.induction import InductionModel, loss_per_position, offset_score
from lessons_lib.mha_numpy import causal_mask, softmax
from lessons_lib.validation import check_instance, check_int

__all__ = [
    "check_block_function",
    "check_double_ablation",
    "check_offset_function",
    "check_repeat_loss_function",
    "check_rms_norm_function",
]

Floats = NDArray[np.floating[Any]]
BORROWED_BLOCK = "you called the finished block; write the two residual updates yourself from its pieces"
DOUBLE_ABLATION_DECIMALS = 2  # the lesson prints this loss with 2 decimals
DOUBLE_ABLATION_ROUNDING = 0.01  # |answer - loss| that rounding (or truncating) to 2 decimals explains
# Notebook names a function of the exercises should not read: the lesson's sizes and arrays.
NOTEBOOK_NAMES = ("c", "T", "L", "V", "B", "h", "D", "tokens", "layer_weights", "weights", "model", "prev", "ind")
NOT_UNPACKED = ("block.attention returns a pair (output, weights): unpack it, e.g. `attended, _ = "
                "block.attention(z, allowed=...)`, and add only the output to the stream")


class _Pair(tuple):  # type: ignore[type-arg]
    """What the checker's attention returns: ``(output, weights)`` as usual, but using the pair itself
    as an array (``x + block.attention(z, ...)``, without unpacking) is noted and refused by name."""

    __array_ufunc__ = None  # NumPy hands ``x + pair`` back to ``pair.__radd__``
    misused = False

    def _refuse(self, *_: Any, **__: Any) -> Any:
        type(self).misused = True
        raise TypeError(NOT_UNPACKED)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __array__ = _refuse


class _WatchedAttention:
    """The block's attention layer, which notes the masks it is given and returns a `_Pair`."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.masks: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.layer, name)

    def __call__(self, query: Floats, context: Floats | None = None, allowed: Any = None) -> tuple[Floats, Floats]:
        self.masks.append(allowed)
        return _Pair(self.layer(query, context, allowed=allowed))


class _WatchedBlock(Block):
    """A block that notes when it is called whole, so the checker can tell the learner's two
    updates from a call of the finished block, and whose attention notes how it is called."""

    called = False

    def __call__(self, x: Floats, causal: bool = True) -> tuple[Floats, Floats]:
        self.called = True
        return super().__call__(x, causal)


BLOCK_SIZES = [(2, 6, 12, 3, 24), (3, 4, 16, 4, 20)]  # (B, T, D, h, F): none is the notebook's (2, 5, 8, 2, 32)


def _checker_block(sizes: tuple[int, int, int, int, int], seed: int = 4) -> tuple[_WatchedBlock, Floats]:
    """A small block whose LayerNorms have gains and biases of their own, and an input stream."""
    B, T, D, h, F = sizes
    rng = np.random.default_rng(seed)
    block = _WatchedBlock(D, h, F, seed=seed)
    block.norm1_gain, block.norm2_gain = 1 + 0.5 * rng.normal(size=D), 1 + 0.5 * rng.normal(size=D)
    block.norm1_bias, block.norm2_bias = 0.3 * rng.normal(size=D), 0.3 * rng.normal(size=D)
    return block, rng.normal(size=(B, T, D))


def _mask_mistake(masks: list[Any], T: int) -> str | None:
    """A message when the learner gave the attention an inverted mask or one of another length."""
    for mask in masks:
        if mask is None:
            continue
        array = np.asarray(mask)
        if array.ndim >= 2 and array.shape[-2:] != (T, T):
            return (f"your mask is {array.shape[-2]} x {array.shape[-1]}, and this stream has T = {T} positions: "
                    "build it from x.shape[1], not from the notebook's T")
        if array.dtype == bool and array.ndim >= 2 and np.array_equal(array.reshape(-1, T, T)[0], ~causal_mask(T)):
            return ("your mask is inverted: block.attention (the MultiHead of lessons 03-04) takes True = may attend, "
                    "so pass mha_numpy.causal_mask(T) as it is; only PyTorch's src_mask and attn_mask use True = "
                    "blocked (section 1, the comparison with nn.TransformerEncoderLayer)")
    return None


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

    def anti_causal() -> Floats:
        x1 = x + attn(ln1(x), causal_mask(x.shape[1]).T)
        return x1 + block.ffn(ln2(x1))

    def norms_swapped() -> Floats:
        x1 = x + attn(ln2(x))
        return x1 + block.ffn(ln1(x1))

    def one_norm() -> Floats:
        x1 = x + attn(ln1(x))
        return x1 + block.ffn(ln1(x1))

    def plain(z: Floats) -> Floats:
        return layer_norm(z, np.ones(z.shape[-1]))

    def no_gain_bias() -> Floats:
        x1 = x + attn(plain(x))
        return x1 + block.ffn(plain(x1))

    def positions_axis(z: Floats, gain: Floats, bias: Floats | None) -> Floats:
        mean = z.mean(axis=1, keepdims=True)
        spread: Floats = np.sqrt(((z - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
        out: Floats = (z - mean) / spread * gain + (0.0 if bias is None else bias)
        return out

    def norm_over_positions() -> Floats:
        x1: Floats = x + attn(positions_axis(x, block.norm1_gain, block.norm1_bias))
        out: Floats = x1 + block.ffn(positions_axis(x1, block.norm2_gain, block.norm2_bias))
        return out

    return {
        "post-norm": post_norm,
        "no attention residual": no_attention_residual,
        "no ffn residual": no_ffn_residual,
        "parallel": parallel,
        "no norms": no_norms,
        "not causal": not_causal,
        "anti-causal": anti_causal,
        "norms swapped": norms_swapped,
        "one norm": one_norm,
        "no gain or bias": no_gain_bias,
        "norm over positions": norm_over_positions,
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
    "anti-causal": "your mask lets each position read the later positions (the upper triangle): causal is the "
                   "lower triangle, position t reads 0 .. t (mha_numpy.causal_mask)",
    "norms swapped": "LayerNorm 1 belongs to the attention sub-layer and LayerNorm 2 to the feed-forward; you "
                     "swapped them",
    "one norm": "both sub-layers used LayerNorm 1: the feed-forward has LayerNorm 2, with its own gain and bias",
    "no gain or bias": "your LayerNorms leave out the learned gain and bias: multiply by block.norm1_gain (norm2 for "
                       "the feed-forward) and add the bias after normalising",
    "norm over positions": "your LayerNorm averages over the positions (axis 1): it normalises each position's D "
                           "features, the last axis",
}


def check_block_function(function: Any) -> Verdict:
    """Question "block": ``function(x, block) -> new stream (B, T, D)``, one causal pre-norm block.

    Tried on two blocks of the checker's own (sizes `BLOCK_SIZES`, none the notebook's; LayerNorm
    gains and biases not 1 and 0) and streams. Recognises: a call of the finished block, the pair
    from ``block.attention`` used without unpacking, an inverted mask (PyTorch's True = blocked), a
    mask of the notebook's length, post-norm, a missing residual on either sub-layer, the parallel
    block, missing or swapped or shared LayerNorms, attention without the causal mask or with an
    anti-causal one, a result of another dtype, and a function right for one size only.
    """
    question = "block"
    for trial, sizes in enumerate(BLOCK_SIZES):
        verdict = _check_block_once(question, function, sizes)
        if verdict is not None:
            if trial == 1 and verdict.answered:
                return failed(question, f"right for the first sizes, not with others (B, T, D, h, F = {sizes}): "
                                        f"{verdict.message}")
            return verdict
    return passed(question, "x + MHA(LN1(x)), then x + FFN(LN2(x)): the pre-norm residual updates")


def _check_block_once(question: str, function: Any, sizes: tuple[int, int, int, int, int]) -> Verdict | None:
    """``None`` when the function is right on a block of these sizes, else what went wrong."""
    block, x = _checker_block(sizes)
    watched = _WatchedAttention(block.attention)
    block.attention = watched  # type: ignore[assignment]
    _Pair.misused = False
    result = function_answer(question, function, (x.copy(), block), "the body: return the new stream, shape (B, T, D)")
    block.attention = watched.layer
    mask_mistake = _mask_mistake(watched.masks, x.shape[1])
    if _Pair.misused:
        return failed(question, NOT_UNPACKED)
    if block.called:
        return failed(question, BORROWED_BLOCK)
    if mask_mistake is not None and (isinstance(result, Verdict) or not same(result, Block.__call__(block, x)[0])):
        return failed(question, mask_mistake)
    if isinstance(result, Verdict):
        return result
    right = Block.__call__(block, x)[0]
    if isinstance(result, tuple) and len(result) == 2 and same(result[0], right):
        return failed(question, "right stream, but return only the stream, not a pair")
    got = array_answer(question, result, "the new stream")
    if isinstance(got, Verdict):
        return got
    if same(got, right):
        return same_kind(question, result, x)
    if got.shape != x.shape:
        return failed(question, f"the block keeps the stream's shape (B, T, D) = {x.shape}; yours is {got.shape}")
    routes = _block_routes(block, x)
    mistake = first_match(got, [(routes[name], message) for name, message in BLOCK_MISTAKES.items()])
    return failed(question, mistake or "not the pre-norm block: read a LayerNorm'd copy, add the heads' output, "
                                       "then read a LayerNorm'd copy of the new stream and add the feed-forward's")


RMS_TRIALS = [((3, 4, 6), np.float64, 0.25, None), ((5, 10), np.float32, 0.25, None), ((4, 5), np.float64, 0.5, 1e-2)]
KEEPDIMS = ("the mean of the squares lost its last axis, so it cannot divide z: keep it with keepdims=True (or add "
            "[..., None]) so that each position is divided by its own RMS")
FIRST_AXIS = ("you sliced the first axis, the positions (z[:k]): the k features are on the last axis, so slice the "
              "last axis, the features: z[..., :k]")
FLOAT_K = ("k must be an int: int(np.ceil(...)) or math.ceil (np.ceil returns a float, and a slice such as "
           "z[..., :k] takes whole numbers only)")


def _first_k(p: float, width: int) -> int:
    """pRMSNorm's ``k = ceil(p * width)`` (at least 1)."""
    return max(1, math.ceil(p * width))


def _sliced_positions(function: Any) -> bool:
    """Whether ``function`` slices the first axis (``z[:k]``) where the features, the last axis, belong:
    on a ``z`` of shape ``(k, width)`` that slice keeps every row, and the answer is plain RMSNorm."""
    width, p = 6, 0.25
    k = _first_k(p, width)
    z = np.random.default_rng(6).normal(loc=1.5, size=(k, width))
    gain = 1 + 0.5 * np.random.default_rng(7).normal(size=width)
    result = function_answer("RMSNorm", function, (z.copy(), gain.copy(), p), "an array")
    if isinstance(result, Verdict):
        return False
    got = array_answer("RMSNorm", result, "an array")
    return not isinstance(got, Verdict) and same(got, z / np.sqrt((z**2).mean(axis=-1, keepdims=True) + 1e-5) * gain)


def check_rms_norm_function(function: Any) -> Verdict:
    """Question "RMSNorm": ``function(z, gain, p, eps=1e-5)``, partial RMSNorm (pRMSNorm, Zhang and
    Sennrich, 2019): ``z / sqrt(mean(z[..., :k]**2) + eps) * gain`` with ``k = ceil(p * width)``.

    Tried on `RMS_TRIALS`: inputs whose mean is far from 0, ``(3, 4, 6)`` float64 and ``(5, 10)``
    float32 with ``p = 0.25`` (``p * width`` never whole, so ``floor`` and ``ceil`` differ), then
    ``(4, 5)`` with ``p = 0.5``, ``eps = 0.01`` passed and a row near 0. Recognises: every feature
    used (plain RMSNorm, also `torch.nn.functional.rms_norm`), ``floor`` instead of ``ceil``, the
    last ``k`` features, only the first ``k`` returned, the sum of the ``k`` squares divided by the
    width, a mean without ``keepdims`` (a shape error), the first axis sliced (``z[:k]``, a shape
    error), ``k`` left a float (``np.ceil``: a slice error), eps outside the root, eps ignored or
    missing, LayerNorm, a sum of squares, no square root, one mean over the whole array, no gain, a
    bias-like addition of ``gain``, the standard deviation, and a result of another dtype.
    """
    question = "RMSNorm"
    rng = np.random.default_rng(5)
    for trial, (shape, dtype, p, eps) in enumerate(RMS_TRIALS):
        z = rng.normal(loc=1.5, size=shape).astype(dtype)
        if eps is not None:
            z[0] = 1e-3 * rng.normal(size=shape[-1])
        gain = (1 + 0.5 * rng.normal(size=shape[-1])).astype(dtype)
        args = (z.copy(), gain.copy(), p) if eps is None else (z.copy(), gain.copy(), p, eps)
        result = function_answer(question, function, args, "the body: return an array shaped like z")
        if isinstance(result, Verdict):
            if result.answered and "slice indices must be integers" in result.message:
                return failed(question, FLOAT_K)
            if result.answered and "could not be broadcast" in result.message:
                return failed(question, FIRST_AXIS if _sliced_positions(function) else KEEPDIMS)
            return result if trial == 0 else failed(question, f"with z of shape {shape}: {result.message}")
        verdict = _rms_verdict(question, result, z.astype(np.float64), gain.astype(np.float64), p, eps or 1e-5)
        if verdict is None:
            verdict = same_kind(question, result, z)
        if verdict is not None:
            if trial == 1:
                other = f"not for z of shape {shape} ({dtype.__name__})"
                return failed(question, f"right for z of shape (3, 4, 6), {other}: {verdict.message}")
            if trial == 2:
                return failed(question, f"right with the default eps, not with p=0.5, eps=0.01 on rows near 0: "
                                        f"{verdict.message}")
            return verdict
    return passed(question, "z / sqrt(mean(z[..., :k]**2) + eps) * gain with k = ceil(p * width): the RMS of the "
                            "first k features divides them all")


def _rms_verdict(question: str, result: Any, z: Floats, gain: Floats, p: float, eps: float) -> Verdict | None:
    """``None`` when ``result`` is pRMSNorm of ``z`` (float64 here) with ``p`` and ``eps``, else what went wrong."""
    got = array_answer(question, result, "the normalised array")
    if isinstance(got, Verdict):
        return got
    D = z.shape[-1]
    k = _first_k(p, D)
    head = z[..., :k]
    square_mean = (head**2).mean(axis=-1, keepdims=True)
    rms = np.sqrt(square_mean + eps)
    if same(got, z / rms * gain):
        return None
    floor = max(1, int(p * D))
    mistake = first_match(got, [
        (lambda: z / np.sqrt((z**2).mean(axis=-1, keepdims=True) + eps) * gain,
         f"you used all {D} features: that is plain RMSNorm (what torch.nn.functional.rms_norm computes); pRMSNorm "
         f"estimates the RMS from the first k = ceil(p * width) features only (here k = {k})"),
        (lambda: z / np.sqrt((z[..., :floor] ** 2).mean(axis=-1, keepdims=True) + eps) * gain,
         f"you took k = floor(p * width) = {floor}: round up, k = ceil(p * width) = {k} (math.ceil)"),
        (lambda: z / np.sqrt((z[..., -k:] ** 2).mean(axis=-1, keepdims=True) + eps) * gain,
         "you used the last k features: the estimate comes from the first k, z[..., :k]"),
        (lambda: head / rms * gain[:k], f"you returned only the first k = {k} features: divide all {D} of them by "
                                        "that RMS"),
        (lambda: z / np.sqrt((head**2).sum(axis=-1, keepdims=True) / D + eps) * gain,
         f"you divided the sum of the k squares by the width {D}: their mean divides by k"),
        (lambda: z / (np.sqrt(square_mean) + eps) * gain,
         "eps is outside the square root: add it to the mean square, then take the root"),
        (lambda: z / np.sqrt(square_mean + 1e-5) * gain,
         "you used eps = 1e-5 whatever the eps argument says: use the eps you are given"),
        (lambda: z / np.sqrt(square_mean) * gain, "eps is missing: add it to the mean square inside the root"),
        (lambda: (z - head.mean(axis=-1, keepdims=True)) / np.sqrt(head.var(axis=-1, keepdims=True) + eps) * gain,
         "you subtracted the mean: that is LayerNorm's centring; (p)RMSNorm divides by the root mean square and "
         "never centres"),
        (lambda: layer_norm(z, gain), "you computed LayerNorm over every feature: pRMSNorm never centres, and "
                                      "estimates the RMS from the first k features"),
        (lambda: z / np.sqrt((head**2).sum(axis=-1, keepdims=True) + eps) * gain,
         "you summed the k squares: take their mean"),
        (lambda: z / (square_mean + eps) * gain, "you divided by the mean square: take its square root"),
        (lambda: z / np.sqrt((head**2).mean() + eps) * gain,
         "you took one mean over the whole array: each position gets its own RMS, the mean over its own first k "
         "features (axis=-1, keepdims=True)"),
        (lambda: z / rms, "the gain is missing: multiply by it after normalising"),
        (lambda: z / rms + gain, "you added the gain: it multiplies (RMSNorm has no bias)"),
        (lambda: z / np.sqrt(head.var(axis=-1, keepdims=True) + eps) * gain,
         "you divided by the standard deviation (a centred spread): RMSNorm uses the mean of the squares"),
    ])
    if mistake is None and got.shape != z.shape:
        mistake = f"the result keeps z's shape {z.shape}; yours is {got.shape}"
    return failed(question, mistake or f"right shape, wrong numbers: divide every feature of a position by the root "
                                       f"of the mean square of its first k = ceil(p * width) features (here {k}), "
                                       "plus eps, then multiply by the gain")


def _causal_weights(rng: np.random.Generator, B: int, h: int, T: int) -> Floats:
    """Random causal attention weights ``(B, h, T, T)``: rows sum to 1, nothing above the diagonal."""
    scores = np.where(causal_mask(T), rng.normal(scale=2.0, size=(B, h, T, T)), -np.inf)
    weights: Floats = softmax(scores)
    return weights


def _notebook_globals(function: Any) -> list[str]:
    """The notebook names (`NOTEBOOK_NAMES`) that ``function``'s own code reads as globals."""
    code = getattr(function, "__code__", None)
    if code is None:
        return []
    params = set(code.co_varnames[: code.co_argcount])
    namespace = getattr(function, "__globals__", {})
    return sorted({name for name in code.co_names if name in NOTEBOOK_NAMES and name in namespace} - params)


OFFSET_TRIALS = [(3, 4, 10, 2, (5, 10)), (2, 3, 7, 1, (2, 6))]  # (B, h, T, offset, queries a .. b-1): len != h, B
AHEAD = ("your key is t + offset, ahead of the query: causal weights are 0 there (or the index runs past the "
         "last position); the key is t - offset, `offset` positions behind the query t")


def _offset_probe(function: Any) -> str | None:
    """What pairs ``function`` picks, read from probe weights that are not attention weights: entry
    ``[b, head, t, s]`` holds ``s - t`` (then ``t``), on queries that leave room after them, so a
    key ``t + offset`` neither raises nor reads zeros. Names a key ahead of the query, or queries
    moved by the offset; ``None`` when the probe says nothing clear."""
    B, h, T, offset, queries = 2, 3, 12, 2, np.arange(3, 6)
    s, t = np.meshgrid(np.arange(T), np.arange(T))  # s varies along the last axis, t along the one before
    found = []
    for values in (s - t, t):
        probe = np.broadcast_to(values.astype(float), (B, h, T, T)).copy()
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = np.asarray(function(probe, offset, queries.copy()), dtype=float)
        except Exception:  # the probe is only a hint: any failure means "no diagnosis"
            return None
        if got.shape != (h,) or not np.allclose(got, got[0]):
            return None
        found.append(float(got[0]))
    relative, query = found
    if relative > 0 and math.isclose(query, queries.mean()):  # some keys after their query, e.g. t + offset
        return AHEAD
    if math.isclose(relative, -offset) and math.isclose(query, queries.mean() + offset):
        return ("you moved the queries to t + offset: the queries are the positions t given in `queries`, and "
                "each one's key is t - offset, behind it")
    if math.isclose(relative, offset):
        return AHEAD
    return None


def check_offset_function(function: Any) -> Verdict:
    """Question "offset score": ``function(weights, offset, queries) -> (h,)``, per head the mean over
    ``b`` and the query positions ``t`` in ``queries`` of ``weights[b, head, t, t - offset]``.

    Tried on random causal weights of `OFFSET_TRIALS` (``(3, 4, 10, 10)``, offset 2, queries 5 .. 9;
    ``(2, 3, 7, 7)``, offset 1, queries 2 .. 5: the number of queries is never ``h`` or ``B``).
    Recognises: a call of `induction.offset_score`, key and query swapped or a key after the query
    (zeros in causal weights), the offset off by one either way, every query instead of those given,
    every query paired with every key, the first sequence only, a sum, the batch or head axis averaged
    away, sizes or arrays read from the notebook instead of the arguments, and (from probe weights,
    `_offset_probe`) a key at ``t + offset`` or queries moved to ``t + offset``, which may also raise.
    """
    question = "offset score"
    borrowed = forbidden_call(question, function, "offset_score")
    if borrowed is not None:
        return borrowed
    rng = np.random.default_rng(7)
    for trial, (B, h, T, offset, (a, b)) in enumerate(OFFSET_TRIALS):
        weights = _causal_weights(rng, B, h, T)
        queries = np.arange(a, b)
        result = function_answer(question, function, (weights.copy(), offset, queries.copy()),
                                 "the body: return one score per head, (h,)")
        borrowed_names = _notebook_globals(function)
        if isinstance(result, Verdict) and trial == 1 and borrowed_names:
            return failed(question, f"with other sizes your function failed ({result.message}): it reads the "
                                    f"notebook's {', '.join(borrowed_names)}; use only its arguments")
        if isinstance(result, Verdict):
            probed = _offset_probe(function) if result.answered else None
            if probed is not None:
                return failed(question, f"{probed} ({result.message})")
            return result if trial == 0 else failed(question, f"with other sizes: {result.message}")
        got = array_answer(question, result, "the scores")
        if isinstance(got, Verdict):
            return got
        right = offset_score(weights, offset, queries)
        if same(got, right):
            continue
        if np.isnan(got).any():
            return failed(question, "some of your scores are NaN: a mean over no positions (an empty slice). Take "
                                    "the query positions from the `queries` argument, not from the lesson")
        t = queries
        every = np.arange(offset, T)

        def picked(keys: Any, rows: Any = t, weights: Floats = weights) -> Floats:
            values: Floats = weights[..., rows, keys].mean(axis=(0, 2))
            return values

        mistake = first_match(got, [
            (np.zeros(h), "every score is 0: those are keys after their query, which causal weights never reach; "
                          "index weights[..., query, key] (the query first) with key = query - offset"),
            (picked(t - offset + 1), "your key is one position too late (t - offset + 1): the key is t - offset"),
            (picked(t - offset - 1), "your key is one position too early (t - offset - 1): the key is t - offset"),
            (picked(every - offset, every), "you scored every query from position offset on: score only the query "
                                            "positions given in `queries`"),
            (weights[..., t, :][..., t - offset].mean(axis=(0, 2, 3)),
             "you paired every query with every key (a block of the map, not its diagonal): index with both arrays "
             "at once, weights[..., t, t - offset], to pick the pairs (t[i], t[i] - offset)"),
            (weights[0][:, t, t - offset].mean(axis=-1), "that is the first sequence only: average over the batch too"),
            (weights[..., t, t - offset].sum(axis=(0, 2)), "you summed: average over the batch and the positions"),
            (weights[..., t, t - offset].mean(axis=2), "keep one score per head: average over the batch as well"),
            (weights[..., t, t - offset].mean(axis=(0, 1)), "that averaged the heads away: keep the head axis "
                                                              "(axis 1) and average the batch and the positions"),
            (weights[..., t, t - offset].mean(), "one score per head, not one for all heads: keep the head axis"),
            (weights[..., t, t - offset].mean(axis=(1, 2)), "you kept the batch axis and averaged the heads away: "
                                                              "average axes 0 (batch) and 2 (positions), keep axis 1"),
            (weights[..., t, t - offset].mean(axis=0), "you averaged the batch only: average the positions too"),
            (weights[..., t, t - offset].mean(axis=1), "you averaged the heads away (axis 1): keep them, and "
                                                        "average the batch and the positions"),
        ])
        if mistake is None and borrowed_names:
            mistake = (f"your function reads the notebook's {', '.join(borrowed_names)}: use only its arguments "
                       "(weights, offset, queries), so that it fits any sizes")
        if mistake is None:
            mistake = _offset_probe(function)
        if mistake is None and got.shape != right.shape:
            mistake = f"expected one score per head, shape {right.shape}; yours has shape {got.shape}"
        if trial == 1:
            return failed(question, f"right for the first sizes, not with other sizes (T={T}, offset={offset}, "
                                    f"queries {a} .. {b - 1}): "
                                    f"{mistake or 'read every size from the arguments, not from the notebook'}")
        return failed(question, mistake or f"right shape {right.shape}, wrong numbers: average weights[b, head, t, "
                                           f"t - offset] over b and the given t (here offset={offset}, T={T})")
    return passed(question, "mean weight from each given query t to key t - offset, per head")


def _mean(values: Floats) -> float:
    """The mean, or NaN (matching nothing) for no values, without NumPy's empty-slice warning."""
    return float(values.mean()) if values.size else float("nan")


def check_double_ablation(answer: Any, model: InductionModel, tokens: Any, heads: list[tuple[int, int]]) -> Verdict:
    """Question "double ablation": the mean repeated-half loss (positions ``L .. 2L-2``) with every
    head in ``heads`` zeroed at once, on ``tokens (B, 2L)``.

    Accepts the loss rounded to `DOUBLE_ABLATION_DECIMALS` as the lesson prints it, and says when
    only precision is wrong. Recognises: only one of the heads zeroed, the same heads zeroed in
    another layer (layer 0), the single-head losses added, no head zeroed, the first half's loss,
    the repeated half started at ``L - 1``, the mean over every position, a sum over the positions,
    ``ln V``, and the model run on ``tokens[:, :-1]`` (one token short: `loss_per_position` drops the
    last token itself). Only a difference below `DOUBLE_ABLATION_ROUNDING` counts as a precision problem.
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
    if rounded_match(value, right, DOUBLE_ABLATION_DECIMALS):
        return passed(question, f"{right:.3f} nats with {len(heads)} heads zeroed together")
    singles = [float(loss_per_position(model, tokens, ablate=[pair])[L:].mean()) for pair in heads]
    intact = loss_per_position(model, tokens)
    candidates: list[tuple[Any, str]] = [
        (single, f"that is the loss with only layer {pair[0]}, head {pair[1]} zeroed: zero them together, in one "
                 "ablate list") for single, pair in zip(singles, heads, strict=True)
    ]
    other_layers = sorted({layer for layer, _ in heads} ^ {0, model.config.layers - 1})
    for layer in other_layers:  # the same head numbers in another layer: usually layer 0 for layer 1
        moved = [(layer, head) for _, head in heads]
        candidates.append((lambda moved=moved: float(loss_per_position(model, tokens, ablate=moved)[L:].mean()),
                           f"you zeroed heads {[head for _, head in moved]} of layer {layer}; the heads asked for are "
                           f"in layer {heads[0][0]} (layers are numbered from 0: layer 0 is the first)"))
    candidates += [
        (sum(singles), "you added the single-head losses; zero the heads together and measure once"),
        (float(intact[L:].mean()), "that is the loss with no head zeroed: pass the heads in ablate=[...]"),
        (float(both[:L].mean()), "that is the first half (positions 0 .. L-1); the repeated half is L .. 2L-2"),
        (float(both[L - 1 :].mean()), "you started at position L - 1, which predicts the repeat's first token from "
                                      "the first half: the repeated half is positions L .. 2L-2"),
        (float(both.mean()), "that is the mean over every position; take the repeated half, positions L .. 2L-2"),
        (float(both[L:].sum()), "you summed the losses over the positions: take their mean"),
        (float(np.log(model.config.vocab)), "that is ln V, the loss of a uniform guess: measure the loss instead"),
        (lambda: _mean(loss_per_position(model, tokens[:, :-1], ablate=heads)[L:]),
         "you passed tokens[:, :-1]: loss_per_position takes whole sequences and drops the last token itself, so the "
         "model read one token less and the last target was lost; pass tokens"),
    ]
    mistake = first_match(value, candidates)
    if mistake is None and abs(value - right) <= DOUBLE_ABLATION_ROUNDING:
        close = precision_problem(question, value, right, DOUBLE_ABLATION_DECIMALS)
        if close is not None:
            return close
    return failed(question, mistake or f"{value} is not it: zero the heads in one run of loss_per_position, then "
                                       "average positions L ..")


REPEAT_LOSS_TRIALS = [(3, 5, 7), (2, 4, 11)]  # (sequences n, run length L, vocabulary V): never the lesson's 12, 32


def _log_softmax(logits: Floats, axis: int = -1) -> Floats:
    shifted = logits - logits.max(axis=axis, keepdims=True)
    result: Floats = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return result


def _picked(log_p: Floats, targets: Any) -> Floats:
    """``log_p[b, t, targets[b, t]]`` for every ``b, t``."""
    values: Floats = np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    return values


LESSON_SIZES = (12, 23, 24, 32)  # L, 2L - 1, 2L and V of the lesson: written into a function, they break other sizes
HARD_CODED = ("take L from the arguments (L = tokens.shape[1] // 2) and V from the logits' last axis: the "
              "checker's sequences are shorter than the lesson's")


POSITIONS_NORMALISER = ("your softmax's normaliser sums over the positions (axis 1): a position's probabilities "
                        "sum to 1 over its V tokens, so sum the exponentials over the last axis (axis=-1, "
                        "keepdims=True)")
WINDOW_FROM_LOGITS = ("your window starts at position L - 1 and stops before 2L - 2: logits.shape[1] // 2 is "
                      "(2L - 1) // 2 = L - 1, not L; take L from tokens.shape[1] // 2, and the repeated half is "
                      "positions L .. 2L-2")


def _positions_normaliser(logits: Floats) -> Floats:
    """A log-softmax shifted by each position's largest logit but normalised over the positions (axis 1)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    result: Floats = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return result


def _written_sizes(function: Any) -> list[int]:
    """The lesson's sizes (`LESSON_SIZES`) that ``function``'s code (or code nested in it) writes as
    whole-number literals."""
    found: set[int] = set()
    pending = [getattr(function, "__code__", None)]
    while pending:
        code = pending.pop()
        if code is None:
            continue
        for constant in code.co_consts:
            if hasattr(constant, "co_consts"):
                pending.append(constant)
            elif type(constant) is int and constant in LESSON_SIZES:
                found.add(constant)
    return sorted(found)


def check_repeat_loss_function(function: Any) -> Verdict:
    """Question "repeated-half loss": ``function(logits, tokens) -> float``, the mean over the
    sequences and the positions ``t = L .. 2L-2`` of ``-ln softmax(logits[b, t])[tokens[b, t + 1]]``,
    for ``logits (n, 2L-1, V)`` and whole repeated sequences ``tokens (n, 2L)``.

    Tried on the checker's own random logits and repeated tokens (`REPEAT_LOSS_TRIALS`, sizes the
    notebook never holds). Recognises: a call of `induction.loss_per_position`, the token at ``t``
    instead of ``t + 1``, the softmax (or only its normaliser) over the positions, ``-p`` instead
    of ``-ln p``, the sign dropped, ``-ln`` of the mean probability, the top token's probability, a
    log in base 2 or 10, the repeated half started at ``L - 1`` (``L`` taken from the logits, also
    with the window's end written from that ``L``), every position, the first half, a sum over
    positions, one loss per position (or per sequence) instead of one number, the notebook's ``L``
    or ``V`` read instead of the arguments, and the lesson's sizes written into the function (an
    IndexError or a mean of nothing).
    """
    question = "repeated-half loss"
    borrowed = forbidden_call(question, function, "loss_per_position", "ablation_losses")
    if borrowed is not None:
        return borrowed
    rng = np.random.default_rng(8)
    for trial, (n, L, V) in enumerate(REPEAT_LOSS_TRIALS):
        run = np.stack([rng.permutation(V)[:L] for _ in range(n)])
        tokens = np.concatenate([run, run], axis=1)  # (n, 2L): the run, then the same run again
        logits = rng.normal(scale=2.0, size=(n, 2 * L - 1, V))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # e.g. the mean of an empty slice: judged below
            result = function_answer(question, function, (logits.copy(), tokens.copy()),
                                     "the body: return one number, the repeated half's mean loss")
        names = _notebook_globals(function)
        if isinstance(result, Verdict):
            if result.answered and "could not be broadcast" in result.message:
                return failed(question, "a shape error: a sum or max over the V logits lost its last axis; keep it "
                                        "with keepdims=True so that it lines up with the logits")
            if result.answered and names:
                return failed(question, f"your function failed on other sizes ({result.message}): it reads the "
                                        f"notebook's {', '.join(names)}; take L from tokens.shape[1] // 2")
            written = _written_sizes(function) if result.answered else []
            if written:
                return failed(question, f"your function failed on other sizes ({result.message}): it has the "
                                        f"lesson's {', '.join(map(str, written))} written in; {HARD_CODED}")
            return result if trial == 0 else failed(question, f"with other sizes: {result.message}")
        log_p = _log_softmax(logits)
        losses = -_picked(log_p, tokens[:, 1:])  # (n, 2L-1): position t predicts token t + 1
        right = float(losses[:, L:].mean())
        got = array_answer(question, result, "one number")
        if isinstance(got, Verdict):
            return got
        if got.size == 1 and same(float(got.reshape(-1)[0]), right):
            continue
        probs = np.exp(log_p)
        mistake = first_match(got, [
            (losses[:, L:].mean(axis=0), "you returned one loss per position: average over the positions too, "
                                         "to one number"),
            (losses[:, L:].mean(axis=1), "you returned one loss per sequence: average over the sequences too"),
            (losses[:, L:], "you returned every loss: average them to one number"),
            (float(-_picked(log_p, tokens[:, :-1])[:, L:].mean()),
             "you scored the token at position t itself: position t predicts the NEXT token, tokens[:, t + 1]"),
            (float(-_picked(_log_softmax(logits, axis=1), tokens[:, 1:])[:, L:].mean()),
             "your softmax runs over the positions (axis 1): it runs over the V tokens, the last axis"),
            (float(-_picked(_positions_normaliser(logits), tokens[:, 1:])[:, L:].mean()), POSITIONS_NORMALISER),
            (float(-_picked(probs, tokens[:, 1:])[:, L:].mean()), "you averaged -p: the loss is -ln p"),
            (float(_picked(log_p, tokens[:, 1:])[:, L:].mean()), "the sign: the loss is -ln p, a positive number"),
            (float(-np.log(_picked(probs, tokens[:, 1:])[:, L:].mean())),
             "you took -ln of the mean probability: average -ln p instead (section 2: the two differ)"),
            (float(-log_p.max(axis=-1)[:, L:].mean()), "that is the top token's -ln p: take the right token's, "
                                                       "tokens[:, t + 1]"),
            (float(losses[:, L - 1:].mean()), "you started at position L - 1, which predicts the repeat's first "
                                              "token: the repeated half is L .. 2L-2 (logits.shape[1] // 2 is "
                                              "(2L - 1) // 2 = L - 1: take L from tokens.shape[1] // 2)"),
            *[(float(losses[:, L - 1 : stop].mean()), WINDOW_FROM_LOGITS) for stop in (2 * L - 3, 2 * L - 2)],
            (right / math.log(2), "that is the loss in bits (log base 2): the loss is in nats, -ln p with the "
                                  "natural log, np.log"),
            (right / math.log(10), "that is log base 10: the loss is -ln p with the natural log, np.log"),
            (float(losses.mean()), "that is the mean over every position: keep the repeated half, L .. 2L-2"),
            (float(losses[:, :L].mean()), "that is the first half (positions 0 .. L-1): the repeated half is "
                                          "L .. 2L-2"),
            (float(losses[:, : L - 1].mean()), "that is the first half: the repeated half is positions L .. 2L-2"),
            (float(losses[:, L:].sum(axis=1).mean()), "you summed over the positions: take their mean"),
            (float(losses[:, L:].sum()), "you summed the losses: take their mean"),
        ])
        if mistake is None and names:
            mistake = (f"your function reads the notebook's {', '.join(names)}: take the sizes from its arguments "
                       "(L = tokens.shape[1] // 2)")
        written = _written_sizes(function)
        if mistake is None and written:
            mistake = f"your function has the lesson's {', '.join(map(str, written))} written in: {HARD_CODED}"
        if mistake is None and got.size == 1 and np.isnan(got).all():
            mistake = ("nan: a mean over nothing (an empty slice?) or a log of a negative number; the repeated "
                       f"half is positions L .. 2L-2, with {HARD_CODED}")
        if mistake is None and got.size != 1:
            mistake = f"expected one number, got an array of shape {got.shape}"
        if trial == 1:
            return failed(question, f"right for the first sizes, not with others (L={L}, V={V}): "
                                    f"{mistake or 'read L and V from the arguments, not from the notebook'}")
        return failed(question, mistake or f"{float(got.reshape(-1)[0]):.4f} is not it: average -ln p(token t + 1) "
                                           f"over the sequences and t = L .. 2L-2 (here L={L}, V={V})")
    return passed(question, "the mean of -ln p(next token) over the repeated half, from the logits")
