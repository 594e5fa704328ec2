"""Quick check of the lesson "One head" (checkers in ``lessons_lib.checks.one_head``): the scores,
the weights, the causal mask, the output, a whole attention function and cross-attention.

Each checker compares a learner's answer with the right one and with the mistakes people make
most often (no scale, the wrong axis, an inverted mask, ...), names a recognised mistake, and
otherwise gives the expected shape, never the solution. It never raises on a learner's answer
(NumPy arrays, nested lists or torch tensors). ``T`` query length, ``S`` source length, ``d``
query/key width, ``d_v`` value width.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    forbidden_call,
    function_answer,
    mask_answer,
    passed,
    reference_array,
    reference_mask,
    same,
    uses_name,
)
from lessons_lib.mha_numpy import attention, causal_mask, softmax

__all__ = [
    "check_attention_function", "check_causal_mask", "check_cross_attention", "check_output", "check_scores",
    "check_weights",
]

Floats = NDArray[np.float64]
NAN = "NaN: a softmax ran over a line with no allowed position (all -inf): the wrong axis or an inverted mask?"


def _unknown(layout: str, expected: tuple[int, ...], got: tuple[int, ...]) -> str:
    return f"expected shape {layout} = {expected}; yours has shape {got} and other values"


def _unscaled(q: Floats, k: Floats) -> Floats:
    return q @ np.swapaxes(k, -1, -2)  # (..., T, d) @ (..., d, S) -> (..., T, S)


def _mixed(scores: Floats, v: Floats, mask: Any = None, axis: int = -1) -> Floats:
    """softmax(scores with blocked entries at -inf) @ v: the right route or, with odd arguments, a mistake."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax(scores, axis=axis) @ v


def check_scores(answer: Any, q: Any, k: Any) -> Verdict:
    """Question "scores": the scaled scores of queries ``q (..., T, d)`` against keys ``k (..., S, d)``.

    Recognises: no scale, dividing by ``d``, multiplying by ``sqrt(d)``, ``k @ q.T`` (transposed,
    with or without the scale) and dividing by the square root of a length (``T`` or ``S``).
    """
    question = "scores"
    qf = reference_array("q", q, "(..., T, d)", min_rank=2)
    kf = reference_array("k", k, "(..., S, d)", min_rank=2)
    raw = _unscaled(qf, kf)
    a = array_answer(question, answer, f"the scaled scores, an array of shape (T, S) = {raw.shape}")
    if isinstance(a, Verdict):
        return a
    T, d = qf.shape[-2:]
    S = kf.shape[-2]
    if same(a, raw / math.sqrt(d)):
        return passed(question, f"scores = q @ k.T / sqrt(d) with d={d}; shape (T, S) = {raw.shape}")
    mistake = first_match(a, [
        (raw, f"you forgot the scale: these are the raw dot products, whose variance grows like d = {d}"),
        (lambda: raw / d, f"you divided by d = {d}: the spread of q·k grows like sqrt(d), not like d"),
        (lambda: raw * math.sqrt(d), "you multiplied by sqrt(d); the scale makes the scores smaller, not bigger"),
        (lambda: np.swapaxes(raw, -1, -2) / math.sqrt(d),
         f"transposed: yours is k @ q.T, shape (S, T); scores have one row per query, shape (T, S) = ({T}, {S})"),
        (lambda: np.swapaxes(raw, -1, -2), "you computed k @ q.T (one row per key) and forgot the scale"),
        (lambda: raw / math.sqrt(S), f"you divided by sqrt(S), a length; the scale uses the feature width d = {d}"),
        (lambda: raw / math.sqrt(T), f"you divided by sqrt(T), a length; the scale uses the feature width d = {d}"),
    ])
    if mistake is None and a.ndim == raw.ndim and a.shape != raw.shape and a.shape != (*raw.shape[:-2], S, T):
        mistake = (f"expected shape (T, S) = {raw.shape}, one row per query and one column per key, but yours is "
                   f"{a.shape}: are these the scores of other arrays (another lesson section's q and k) than the "
                   "ones the question names?")
    return failed(question, mistake or _unknown("(T, S)", raw.shape, a.shape))


