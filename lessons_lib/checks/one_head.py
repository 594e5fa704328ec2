"""Quick check of the lesson "One head" (checkers in ``lessons_lib.checks.one_head``): the scores
(of one sequence or a batch), the weights (with a mask, and a query that may attend to nothing), the
causal mask and a whole attention function (batched, masked).

Each checker compares a learner's answer with the right one and with the mistakes people make
most often (no scale, the wrong axis, an inverted mask, ``.T`` on a batch, ...), names a recognised
mistake, and otherwise says what is wrong (the shape, or "right shape, wrong numbers" and how they
differ), never the solution. It never raises on a learner's answer (NumPy arrays, nested lists or
torch tensors). ``B`` batch, ``T`` query length, ``S`` source length, ``d`` query/key width, ``d_v``
value width.
"""

from __future__ import annotations

import dis
import itertools
import math
import types
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    as_numpy,
    failed,
    first_match,
    forbidden_call,
    function_answer,
    mask_answer,
    passed,
    reference_array,
    reference_mask,
    same,
)
from lessons_lib.mha_numpy import attention, causal_mask, softmax

__all__ = [
    "check_attention_function", "check_causal_mask", "check_causal_mask_function", "check_scores", "check_weights",
]

Floats = NDArray[np.float64]
NAN = "NaN: a softmax ran over a line with no allowed position (all -inf): the wrong axis or an inverted mask?"


def _same_or_both_nan(a: Floats, b: Floats) -> bool:
    """Same shape, NaN in the same places, and the same numbers everywhere else."""
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    return same(np.nan_to_num(a), np.nan_to_num(b))


def _unknown(layout: str, expected: tuple[int, ...], got: tuple[int, ...]) -> str:
    if got == expected:
        return f"right shape {layout} = {expected}, wrong numbers"
    return f"expected shape {layout} = {expected}; yours has shape {got}"


def _unknown_weights(a: Floats, expected: Floats, layout: str = "(T, S)") -> str:
    """The fallback for weights of the right shape: what their rows look like next to the right ones."""
    if a.shape != expected.shape:
        return _unknown(layout, expected.shape, a.shape)
    sums, wanted = a.sum(axis=-1), expected.sum(axis=-1)  # wanted: 1, or 0 for a query with nothing allowed
    if not np.allclose(sums, wanted, atol=1e-6):
        if np.allclose(wanted, 1.0):
            return (f"right shape {layout} = {expected.shape}, wrong numbers: your rows sum to "
                    f"{float(sums.min()):.3g} .. {float(sums.max()):.3g}, not 1 each")
        where = tuple(int(i) for i in np.argwhere(~np.isclose(sums, wanted, atol=1e-6))[0])
        row = where[0] if len(where) == 1 else where
        return (f"right shape {layout} = {expected.shape}, wrong numbers: row {row} of yours sums to "
                f"{float(sums[where]):.3g}, not {float(wanted[where]):g} (each query that may attend somewhere "
                "sums to 1, a query with no allowed position to 0)")
    if (a < 0).any():
        return f"right shape {layout} = {expected.shape}, wrong numbers: some weights are negative"
    return (f"right shape {layout} = {expected.shape}, wrong numbers: your rows sum to 1 but favour other "
            "positions than softmax(q k^T / sqrt(d)) does")


def _unscaled(q: Floats, k: Floats) -> Floats:
    return q @ np.swapaxes(k, -1, -2)  # (..., T, d) @ (..., d, S) -> (..., T, S)


def _layout(ndim: int, last: str) -> str:
    """``(T, S)``, ``(B, T, S)`` or ``(..., T, S)`` for an array of ``ndim`` axes ending in ``last``."""
    return f"({last})" if ndim == 2 else f"(B, {last})" if ndim == 3 else f"(..., {last})"


def _other_sequences_keys(a: Any, q: Any, k: Any) -> str | None:
    """When every sequence's scores are its queries against the keys of some sequence, and not always
    its own: which sequence met whose keys (None otherwise)."""
    T, d = q.shape[-2:]
    S = k.shape[-2]
    flat_a, flat_q, flat_k = a.reshape(-1, T, S), q.reshape(-1, T, d), k.reshape(-1, S, d)
    partner = []
    for b in range(flat_q.shape[0]):
        found = [c for c in range(flat_k.shape[0]) if same(flat_a[b], flat_q[b] @ flat_k[c].T / math.sqrt(d))]
        if not found:
            return None
        partner.append(found[0])
    wrong = [(b, c) for b, c in enumerate(partner) if c != b]
    if not wrong:
        return None
    b, c = wrong[0]
    return (f"the queries of sequence {b} met the keys of sequence {c}: each sequence's queries must meet its own "
            "keys, so keep the batch axes of q and k in the same order and swap only the last two axes of k")