def check_weights(answer: Any, scores: Any, allowed: Any = None) -> Verdict:
    """Question "weights": attention weights from ``scores (..., T, S)``, with an optional boolean
    mask ``allowed`` broadcastable to ``(..., T, S)`` (``True`` = may attend).

    Recognises: the query axis, the whole matrix at once, no ``exp``, ``exp`` without dividing,
    the scores unchanged; with a mask: the mask ignored, applied after the softmax without
    renormalising, blocked scores set to 0 instead of -inf, and the mask inverted.
    """
    question = "weights"
    sf = reference_array("scores", scores, "(..., T, S)", min_rank=2)
    mask = None if allowed is None else reference_mask("allowed", allowed, "(..., T, S)")
    a = array_answer(question, answer, f"the attention weights, an array of shape (T, S) = {sf.shape}")
    if isinstance(a, Verdict):
        return a
    keep = np.ones(sf.shape, dtype=bool) if mask is None else np.broadcast_to(mask, sf.shape)
    masked = np.where(keep, sf, -np.inf)
    if same(a, softmax(masked, axis=-1)):
        blocked = "" if mask is None else "; blocked positions get weight exactly 0"
        return passed(question, f"softmax over the source axis (axis=-1): every query's row sums to 1{blocked}")
    if np.isnan(a).any():
        with np.errstate(all="ignore"):  # NumPy's softmax by hand: an all -inf column gives NaN, as the learner's
            exps = np.exp(masked - masked.max(axis=-2, keepdims=True))
            by_column = exps / exps.sum(axis=-2, keepdims=True)
        if a.shape == sf.shape and np.array_equal(np.isnan(a), np.isnan(by_column)) and same(
            np.nan_to_num(a), np.nan_to_num(by_column)
        ):
            return failed(question, "your softmax ran over the query axis (axis 0 / -2): each column was normalised, "
                                    "and a blocked column (all -inf) gave NaN. A query shares its attention among "
                                    "the source positions: use axis=-1")
        return failed(question, f"your weights contain {NAN}")
    dropped = _dropped_columns(a, sf, keep)
    if dropped is not None:
        return failed(question, dropped)
    flat = masked.reshape(*sf.shape[:-2], -1)
    kept = np.where(keep, sf, 0.0)
    candidates: list[tuple[Any, str]] = [
        (lambda: softmax(masked, axis=-2),
         "you took the softmax over the query axis (axis 0 / -2), so each column sums to 1; a query "
         "shares its attention among the source positions: use axis=-1"),
        (lambda: softmax(flat, axis=-1).reshape(sf.shape),
         "you normalised the whole matrix at once (all entries sum to 1); each query's row is normalised on its own"),
        (lambda: kept / kept.sum(axis=-1, keepdims=True),
         "you divided the scores by their row sum without exponentiating; negative scores then give "
         "negative 'weights'. The softmax exponentiates first"),
        (lambda: np.exp(masked), "you exponentiated but did not divide by the row sum; the rows must sum to 1"),
        (sf, "these are the scores themselves; they still need the softmax"),
    ]
    if mask is not None:
        candidates += [
            (lambda: softmax(sf, axis=-1), "the mask is ignored: the blocked positions still get weight"),
            (lambda: softmax(sf, axis=-1) * keep,
             "you zeroed the blocked weights after the softmax, so the rows no longer sum to 1; mask the scores first"),
            (lambda: softmax(kept, axis=-1),
             "you set the blocked scores to 0, but exp(0) = 1 still gives them weight; a blocked score must be -inf"),
            (lambda: softmax(np.where(keep, -np.inf, sf), axis=-1),
             "inverted mask: each query attends exactly where it must not. True = may attend"),
        ]
    mistake = first_match(a, candidates)
    if mistake is None and a.shape == sf.shape and not same(a.sum(axis=-1), np.ones(sf.shape[:-1])):
        mistake = "your rows do not sum to 1: each query's weights must be a probability distribution"
    return failed(question, mistake or _unknown("(T, S)", sf.shape, a.shape))


def _dropped_columns(a: Floats, scores: Floats, keep: NDArray[np.bool_]) -> str | None:
    """The message for weights computed on the kept columns only (padding removed), or ``None``."""
    columns = keep.reshape(-1, keep.shape[-1])
    if not (columns == columns[:1]).all() or columns[0].all():  # not a padding mask: the same columns for all
        return None
    kept = scores[..., columns[0]]
    if a.shape != kept.shape or not same(a, softmax(kept, axis=-1)):
        return None
    return (f"you dropped the blocked positions, so your weights have {kept.shape[-1]} columns: keep all "
            f"S = {scores.shape[-1]} source positions and give the blocked ones weight exactly 0 (a score of -inf "
            "before the softmax)")


def _numeric_mask_mistake(a: NDArray[Any], expected: NDArray[np.bool_]) -> str:
    """What is wrong with a mask of numbers (not booleans)."""
    T, S = expected.shape
    mistake = first_match(a, [
        (np.where(expected, 0.0, -np.inf),
         "that is an additive mask (0 = attend, -inf = blocked); ours is a boolean mask, True = may attend"),
        (expected, f"right pattern, but dtype {a.dtype}: build a boolean mask (dtype=bool)"),
        (np.tril(np.ones((T, S)), k=0) if T < S else None,
         f"two things: dtype {a.dtype} instead of bool, and the triangle ignores the offset S - T = {S - T}"),
        (~expected, "inverted convention with numbers: 1 marks the blocked positions; use booleans, True = may attend"),
    ])
    return mistake or f"expected a boolean mask, got dtype {a.dtype}"


def check_causal_mask(answer: Any, T: int, S: int | None = None) -> Verdict:
    """Question "mask": the boolean causal mask ``(T, S)``, ``True`` = may attend, for ``T`` queries
    that are the last ``T`` of ``S`` positions (query ``t`` sees positions ``0 .. S - T + t``).

    Recognises: the top-left triangle that ignores the offset ``S - T``, the inverted convention
    (``True`` = blocked), the strict upper triangle, an additive mask of 0 / -inf, the right or
    offset-less pattern as 0/1 numbers, ``(S, T)``, the transposed triangle, a missing diagonal, no mask.
    """
    question = "mask"
    expected = causal_mask(T, S)
    T, S = expected.shape
    offset = S - T
    a = mask_answer(question, answer, f"a boolean array of shape (T, S) = {expected.shape}")
    if isinstance(a, Verdict):
        return a
    if a.shape != expected.shape:
        flipped = " (rows are queries, columns are source positions)" if a.shape == (S, T) else ""
        return failed(question, f"expected shape (T, S) = {expected.shape}, got {a.shape}{flipped}")
    if a.dtype != np.bool_:
        return failed(question, _numeric_mask_mistake(a, expected))
    if same(a, expected):
        return passed(question, f"query t sits at position {offset} + t and may attend to every position up to its own")
    ones = np.ones((T, S), dtype=bool)
    mistake = first_match(a, [
        (np.tril(ones) if offset else None,
         f"you built the top-left triangle, which ignores the offset: the queries are the LAST {T} of "
         f"{S} positions, so query 0 is position {offset} and may see positions 0..{offset}"),
        (~expected,
         "inverted convention: your True marks the blocked (future) positions. In our library True = may attend"),
        (np.triu(ones, k=1) if offset else None,
         f"two things: True marks the blocked positions (inverted convention), and the triangle ignores the offset "
         f"S - T = {offset}"),
        (np.tril(ones, k=-offset) if offset else None,
         f"the offset has the wrong sign: k = T - S = {-offset} moves the triangle down; query t sits at position "
         f"S - T + t = {offset} + t, so the triangle moves up: k = S - T"),
        (np.tril(ones, k=offset - 1),
         "you excluded the diagonal: a query may attend to its own position (otherwise the first has nothing to see)"),
        (expected.T if offset == 0 else None,
         "transposed: row t (a query) must allow the past, the lower triangle; your upper triangle shows the future"),
        (ones, "everything is allowed, so nothing is masked; causal means no future"),
    ])
    return failed(question, mistake or f"expected query t to see positions 0 .. S - T + t (here S - T = {offset})")