def check_scores(answer: Any, q: Any, k: Any) -> Verdict:
    """Question "scores": the scaled scores of queries ``q (..., T, d)`` against keys ``k (..., S, d)``.

    Recognises: no scale, dividing by ``d``, multiplying by ``sqrt(d)``, ``k @ q.T`` (transposed,
    with or without the scale), dividing by the square root of a length (``T`` or ``S``); for a batch
    also the first sequence only and every sequence's queries against every sequence's keys.
    """
    question = "scores"
    qf = reference_array("q", q, "(..., T, d)", min_rank=2)
    kf = reference_array("k", k, "(..., S, d)", min_rank=2)
    raw = _unscaled(qf, kf)
    layout = _layout(raw.ndim, "T, S")
    a = array_answer(question, answer, f"the scaled scores, an array of shape {layout} = {raw.shape}")
    if isinstance(a, Verdict):
        return a
    T, d = qf.shape[-2:]
    S = kf.shape[-2]
    if isinstance(answer, (list, tuple)) and raw.ndim > 2:  # a batch built by a loop
        numbers = "right numbers" if same(a, raw / math.sqrt(d)) else "a list"
        return failed(question, f"{numbers}, but a Python {type(answer).__name__}: the question asks for one NumPy "
                                "array, computed for every sequence at once (no loop over the batch, no .T)")
    if same(a, raw / math.sqrt(d)):
        how = "q @ k.T" if raw.ndim == 2 else "q @ (k with its last two axes swapped)"
        return passed(question, f"scores = {how} / sqrt(d) with d={d}; shape {layout} = {raw.shape}")
    batched = raw.ndim > 2
    candidates: list[tuple[Any, str]] = [
        (raw, f"you forgot the scale: these are the raw dot products, whose variance grows like d = {d}"),
        (lambda: raw / d, f"you divided by d = {d}: the spread of q·k grows like sqrt(d), not like d"),
        (lambda: raw * math.sqrt(d), "you multiplied by sqrt(d); the scale makes the scores smaller, not bigger"),
        (lambda: np.swapaxes(raw, -1, -2) / math.sqrt(d),
         f"transposed: yours is k @ q.T, shape {_layout(raw.ndim, 'S, T')} = {(*raw.shape[:-2], S, T)}; scores "
         f"have one row per query, shape {layout} = {raw.shape}"),
        (lambda: np.swapaxes(raw, -1, -2), "you computed k @ q.T (one row per key) and forgot the scale"),
        (lambda: softmax(raw / math.sqrt(d), axis=-1),
         "these are weights, not scores: your rows sum to 1, so a softmax ran. The question asks for the scaled "
         "scores, before any softmax"),
        (lambda: softmax(raw, axis=-1),
         "these are weights, not scores: your rows sum to 1, so a softmax ran (and the scale is missing). The "
         "question asks for the scaled scores, before any softmax"),
        (lambda: qf @ kf.reshape(*kf.shape[:-2], d, S) / math.sqrt(d),
         f"you reshaped k to {_layout(raw.ndim, 'd, S')} = {(*kf.shape[:-2], d, S)}: a reshape keeps the numbers "
         "in their order and only cuts them differently, so it does not transpose. Swap the last two axes of k "
         "instead"),
        (lambda: raw / math.sqrt(S), f"you divided by sqrt(S), a length; the scale uses the feature width d = {d}"),
        (lambda: raw / math.sqrt(T),
         f"you divided by sqrt(T), a length; the scale uses the feature width d = {d}"
         + (": in a batch q.shape[1] is T, read d from q.shape[-1]" if raw.ndim == 3 else "")),
    ]
    if batched:
        first = raw.reshape(-1, T, S)[0]
        sequences = raw.reshape(-1, T, S).shape[0]
        flat_q, flat_k = qf.reshape(-1, T, d), kf.reshape(-1, S, d)
        for b in range(min(sequences, 4)):
            candidates += [
                (lambda b=b: (flat_q @ flat_k[b].T).reshape(raw.shape) / math.sqrt(d),
                 f"every sequence's queries met the keys of sequence {b} only (k[{b}]): each sequence's queries must "
                 "meet its own keys, so keep the batch axis of k and swap only its last two axes"),
                (lambda b=b: (flat_q[b] @ np.swapaxes(flat_k, -1, -2)).reshape(raw.shape) / math.sqrt(d),
                 f"the queries of sequence {b} only (q[{b}]) met every sequence's keys: each sequence's own queries "
                 "must meet its own keys"),
            ]
        candidates += [
            (lambda: first / math.sqrt(d),
             f"these are the scores of the first sequence only, shape (T, S) = {first.shape}: keep the batch axis "
             f"in front, one (T, S) table per sequence, shape {raw.shape}"),
            (lambda: np.tensordot(qf, kf, axes=([-1], [-1])) / math.sqrt(d),
             "you paired every sequence's queries with every sequence's keys (np.tensordot / np.dot over the "
             f"batch): your shape is (B, T, B, S); each sequence's queries meet only its own keys, shape {raw.shape}"),
            (lambda: np.tensordot(qf, kf, axes=([-1], [-1])),
             "you paired every sequence's queries with every sequence's keys (np.tensordot / np.dot over the "
             f"batch) and forgot the scale; each sequence's queries meet only its own keys, shape {raw.shape}"),
        ]
    mistake = first_match(a, candidates)
    if mistake is None and batched and a.shape == raw.shape:
        mistake = _other_sequences_keys(a, qf, kf)
    if mistake is None and batched and a.ndim == raw.ndim and a.shape != raw.shape:
        for order in itertools.permutations(range(raw.ndim)):
            if same(a, np.transpose(raw, order) / math.sqrt(d)):
                mistake = (f"right numbers, axes in another order: yours is {a.shape}, the scores are {layout} = "
                           f"{raw.shape} (the batch axis first, then one row per query)")
                break
    if mistake is None and a.ndim == raw.ndim and a.shape != raw.shape and a.shape != (*raw.shape[:-2], S, T):
        mistake = (f"expected shape {layout} = {raw.shape}, one row per query and one column per key, but yours is "
                   f"{a.shape}: are these the scores of other arrays (another lesson section's q and k) than the "
                   "ones the question names?")
    if mistake is None and a.shape == raw.shape:
        ratio = a / np.where(raw == 0, np.nan, raw)
        ratio = ratio[np.isfinite(ratio)]
        if ratio.size and np.allclose(ratio, ratio[0], rtol=1e-6):
            mistake = (f"right shape {layout} = {raw.shape}, wrong numbers: yours are the dot products times "
                       f"{float(ratio[0]):.4g}; the scale is 1/sqrt(d) = {1 / math.sqrt(d):.4g} with d = {d}")
    return failed(question, mistake or _unknown(layout, raw.shape, a.shape))