def check_output(answer: Any, q: Any, k: Any, v: Any, allowed: Any = None) -> Verdict:
    """Question "output": the attention output ``(..., T, d_v)`` of ``q (..., T, d)``,
    ``k (..., S, d)``, ``v (..., S, d_v)`` with an optional boolean mask (``True`` = may attend).

    Recognises: NaN (an empty row), the weights instead of the output, no scale, scaling by
    ``d``, softmax over the query axis, ``weights.T @ v``, the mask ignored or inverted.
    """
    question = "output"
    qf = reference_array("q", q, "(..., T, d)", min_rank=2)
    kf = reference_array("k", k, "(..., S, d)", min_rank=2)
    vf = reference_array("v", v, "(..., S, d_v)", min_rank=2)
    mask = None if allowed is None else reference_mask("allowed", allowed, "(..., T, S)")
    expected, weights = attention(qf, kf, vf, mask)
    a = array_answer(question, answer, f"the attention output, an array of shape (T, d_v) = {expected.shape}")
    if isinstance(a, Verdict):
        return a
    if same(a, expected):
        return passed(question, f"one weighted mixture of the values per query, shape {expected.shape}")
    if np.isnan(a).any():
        return failed(question, f"your output contains {NAN}")
    d = qf.shape[-1]
    raw = _unscaled(qf, kf)
    candidates: list[tuple[Any, str]] = [
        (weights, "these are the attention weights (T, S); the output mixes the values with them"),
        (lambda: _mixed(raw, vf, mask), f"you forgot the scale 1/sqrt(d) (d={d}) on the scores"),
        (lambda: _mixed(raw / d, vf, mask), "you scaled the scores by 1/d instead of 1/sqrt(d)"),
        (lambda: _mixed(raw / math.sqrt(d), vf, mask, axis=-2),
         "your softmax ran over the query axis; it must run over the source axis (axis=-1)"),
        (lambda: np.swapaxes(weights, -1, -2) @ vf, "you used weights.T @ v; the weights are already (T, S)"),
    ]
    if mask is not None:
        candidates += [
            (lambda: _mixed(raw / math.sqrt(d), vf), "the mask was not applied: blocked scores must be -inf"),
            (lambda: _mixed(raw / math.sqrt(d), vf, ~mask),
             "inverted mask: each query attends exactly where it must not. True = may attend"),
        ]
    mistake = first_match(a, candidates)
    return failed(question, mistake or _unknown("(T, d_v)", expected.shape, a.shape))


LATER = "right for T = S = 5, d = 4, but not for T = 2, S = 6, d = 3, d_v = 4"
BORROWED = ("your function calls my_attention, the lesson's finished head, which is what this exercise asks you to "
            "write: build it from NumPy operations yourself (a softmax helper is fine)")
# Widths the lesson's arrays have (q, k of section 1 and the Quick check): a scale copied from them
# is right only when the arguments happen to have that width.
LESSON_WIDTHS = (4,)


def _attention_mistake(out: Floats, w: Floats, q: Floats, k: Floats, v: Floats) -> str | None:
    """The verdict on one returned ``(output, weights)`` pair: ``None`` if both are right."""
    expected_out, expected_w = attention(q, k, v)
    if same(out, expected_out) and same(w, expected_w):
        return None
    if same(out, expected_w) and same(w, expected_out):
        return "you returned (weights, output); return the output first, then the weights"
    d = q.shape[-1]
    raw = _unscaled(q, k)
    weight_mistakes: list[tuple[Any, str]] = [
        (lambda: softmax(raw), f"the weights have no scale: the scores must be divided by sqrt(d) = sqrt({d})"),
        (lambda: softmax(raw / d), f"you divided the scores by d = {d} instead of sqrt(d)"),
        (lambda: softmax(raw / math.sqrt(d), axis=-2),
         "your softmax runs over the query axis: each column sums to 1; each query's row must sum to 1 (axis=-1)"),
        (lambda: softmax(raw.T / math.sqrt(d)), "your scores are k @ q.T (a row per key); scores have a row per query"),
        (lambda: softmax(raw.T), "your scores are k @ q.T (one row per key) and unscaled"),
        (lambda: softmax(raw / math.sqrt(k.shape[0])), "you divided by sqrt(S), a length; the scale uses the width d"),
        (lambda: softmax(raw / math.sqrt(q.shape[0])), "you divided by sqrt(T), a length; the scale uses the width d"),
        *((lambda width=width: softmax(raw / math.sqrt(width)),
           f"d hard-coded: you divided by sqrt({width}), the notebook's width, but these q and k have d = {d}: "
           "read d from q.shape[-1]") for width in LESSON_WIDTHS if width != d),
    ]
    if not same(w, expected_w):
        return first_match(w, weight_mistakes) or f"the weights are wrong: expected shape (T, S) = {expected_w.shape}"
    output_mistake = first_match(out, [
        (expected_w, "your output is the weights: they are not applied to v yet"),
        (v, "your output is v itself: the weights are not applied to it"),
        (lambda: expected_w.T @ v, "you used weights.T @ v; the weights are already (T, S)"),
        (lambda: raw / math.sqrt(d) @ v, "you mixed the values with the scores, not with the weights (after softmax)"),
    ])
    return output_mistake or f"weights right, output wrong: {_unknown('(T, d_v)', expected_out.shape, out.shape)}"