def _weights_or_zeros(scores: Floats, keep: NDArray[np.bool_], axis: int = -1) -> Floats:
    """The softmax of ``scores`` over the allowed entries along ``axis``; a line with none is all zeros."""
    empty = ~keep.any(axis=axis, keepdims=True)
    masked = np.where(keep, scores, -np.inf)
    safe = np.where(empty, 0.0, masked)  # an empty line: any finite numbers, zeroed below
    return np.where(empty, 0.0, softmax(safe, axis=axis))


def check_weights(answer: Any, scores: Any, allowed: Any = None) -> Verdict:
    """Question "weights": attention weights from ``scores (..., T, S)``, with an optional boolean
    mask ``allowed`` broadcastable to ``(..., T, S)`` (``True`` = may attend). A blocked position
    must get weight exactly 0 (checked before any tolerance); a query with no allowed position
    gets a row of zeros (no NaN).

    Recognises: the query axis, the whole matrix at once, no ``exp``, ``exp`` without dividing,
    the scores unchanged; with a mask: the mask ignored, applied after the softmax without
    renormalising, blocked scores set to 0 instead of -inf, a finite fill too small to give exactly
    0 (such as -20), the mask inverted; for a query with no allowed position: NaN, and the uniform
    row a finite fill (such as -1e9) gives.
    """
    question = "weights"
    sf = reference_array("scores", scores, "(..., T, S)", min_rank=2)
    mask = None if allowed is None else reference_mask("allowed", allowed, "(..., T, S)")
    layout = _layout(sf.ndim, "T, S")
    a = array_answer(question, answer, f"the attention weights, an array of shape {layout} = {sf.shape}")
    if isinstance(a, Verdict):
        return a
    keep = np.ones(sf.shape, dtype=bool) if mask is None else np.broadcast_to(mask, sf.shape)
    empty: NDArray[np.bool_] = np.asarray(~keep.any(axis=-1))  # (..., T): queries with no allowed position
    masked = np.where(keep, sf, -np.inf)
    expected = _weights_or_zeros(sf, keep)
    blocked_ok = a.shape != sf.shape or bool((a[~keep] == 0).all())
    if same(a, expected) and blocked_ok:
        blocked = "" if mask is None else "; blocked positions get weight exactly 0"
        nothing = "; a query with no allowed position gets a row of zeros" if empty.any() else ""
        each = "every query's row sums to 1"
        return passed(question, f"softmax over the source axis (axis=-1): {each}{blocked}{nothing}")
    if a.shape == sf.shape and not blocked_ok and np.isfinite(a).all():
        biggest = float(np.abs(a[~keep]).max())
        if biggest < 1e-3:
            return failed(question, f"the blocked positions get weights up to {biggest:.1e}, not exactly 0: a large "
                                    "negative score such as -20 only makes exp small. Use -inf (or a fill so "
                                    "negative that exp gives exactly 0)")
    if empty.any() and a.shape == sf.shape:
        rows = a[empty]
        if np.isnan(rows).any() and same(np.nan_to_num(a[~empty]), expected[~empty]):
            return failed(question, "right for every query that may attend somewhere, but a query with no allowed "
                                    "position gets NaN (exp(-inf - (-inf))): give that row zeros")
        if same(rows, np.full(rows.shape, 1.0 / sf.shape[-1])) and same(a[~empty], expected[~empty]):
            return failed(question, f"a query with no allowed position gets equal weights 1/S = 1/{sf.shape[-1]} "
                                    "(what a finite fill such as -1e9 gives when every score of the row is blocked): "
                                    "it then attends to positions it must not. Give that row zeros")
        if same(a[~empty], expected[~empty]):
            return failed(question, "right for every query that may attend somewhere, but the row of a query with no "
                                    "allowed position must be all zeros")
    if a.shape == sf.shape and _over_queries(a, masked, keep, expected):
        nan = ", and a column with nothing allowed (all -inf) gave NaN" if np.isnan(a).any() else ""
        return failed(question, f"your softmax runs over the query axis (axis 0 / -2): each column is normalised "
                                f"instead of each row{nan}. A query shares its attention among the source positions: "
                                "use axis=-1")
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
    if empty.any() and sf.ndim == 2 and a.shape == (int((~empty).sum()), sf.shape[-1]) and same(a, expected[~empty]):
        return failed(question, f"you dropped the row of the query with no allowed position: keep all T = "
                                f"{sf.shape[0]} rows, that one all zeros")
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
        (lambda: np.exp(masked) / np.exp(masked).sum(axis=-1),
         "you divided by the row sums without keepdims=True: the sums, shape (T,), were lined up with the last "
         "axis (the columns), so row t was not divided by its own sum. Keep the summed axis"),
        (lambda: np.exp(masked - masked.max(axis=-1)) / np.exp(masked - masked.max(axis=-1)).sum(axis=-1),
         "you took the max and the sum without keepdims=True: shape (T,) lines up with the columns, not the rows. "
         "Keep the reduced axis (keepdims=True)"),
        (sf, "these are the scores themselves; they still need the softmax"),
    ]
    if mask is not None:
        candidates += [
            (lambda: softmax(sf, axis=-1), "the mask is ignored: the blocked positions still get weight"),
            (lambda: softmax(sf, axis=-1) * keep,
             "you zeroed the blocked weights after the softmax, so the rows no longer sum to 1; mask the scores first"),
            (lambda: softmax(kept, axis=-1),
             "you set the blocked scores to 0, but exp(0) = 1 still gives them weight; a blocked score must be -inf"),
            (lambda: _weights_or_zeros(sf, ~keep),
             "inverted mask: each query attends exactly where it must not. True = may attend"),
        ]
    if mask is not None and empty.any():
        candidates.append((lambda: np.where(empty[..., None], 0.0, softmax(sf, axis=-1)),
                           "the padding mask is ignored: you zeroed the row of the query with no allowed position, "
                           "but the blocked positions of the other queries still get weight. Block them (-inf) "
                           "before the softmax"))
    mistake = first_match(a, candidates)
    if mistake is None and a.shape == sf.shape and np.isfinite(a).all():
        mistake = _blocked_weight(a, keep, empty) or _rescaled(a, sf, keep, empty)
    return failed(question, mistake or _unknown_weights(a, expected, layout))


def _over_queries(a: Floats, masked: Floats, keep: NDArray[np.bool_], expected: Floats) -> bool:
    """Whether ``a``, on every allowed entry of a column that has one, is the softmax over the query
    axis (columns normalised) rather than over the source axis; the other entries may be anything."""
    with np.errstate(all="ignore"):  # a column with nothing allowed: NaN, left out below
        exps = np.exp(masked - masked.max(axis=-2, keepdims=True))
        by_column = exps / exps.sum(axis=-2, keepdims=True)
    where = keep & np.isfinite(by_column)
    if not where.any() or not np.isfinite(a[where]).all():
        return False
    return same(a[where], by_column[where]) and not same(a[where], expected[where])


def _blocked_weight(a: Floats, keep: NDArray[np.bool_], empty: NDArray[np.bool_]) -> str | None:
    """The message for clear weight on a blocked position of a query that may attend somewhere, or ``None``."""
    leak = np.where(keep | empty[..., None], 0.0, np.abs(a))
    if float(leak.max()) <= 1e-3:
        return None
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(leak)), leak.shape))
    query, position = (where[0], where[1]) if len(where) == 2 else (where[:-1], where[-1])
    return (f"some blocked positions get weight (query {query}, position {position}: {float(a[where]):.3g}): the mask "
            "must apply to every query, so a blocked score becomes -inf before the softmax and its weight exactly 0")


def _rescaled(a: Floats, scores: Floats, keep: NDArray[np.bool_], empty: NDArray[np.bool_]) -> str | None:
    """The message for weights that are the softmax of the scores times a factor other than 1, or ``None``."""
    logs, values = [], []
    for index in np.ndindex(*scores.shape[:-1]):
        if empty[index]:
            continue
        row, allowed = a[index], keep[index]
        if (row[allowed] <= 0).any():
            return None
        logs.append(np.log(row[allowed]) - np.log(row[allowed]).mean())
        values.append(scores[index][allowed] - scores[index][allowed].mean())
    if not logs:
        return None
    x, y = np.concatenate(values), np.concatenate(logs)
    if float(x @ x) == 0.0:
        return None
    factor = float(x @ y) / float(x @ x)
    if abs(factor - 1.0) < 1e-3 or not np.allclose(y, factor * x, atol=1e-6):
        return None
    S, T = scores.shape[-1], scores.shape[-2]
    named = {1 / math.sqrt(S): f" = 1/sqrt(S) = 1/sqrt({S})", 1 / math.sqrt(T): f" = 1/sqrt(T) = 1/sqrt({T})",
             math.sqrt(S): f" = sqrt(S) = sqrt({S})", 1 / S: f" = 1/S = 1/{S}"}
    which = next((text for value, text in named.items() if math.isclose(factor, value, rel_tol=1e-4)), "")
    return (f"you rescaled the scores: your weights are the softmax of the scores times {factor:.4g}{which}. These "
            "scores are given ready for the softmax (any scale is already in them): take the softmax of them as given")


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