def check_attention_function(function: Any) -> Verdict:
    """Question "attention function": ``function(q, k, v) -> (output (T, d_v), weights (T, S))``,
    written from the steps (not by calling a finished attention), tried on two sets of inputs:
    self-attention ``T = S = 5, d = 4, d_v = 2``, then cross-attention ``T = 2, S = 6, d = 3, d_v = 4``.

    Recognises: a call of a finished attention (the library's, refused by the shared `forbidden_call`,
    or the lesson's ``my_attention``), one array instead of a pair, the pair swapped, no scale,
    scaling by ``d``, ``sqrt(S)`` or ``sqrt(T)``, a width hard-coded from the notebook, the wrong
    softmax axis, ``k @ q.T``, the weights not applied to ``v``, ``weights.T @ v``, and code that
    works only for the first shapes.
    """
    question = "attention function"
    refused = forbidden_call(question, function, "attention", "scaled_dot_product_attention")
    if refused is not None:  # mha_numpy's attention or torch's
        return refused
    if uses_name(function, "my_attention", home=None):  # the lesson's own finished head (not a library function)
        return failed(question, BORROWED)
    rng = np.random.default_rng(11)
    problems = [
        (rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))),
        (rng.normal(size=(2, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 4))),
    ]
    for trial, (q, k, v) in enumerate(problems):
        what = "the body: return (output, weights), shapes (T, d_v) and (T, S)"
        result = function_answer(question, function, (q.copy(), k.copy(), v.copy()), what)
        if isinstance(result, Verdict):
            return result if trial == 0 else failed(question, f"{LATER}: {result.message}")
        if isinstance(result, (tuple, list)) and len(result) != 2:
            return failed(question, f"return a pair (output, weights); yours has {len(result)} items")
        if not isinstance(result, (tuple, list)):
            alone = same(result, attention(q, k, v)[0])
            return failed(question, "right output, but return the pair (output, weights)" if alone
                          else "return a pair (output, weights), not a single value")
        out = array_answer(question, result[0], "the output")
        w = array_answer(question, result[1], "the weights")
        if isinstance(out, Verdict) or isinstance(w, Verdict):
            return failed(question, "the pair must hold two arrays of numbers, (output, weights)")
        mistake = _attention_mistake(out, w, q, k, v)
        if mistake is not None and trial == 1:
            mistake = f"{LATER}: {mistake}. Read sizes from the arguments, not from the notebook"
        if mistake is not None:
            return failed(question, mistake)
    return passed(question, "scaled scores, softmax over the source axis, weights @ v: right for self and cross")


def check_cross_attention(answer: Any, asking: Any, read: Any, w_q: Any, w_k: Any, w_v: Any) -> Verdict:
    """Question "cross-attention": the output when the stream ``asking (T, D)`` reads the stream
    ``read (S, D)``, with the projections ``w_q, w_k, w_v (D, D)``; shape ``(T, D)``.

    Recognises: the other direction, self-attention of either stream, no projections, the weights.
    """
    question = "cross-attention"
    ask = reference_array("asking", asking, "(T, D)", rank=2)
    src = reference_array("read", read, "(S, D)", rank=2)
    wq, wk, wv = (reference_array(n, w, "(D, D)", rank=2) for n, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)))
    D = ask.shape[1]
    if src.shape[1] != D or any(w.shape != (D, D) for w in (wq, wk, wv)):
        raise ValueError(
            f"asking (T, D) and read (S, D) must share D, and w_q, w_k, w_v must be (D, D) = ({D}, {D}); got "
            f"asking {ask.shape}, read {src.shape}, w_q {wq.shape}, w_k {wk.shape}, w_v {wv.shape}"
        )
    a = array_answer(question, answer, "the cross-attention output, an array with one row per query")
    if isinstance(a, Verdict):
        return a
    expected, weights = attention(ask @ wq, src @ wk, src @ wv)
    if same(a, expected):
        return passed(question, f"queries from the stream that asks, keys and values from the other: {expected.shape}")
    mistake = first_match(a, [
        (lambda: attention(src @ wq, ask @ wk, ask @ wv)[0],
         "that is the other direction: queries come from the stream that asks, keys and values from the one it reads"),
        (lambda: attention(ask @ wq, ask @ wk, ask @ wv)[0],
         "that is self-attention of the asking stream: its keys and values must come from the stream it reads"),
        (lambda: attention(src @ wq, src @ wk, src @ wv)[0], "that is self-attention of the stream being read"),
        (lambda: attention(ask, src, src)[0], "you skipped the projections w_q, w_k, w_v"),
        (weights, "these are the attention weights; the question asks for the output"),
    ])
    if mistake is None and a.shape == expected.shape:
        mistake = "right shape, other values: check which stream gives queries, keys and values, and each projection"
    return failed(question, mistake or f"expected one row per query of the asking stream; yours has shape {a.shape}")