# (T, S) pairs a causal-mask function is tried on after the exercise's own sizes: several offsets
# S - T (0 included), none of them the notebook's T = 3, S = 5.
CAUSAL_MASK_TRIES = ((2, 6), (4, 4), (1, 3), (5, 8))


def check_causal_mask_function(function: Any, T: int = 3, S: int = 5) -> Verdict:
    """Question "causal mask function": ``function(T, S)`` must return the boolean causal mask
    ``(T, S)`` of `check_causal_mask` (``True`` = may attend, the queries are the last ``T`` of ``S``
    positions), built from NumPy operations, not by calling the library's ``causal_mask``.

    Tried first on the exercise's ``T, S``, then on `CAUSAL_MASK_TRIES`. Recognises what
    `check_causal_mask` recognises, plus a call of the library's ``causal_mask``, a mask of the same
    shape whatever the arguments (sizes hard-coded), and an offset hard-coded from the first sizes.
    """
    question = "causal mask function"
    causal_mask(T, S)  # the exercise's own sizes must make sense (0 < T <= S) before the learner's function runs
    refused = forbidden_call(question, function, "causal_mask")
    if refused is not None:
        return refused
    tries = [(T, S), *(size for size in CAUSAL_MASK_TRIES if size != (T, S))]
    done: list[str] = []
    for t, s in tries:
        what = f"(T, S) = ({t}, {s})"
        prefix = f"right for (T, S) = {', '.join(done)}, but not for {what}: " if done else f"for {what}: "
        what_to_write = "the body: return a boolean (T, S) mask, True = may attend"
        result = function_answer(question, function, (t, s), what_to_write)
        if isinstance(result, Verdict):
            if not result.answered or result.message.startswith("expected a function"):
                return result
            return failed(question, prefix + result.message)
        verdict = check_causal_mask(result, t, s)
        if verdict.ok:
            done.append(f"({t}, {s})")
            continue
        if not verdict.answered:
            return failed(question, prefix + "your function returned no mask: return the boolean (T, S) array")
        shape = np.shape(as_numpy(result)) if hasattr(result, "shape") or isinstance(result, list) else None
        if done and shape == (T, S):
            return failed(question, f"{prefix}your mask has shape {shape} whatever T and S are: the sizes of the "
                                    f"exercise are hard-coded. Build the mask from the arguments T and S")
        if done and same(result, np.tril(np.ones((t, s), dtype=bool), k=S - T)):
            return failed(question, f"{prefix}the offset is hard-coded: {S - T} is S - T only for T = {T}, S = {S}; "
                                    "compute it from the arguments T and S")
        return failed(question, prefix + verdict.message)
    return passed(question, "query t sits at position S - T + t and may attend to every position up to its own; "
                            f"right for (T, S) = {', '.join(done)}")


BORROWED = ("your function calls {name}, a finished attention that does the work this exercise asks you to write: "
            "build it from NumPy operations yourself (a softmax helper is fine)")
# Widths the lesson's arrays have (q, k of section 1 and the exercises): a scale copied from them
# is right only when the arguments happen to have that width.
LESSON_WIDTHS = (4,)
NO_MASK = ("with allowed=None every score became -inf (or NaN): apply the mask only when one is given "
           "(`if allowed is not None`)")


def _names_read(function: Any) -> list[tuple[str, str, Any]]:
    """``(kind, name, value)`` for every attribute (``kind`` "attr") and global (``"global"``) the
    function's code reads, nested functions included; ``value`` is the global's object (or None)."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType):
        return []
    namespace = dict(getattr(function, "__globals__", {}))
    found: list[tuple[str, str, Any]] = []
    stack = [code]
    for cell in getattr(function, "__closure__", None) or ():  # helpers the function closes over
        try:
            inner = getattr(cell.cell_contents, "__code__", None)
        except ValueError:  # an empty cell
            continue
        if isinstance(inner, types.CodeType):
            stack.append(inner)
    while stack:
        current = stack.pop()
        for step in dis.get_instructions(current):
            if step.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                found.append(("attr", str(step.argval), None))
            elif step.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                found.append(("global", str(step.argval), namespace.get(step.argval)))
        stack += [const for const in current.co_consts if isinstance(const, types.CodeType)]
    return found


def _borrowed(function: Any) -> str | None:
    """The name of a finished attention the function calls (any library function whose name says
    attention, or a private twin such as ``mha_numpy._attention``), or ``None``."""
    own = getattr(function, "__name__", "")
    for kind, name, value in _names_read(function):
        if "attention" not in name.lower() or name == own:
            continue
        if kind == "attr":
            return name
        module = str(getattr(value, "__module__", "") or "")
        if value is not None and not module.startswith("__main__"):
            return name
    return None


def _reads_dot_t(function: Any) -> bool:
    """Whether the function's code takes ``something.T`` (which reverses every axis of an array)."""
    return any(kind == "attr" and name == "T" for kind, name, _ in _names_read(function))


def _softmax_no_keepdims(x: Floats, kept: str) -> Floats:
    """A softmax whose max (``kept`` "sum" or "neither") or sum (``kept`` "max" or "neither") drops
    the reduced axis, so the ``(..., T)`` result lines up with the columns; ``"none"``: no max at all."""
    with np.errstate(all="ignore"):
        top = x.max(axis=-1, keepdims=kept in ("max", "sum"))
        e = np.exp(x) if kept == "none" else np.exp(x - (top if kept != "sum" else x.max(axis=-1)))
        out: Floats = e / e.sum(axis=-1, keepdims=kept == "sum")
    return out


def _attention_mistake(out: Floats, w: Floats, q: Floats, k: Floats, v: Floats, mask: Any, dot_t: bool) -> str | None:
    """The verdict on one returned ``(output, weights)`` pair: ``None`` if both are right."""
    expected_out, expected_w = (np.asarray(x, dtype=np.float64) for x in attention(q, k, v, mask))
    keep = np.ones(expected_w.shape, dtype=bool) if mask is None else np.broadcast_to(mask, expected_w.shape)
    exact = bool((w[~keep] == 0).all()) if w.shape == expected_w.shape else True
    raw_scaled = _unscaled(q, k) / math.sqrt(q.shape[-1])
    if same(out, expected_out) and same(w, expected_w) and exact:
        return None
    if same(out, expected_w) and same(w, expected_out):
        return "you returned (weights, output); return the output first, then the weights"
    if w.shape == expected_w.shape and not exact and np.isfinite(w).all() and float(np.abs(w[~keep]).max()) < 1e-3:
        return (f"the blocked positions get weights up to {float(np.abs(w[~keep]).max()):.1e}, not exactly 0: a "
                "large negative score such as -20 only makes exp small. Use -inf")
    if mask is not None and w.shape == expected_w.shape:
        with np.errstate(all="ignore"):  # an inverted mask can leave a query nothing: NaN, as the learner's softmax
            flipped = np.where(keep, -np.inf, raw_scaled)
            exps = np.exp(flipped - flipped.max(axis=-1, keepdims=True))
            inverted = exps / exps.sum(axis=-1, keepdims=True)
        if _same_or_both_nan(w, inverted) or same(w, _weights_or_zeros(raw_scaled, ~keep)):
            return ("inverted mask: your weights fall exactly where allowed is False, as np.where(allowed, -inf, "
                    "scores) gives (a query allowed everywhere is then left with nothing: NaN). True = may attend: "
                    "keep the score where allowed is True, -inf elsewhere")
    if np.isnan(w).any() and not np.isnan(expected_w).any():
        return ("your weights contain NaN where a query may attend: multiplying or adding -inf to a mask gives "
                "0 * -inf = NaN for the allowed entries too; pick between the score and -inf with np.where")
    d, d_v = q.shape[-1], v.shape[-1]
    raw = _unscaled(q, k)
    T, S = raw.shape[-2:]

    def soft(scores: Floats, axis: int = -1, blocked: Any = mask) -> Floats:
        weights = softmax(scores if blocked is None else np.where(blocked, scores, -np.inf), axis=axis)
        return np.asarray(weights, dtype=np.float64)

    weight_mistakes: list[tuple[Any, str]] = [
        (lambda: soft(raw), f"the weights have no scale: the scores must be divided by sqrt(d) = sqrt({d})"),
        (lambda: soft(raw / d), f"you divided the scores by d = {d} instead of sqrt(d)"),
        (lambda: soft(raw / math.sqrt(d_v)),
         f"you scaled by sqrt(d_v) = sqrt({d_v}), the width of the values; the scale is sqrt(d), d = {d} the width "
         "of q and k"),
        (lambda: soft(raw / math.sqrt(d), axis=-2),
         "your softmax runs over the query axis: each column sums to 1; each query's row must sum to 1 (axis=-1)"),
        (lambda: soft(raw / math.sqrt(d), axis=0) if raw.ndim > 2 else None,
         "your softmax runs over axis 0, which in a batch is the batch axis: the source axis is the last one "
         "(axis=-1)"),
        (lambda: soft(np.swapaxes(raw, -1, -2) / math.sqrt(d), blocked=None if mask is None else np.swapaxes(
            np.broadcast_to(mask, raw.shape), -1, -2)),
         "your scores are k @ q.T (a row per key); scores have a row per query"),
        (lambda: soft(raw / math.sqrt(S)), "you divided by sqrt(S), a length; the scale uses the width d"),
        (lambda: soft(raw / math.sqrt(q.shape[1])) if q.ndim > 2 else None,
         f"you divided by sqrt(q.shape[1]) = sqrt({q.shape[1] if q.ndim > 1 else 0}): in a batch axis 1 is not the "
         "width; read d from q.shape[-1]"),
        (lambda: soft(raw / math.sqrt(T)), "you divided by sqrt(T), a length; the scale uses the width d"),
        (lambda: soft(raw / math.sqrt(k.shape[0])) if k.ndim > 2 else None,
         "you divided by sqrt(k.shape[0]): in a batch axis 0 is the batch; read d from q.shape[-1]"),
        *((lambda width=width: soft(raw / math.sqrt(width)),
           f"d hard-coded: you divided by sqrt({width}), the notebook's width, but these q and k have d = {d}: "
           "read d from q.shape[-1]") for width in LESSON_WIDTHS if width != d),
        *((lambda kept=kept: _softmax_no_keepdims(np.where(keep, raw / math.sqrt(d), -np.inf), kept),
           f"your softmax reduces without keepdims=True ({what}): a (..., T) array of row results lines up with the "
           "last axis (the columns), so row t is not treated with its own max or sum. Keep the reduced axis")
          for kept, what in (("none", "the sum"), ("max", "the sum"), ("sum", "the max"), ("neither", "max and sum"))),
    ]
    if dot_t and raw.ndim > 2:
        reversed_k = np.transpose(k)  # what k.T gives: every axis reversed
        weight_mistakes.insert(0, (lambda: soft(q @ reversed_k / math.sqrt(d)),
                                   "k.T reverses EVERY axis of a batched array, so the scores mix sequences "
                                   "(and heads): swap only the last two axes, np.swapaxes(k, -1, -2)"))
    weight_mistakes += [
        (lambda: raw / math.sqrt(d), "your second item is the scores: return the weights (after the softmax)"),
        (lambda: np.where(keep, raw / math.sqrt(d), -np.inf),
         "your second item is the masked scores: return the weights (after the softmax)"),
    ]
    if mask is not None:
        scaled = raw / math.sqrt(d)
        weight_mistakes += [
            (lambda: softmax(scaled), "the mask is ignored: the blocked positions still get weight"),
            (lambda: softmax(scaled) * keep,
             "you zeroed the blocked weights after the softmax, so the rows no longer sum to 1; mask the scores first"),
            (lambda: softmax(np.where(keep, scaled, 0.0)),
             "blocked scores set to 0 (or multiplied by the mask): exp(0) = 1 still gives them weight; use -inf"),
            (lambda: softmax(np.where(keep, -np.inf, scaled)),
             "inverted mask: each query attends exactly where it must not. True = may attend"),
        ]
    if not (same(w, expected_w) and exact):
        mistake = first_match(w, weight_mistakes)
        if mistake is None and dot_t and raw.ndim > 2:
            mistake = ("k.T reverses EVERY axis of a batched array (not only the last two): swap only the last two "
                       "axes, np.swapaxes(k, -1, -2)")
        return mistake or f"the weights are wrong: {_unknown_weights(w, expected_w, _layout(raw.ndim, 'T, S'))}"
    output_mistake = first_match(out, [
        (expected_w, "your output is the weights: they are not applied to v yet"),
        (v, "your output is v itself: the weights are not applied to it"),
        (lambda: np.swapaxes(expected_w, -1, -2) @ v, "you used weights.T @ v; the weights are already (T, S)"),
        (lambda: raw / math.sqrt(d) @ v, "you mixed the values with the scores, not with the weights (after softmax)"),
        (lambda: v.mean(axis=-2, keepdims=True) + 0 * expected_out,
         "your output is the plain mean of the values: mix them with the weights"),
    ])
    layout = _layout(expected_out.ndim, "T, d_v")
    return output_mistake or f"weights right, output wrong: {_unknown(layout, expected_out.shape, out.shape)}"


def _trials() -> list[tuple[str, Floats, Floats, Floats, Any]]:
    """(what, q, k, v, allowed) for each try, from the easiest; the sizes are none the notebook holds
    and differ from each other, so a size or an axis read from the wrong place shows."""
    rng = np.random.default_rng(11)
    padding = np.ones((2, 1, 5), dtype=bool)
    padding[0, 0, 3:] = False  # sequence 0 has 2 padded positions, sequence 1 none
    return [
        ("2-D self-attention, T = S = 5, d = 4, d_v = 2, no mask",
         rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)), None),
        ("2-D cross-attention, T = 2, S = 6, d = 3, d_v = 5, causal mask (2, 6)",
         rng.normal(size=(2, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 5)), causal_mask(2, 6)),
        ("a batch, q (B, T, d) = (2, 3, 6), k (2, 5, 6), v (2, 5, 2), padding mask (B, 1, S) = (2, 1, 5)",
         rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 5, 6)), rng.normal(size=(2, 5, 2)), padding),
        ("4-D heads, q, k, v (B, h, T, d) = (4, 4, 4, 4), causal mask (T, S) = (4, 4)",
         rng.normal(size=(4, 4, 4, 4)), rng.normal(size=(4, 4, 4, 4)), rng.normal(size=(4, 4, 4, 4)),
         causal_mask(4)),
    ]


def _raised(error_text: str, trial: int, dot_t: bool, names_axes: bool = False) -> str:
    """A message for a function that raised on try ``trial`` (0-based); ``names_axes``: the function
    calls a ``transpose`` method (which may name every axis)."""
    if trial > 1 and "boolean index did not match" in error_text:
        return ("indexing the scores with the mask (scores[~allowed] = ...) needs a mask of exactly their shape, but "
                "a mask only has to broadcast to (..., T, S): use np.where, which broadcasts. "
                f"({error_text})")
    if "axes don't match" in error_text or (names_axes and "out of bounds for array of dimension" in error_text):
        return ("your transpose names every axis (such as k.transpose(0, 2, 1)): a fixed order of axes fits arrays "
                "of one number of axes only, and this try has another. Swap only the last two axes, whatever comes "
                f"before them: np.swapaxes(k, -1, -2). ({error_text})")
    if trial > 1 and dot_t:
        return ("k.T reverses EVERY axis of a batched array (not only the last two), so the shapes no longer fit: "
                f"swap only the last two axes, np.swapaxes(k, -1, -2). ({error_text})")
    if trial == 1 and "positional argument" in error_text:
        return f"add the optional mask parameter: attention(q, k, v, allowed=None). ({error_text})"
    if trial == 0 and "matmul" in error_text:
        return ("the scores' product does not fit: q is (T, d) and k is (S, d), so k must be turned into (d, S) "
                f"before q @ ... ({error_text})")
    if trial == 0 and ("all -inf" in error_text or "NoneType" in error_text):
        return f"{NO_MASK}. ({error_text})"
    if trial > 1 and "matmul" in error_text:
        return ("the shapes stop fitting once there is a batch axis: did you reverse every axis of k (k.T, "
                f"np.transpose(k))? Swap only the last two, np.swapaxes(k, -1, -2). ({error_text})")
    return f"your function raised {error_text}"


def check_attention_function(function: Any) -> Verdict:
    """Question "attention function": ``function(q, k, v, allowed=None) -> (output (..., T, d_v),
    weights (..., T, S))`` for ``q (..., T, d)``, ``k (..., S, d)``, ``v (..., S, d_v)`` with any
    leading (batch, head) axes and an optional boolean mask broadcastable to ``(..., T, S)``,
    written from the steps (not by calling a finished attention). Tried on `_trials`: 2-D without a
    mask, 2-D with a causal mask, a batch with a padding mask, then 4-D heads whose sizes are all 4
    (where ``k.T`` runs and gives wrong numbers).

    Recognises: a call of any finished attention (the library's, its private ``_attention``, torch's),
    one array instead of a pair, the pair swapped, no scale, scaling by ``d``, ``d_v``, ``sqrt(S)``,
    ``sqrt(T)`` or an axis that is not the width in a batch, a width hard-coded from the notebook,
    the softmax over the query or batch axis, a softmax without ``keepdims``, ``k @ q.T``, ``k.T``
    on a batch, a transpose that names every axis, no mask parameter, a mask applied when none is
    given, ignored, inverted, applied after the softmax, as 0 or as a finite fill such as -20, the
    weights not applied to ``v``, ``weights.T @ v``.
    """
    question = "attention function"
    refused = forbidden_call(question, function, "attention", "_attention", "scaled_dot_product_attention")
    if refused is not None:  # mha_numpy's attention or its private twin, or torch's
        return refused
    borrowed = _borrowed(function)
    if borrowed is not None:
        return failed(question, BORROWED.format(name=borrowed))
    dot_t = _reads_dot_t(function)
    passed_so_far = ""
    for trial, (what, q, k, v, mask) in enumerate(_trials()):
        args = (q.copy(), k.copy(), v.copy()) if mask is None else (q.copy(), k.copy(), v.copy(), mask.copy())
        text = "the body: return (output, weights), shapes (..., T, d_v) and (..., T, S)"
        with np.errstate(all="ignore"):
            result = function_answer(question, function, args, text)
        prefix = f"right for {passed_so_far}, but not for {what}: " if passed_so_far else f"for {what}: "
        if isinstance(result, Verdict):
            if not result.answered or result.message.startswith("expected a function"):
                return result
            error = result.message.removeprefix("your function raised ")
            names_axes = any(kind == "attr" and name == "transpose" for kind, name, _ in _names_read(function))
            return failed(question, prefix + _raised(error, trial, dot_t, names_axes))
        if isinstance(result, (tuple, list)) and len(result) != 2:
            return failed(question, f"return a pair (output, weights); yours has {len(result)} items")
        if not isinstance(result, (tuple, list)):
            alone = same(result, attention(q, k, v, mask)[0])
            return failed(question, "right output, but return the pair (output, weights)" if alone
                          else "return a pair (output, weights), not a single value")
        out = array_answer(question, result[0], "the output")
        w = array_answer(question, result[1], "the weights")
        if isinstance(out, Verdict) or isinstance(w, Verdict):
            return failed(question, "the pair must hold two arrays of numbers, (output, weights)")
        if trial == 0 and (np.isnan(w).all() or np.isnan(out).all()):
            return failed(question, prefix + NO_MASK)
        mistake = _attention_mistake(out, w, q, k, v, mask, dot_t)
        if mistake is not None:
            return failed(question, prefix + mistake)
        passed_so_far = what.split(",")[0]
    return passed(question, "scaled scores, softmax over the source axis, weights @ v: right without and with a "
                            "mask, for 2-D arrays, a batch and a batch of heads")


