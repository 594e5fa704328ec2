"""Quick check of the lesson "Matching PyTorch": one checker per exercise.

Each compares the learner's answer with the right one and, when it is wrong, names the mistake
this lesson warns about that it equals; a "not yet" message never spells out the solution.

- `check_mha_mask`: the boolean ``attn_mask`` of ``nn.MultiheadAttention``; ``allowed`` itself, a
  transposed mask, an anti-causal or top-left causal one, a square ``(T, T)`` one for a ``(T, S)``
  question, a ``(1, T, S)`` or ``(B * h, T, S)`` one, float masks (inverted additive, 0/1 numbers,
  NaN from ``0 * -inf``; a right additive mask is refused too: the question asks for booleans, as
  the key padding question does).
- `check_key_padding_function`: a function ``(lengths, S) -> (B, S)`` that builds
  ``key_padding_mask`` from per-sequence lengths, tried on the lesson's batch and on one of its own
  (a mask typed by hand serves one batch only); the inverted convention, a ``(B, T)`` mask, a
  transposed one, an off-by-one, 0/1 numbers or floats.
- `check_float_mask`: the additive mask from ``allowed`` (``(T, S)``), or from ``allowed`` and the
  context lengths together (``(B, 1, T, S)``, for SDPA); 1/0 or 0/1 numbers, the sign flipped, -inf
  where allowed, NaN from ``(~allowed) * -inf``, an anti-causal mask, one of the two parts missing,
  a ``(B, T, S)`` mask that meets the heads axis, a ``(1, B, T, S)`` one (batch and heads swapped),
  a ``(B, T, 1, S)`` one (heads axis misplaced), the whole mask inverted (-inf where allowed), a
  boolean, a float16 mask that SDPA refuses with the lesson's float64 queries. A finite penalty is
  judged by its effect in the mask's own dtype: it passes when ``exp`` sends a blocked key's weight to
  exactly 0 (saying only that it blocks: a row blocked everywhere is a later Predict) and is refused,
  with the weight it leaves, when it does not.
- `check_cached_causal_mha`: a function that calls ``nn.MultiheadAttention`` so that it equals our
  causal layer for ``T`` new tokens after ``S - T`` cached ones (the
  bottom-right ``(T, S)`` mask over past and new together); the past left out, the top-left
  triangle, the order of past and new swapped, all ``S`` rows returned, sizes or a layer taken from
  the notebook instead of the arguments, a transposed mask, past and new joined on the wrong axis, a
  right mask that ``is_causal=True`` replaced on the SDPA path (``need_weights=False``), and the same
  hint beside the right mask on the softmax path (right by luck: the hint and the mask disagree).

Answers that PyTorch takes (masks) must be torch tensors when the lesson's own arrays are: given a
NumPy array, ``nn.MultiheadAttention`` and SDPA raise ``TypeError``. This module imports NumPy only
(the learner's ``nn.MultiheadAttention`` is read through its attributes and called, never imported).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    as_numpy,
    failed,
    first_match,
    function_answer,
    mask_answer,
    passed,
    reference_array,
    reference_mask,
    same,
    same_kind,
)
from lessons_lib.mha_numpy import causal_mask
from lessons_lib.validation import check_int

__all__ = [
    "BLOCKING_MARGIN",
    "check_cached_causal_mha",
    "check_float_mask",
    "check_key_padding_function",
    "check_mha_mask",
]

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]

# A finite penalty is judged by what it does, in the mask's own dtype: it blocks when a blocked key
# gets weight exactly 0 even if its score is this much above an allowed key's, i.e. when
# exp(penalty + BLOCKING_MARGIN) underflows to 0 (float64: below about -765; float32: about -124).
BLOCKING_MARGIN = 20.0

NAN_MASK = (
    "your mask holds NaN: 0 * -inf is NaN, not 0, so multiplying a boolean or 0/1 mask by -inf puts NaN "
    "wherever the mask is 0, and NaN + score makes those outputs NaN; put -inf only where attention is "
    "blocked and 0 elsewhere (section 7)"
)
FLOAT_NOT_BOOL = "the question asks for a boolean mask, and this is a float additive one"
NUMPY_MASK = (
    "it is a NumPy array, and {argument} takes a torch tensor: given an array it raises TypeError "
    "(\"argument ... must be Tensor, not numpy.ndarray\"); build it from the lesson's tensors, or convert it "
    "with torch.from_numpy"
)


def _torch_only(question: str, verdict: Verdict, answer: Any, reference: Any, argument: str) -> Verdict:
    """A right mask handed in as a NumPy array, where the lesson's own arrays are tensors, is refused:
    PyTorch would not take it."""
    if verdict.ok and isinstance(answer, np.ndarray) and hasattr(reference, "detach"):
        return failed(question, "the pattern is right, but " + NUMPY_MASK.format(argument=argument))
    return verdict


def _shape_message(shape: tuple[int, ...], T: int, S: int) -> str:
    """What a mask of the wrong shape for a ``(T, S)`` question most likely is."""
    if T != S and shape == (T, T):
        return (f"a square (T, T) = {(T, T)} mask: here T = {T} queries attend to S = {S} keys "
                f"(cross-attention), so the mask needs one row per query and one column per key, "
                f"(T, S) = {(T, S)}")
    if T != S and shape == (S, T):
        return f"shape (S, T) = {(S, T)}: rows are queries (T) and columns are keys (S), (T, S) = {(T, S)}"
    return f"expected shape (T, S) = {(T, S)}, got {shape}"


def _stacked_message(answer: NDArray[Any], blocked: Bools) -> str | None:
    """What a boolean ``(N, T, S)`` mask is when the question asks for ``(T, S)``: a leading axis of
    size 1, or the ``(B * h, T, S)`` form that nn.MultiheadAttention also takes; ``None`` otherwise."""
    T, S = blocked.shape
    if answer.ndim != 3 or answer.shape[1:] != (T, S):
        return None
    pattern = ("every (T, S) slice is the right mask" if all(same(part, blocked) for part in answer)
               else "not every (T, S) slice is the right mask")
    if answer.shape[0] == 1:
        return (f"shape (1, T, S) = {answer.shape}: an extra leading axis of size 1 ({pattern}); the question asks "
                f"for the (T, S) = {(T, S)} mask itself, without [None]")
    return (f"shape (N, T, S) = {answer.shape}: a (B * h, T, S) mask, one per sequence and head, is also valid for "
            f"nn.MultiheadAttention ({pattern}), but this question asks for the single (T, S) = {(T, S)} mask that "
            "serves every sequence and head")


def _causal_variants(allowed: Bools, *, blocked: bool = False) -> list[tuple[Bools, str]]:
    """Masks in our convention (True = may attend) that a learner builds instead of a causal ``allowed``:
    anti-causal (the past blocked, the future allowed) and, when T != S, SDPA's top-left triangle.
    Empty when ``allowed`` is not our bottom-right causal mask."""
    T, S = allowed.shape
    if T > S or not np.array_equal(allowed, causal_mask(T, S)):
        return []
    rows, cols = np.indices((T, S))
    how = "tril and triu swapped, or the comparison turned round" + (", or the mask transposed" if T == S else "")
    variants = [(cols >= rows + (S - T),
                 f"anti-causal: this mask lets each query see itself and the positions after it and blocks the "
                 f"past ({how}); causal attention sees the past (sections 3 and 4)")]
    if T != S:
        form = ("your mask blocks triu(ones(T, S), diagonal=1), the blocked side of SDPA's is_causal triangle, so"
                if blocked else "this is SDPA's is_causal triangle, tril(ones(T, S)), where")
        variants.append((cols <= rows,
                         f"top-left alignment: {form} query t sees positions 0..t; allowed treats the T queries "
                         "as the last T of the S positions (bottom-right, section 4)"))
    return variants


# ----- the boolean attn_mask of nn.MultiheadAttention ------------------------------------------
def check_mha_mask(attn_mask: Any, allowed: Any) -> Verdict:
    """Question "nn.MultiheadAttention mask": ``attn_mask`` from ``allowed (T, S)`` (True = may attend)."""
    question = "nn.MultiheadAttention mask"
    allowed_mask = reference_mask("allowed", allowed, "(T, S)", rank=2)
    answer = mask_answer(question, attn_mask, "a boolean (T, S) mask in nn.MultiheadAttention's convention")
    if isinstance(answer, Verdict):
        return answer
    verdict = _mha_mask_verdict(question, answer, allowed_mask)
    return _torch_only(question, verdict, attn_mask, allowed, "nn.MultiheadAttention(attn_mask=...)")


def _mha_mask_verdict(question: str, answer: NDArray[Any], allowed_mask: Bools) -> Verdict:
    T, S = allowed_mask.shape
    blocked = ~allowed_mask
    if answer.dtype.kind == "f":
        verdict = _additive_verdict(
            question, answer, allowed_mask,
            mistakes=[(blocked, "inverted additive mask: this -inf sits where attention is allowed, so it blocks "
                                "the wrong positions")],
            shape_message=lambda shape: _shape_message(shape, T, S),
            right="right pattern",
            generic="a float mask is added to the scores: 0 keeps a score, -inf blocks it",
        )
        if verdict.ok:  # one policy for every boolean question of this lesson: a float mask is not a boolean
            return failed(question, f"{FLOAT_NOT_BOOL} (nn.MultiheadAttention would add it to the scores, and "
                                    "this one blocks the right keys); store the boolean mask, True = blocked")
        return verdict
    if answer.dtype != np.bool_:
        return failed(question, f"expected a boolean mask or a float additive mask, got dtype {answer.dtype}")
    if same(answer, blocked):
        return passed(question, "~allowed: nn.MultiheadAttention reads True as blocked, the opposite of SDPA")
    mistake = first_match(answer, [
        (allowed_mask,
         "inverted convention: you passed allowed itself (True = may attend), but nn.MultiheadAttention "
         "reads True as blocked, so it would block exactly the positions you meant to allow"),
        # before .T: for T = S
        *[(~variant, message) for variant, message in _causal_variants(allowed_mask, blocked=True)],
        (blocked.T, "the mask is transposed: rows are queries (T) and columns are source positions (S)"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if answer.shape != blocked.shape:
        return failed(question, _stacked_message(answer, blocked) or _shape_message(answer.shape, T, S))
    return failed(question, "right shape, wrong pattern: this mask does not block exactly what allowed forbids")


# ----- float masks: what a penalty does, judged in the mask's own dtype ---------------------------
def _number(value: float) -> str:
    """A penalty as people write it: -10, -65504, -1e9 (not -1e+09)."""
    return format(value, "g").replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def _penalty_problem(penalty: float, dtype: np.dtype[Any]) -> str | None:
    """Why a finite negative ``penalty`` does not block exactly in ``dtype``, or ``None`` if it does."""
    name, p = dtype.name, _number(penalty)
    with np.errstate(all="ignore"):
        level = np.asarray(penalty, dtype=dtype)
        same_score = float(np.exp(level))  # a blocked key against an allowed key of the same score
        higher = float(np.exp(level + np.asarray(BLOCKING_MARGIN, dtype=dtype)))
    if same_score > 0:
        return (f"a penalty of {p} only lowers those scores: a blocked key keeps some weight, "
                f"exp({p}) = {same_score:.1g} of an allowed key's with the same score in {name}; a "
                f"penalty blocks only where its exp is exactly 0 in the mask's dtype")
    if higher > 0:
        return (f"a penalty of {p} blocks only while the scores are close: exp({p}) is 0 in "
                f"{name}, but a blocked key that scores {BLOCKING_MARGIN:g} above an allowed one keeps a weight "
                f"of about {higher:.1g}; a penalty must stay far below any difference of scores")
    return None


def _penalty_caveat(penalty: float, dtype: np.dtype[Any]) -> str:
    """The verdict on a penalty that blocks: it says only that it blocks (what it does to a row blocked
    everywhere is a later Predict of the lesson, not the checker's to tell)."""
    return (f"right pattern: the penalty of {_number(penalty)} blocks these keys (their weight is exactly 0 in "
            f"{dtype.name})")


def _additive_verdict(question: str, answer: NDArray[Any], may_attend: Bools, *,
                      mistakes: list[tuple[Bools, str]], shape_message: Callable[[tuple[int, ...]], str],
                      right: str, generic: str) -> Verdict:
    """A float mask is added to the scores: 0 where ``may_attend``, elsewhere -inf or a penalty that
    sends the weight to exactly 0. ``mistakes`` are patterns of may-attend (where the answer is 0)
    that name a wrong mask; a pattern is compared only with an answer of its own shape."""
    dtype = answer.dtype if answer.dtype.kind == "f" else np.dtype(np.float64)
    values = answer.astype(dtype)
    if np.isnan(values).any():
        return failed(question, NAN_MASK)
    if np.isposinf(values).any():
        return failed(question, "the sign is flipped: +inf makes a blocked score infinitely large, and the softmax "
                                "returns NaN")
    if (values == 1).any() and np.isin(values, (0.0, 1.0)).all():
        return failed(question, "a float mask is added to the scores, it is not a switch: these 0s and 1s only raise "
                                "some scores by 1 and block nothing")
    if (values > 0).any():
        return failed(question, "positive numbers raise those scores (a bias towards those keys) and block "
                                "nothing; blocking takes a number so negative that its exp is 0, or -inf")
    keeps = values == 0  # where the answer keeps the score; everywhere else it lowers it
    if keeps.shape == may_attend.shape and np.array_equal(keeps, may_attend):
        penalties = values[~may_attend]
        finite = penalties[np.isfinite(penalties)]
        if finite.size == 0:
            return passed(question, right)
        mildest = float(finite.max())
        problem = _penalty_problem(mildest, dtype)
        return failed(question, problem) if problem else passed(question, _penalty_caveat(mildest, dtype))
    for pattern, message in mistakes:
        if pattern.shape == keeps.shape and np.array_equal(keeps, pattern):
            return failed(question, message)
    if keeps.shape != may_attend.shape:
        return failed(question, shape_message(keeps.shape))
    return failed(question, generic)


# ----- key_padding_mask from lengths -------------------------------------------------------------
def _lengths(lengths: Any, S: int) -> NDArray[np.int64]:
    sizes = as_numpy(lengths)
    if not (sizes.ndim == 1 and sizes.dtype.kind in "iu") or not ((0 <= sizes) & (sizes <= S)).all():
        raise ValueError(f"lengths must be a 1-D integer array with entries in 0 .. S = {S}, got {lengths!r}")
    return sizes.astype(np.int64)


def _padding_verdict(question: str, answer: NDArray[Any], sizes: NDArray[np.int64], S: int, T: int | None) -> Verdict:
    B = sizes.shape[0]
    expected = np.arange(S)[None, :] >= sizes[:, None]  # (B, S): position s of sequence b is padding
    if answer.dtype == np.bool_ and same(answer, expected):
        return passed(question, f"(B, S) = {expected.shape}, True at each sequence's padding keys: nobody reads them")
    numbers = answer.dtype != np.bool_
    candidates: list[tuple[Any, str]] = [
        (~expected,
         "inverted convention: your True marks the real tokens, but key_padding_mask reads True as "
         "padding (blocked), like the boolean attn_mask of nn.MultiheadAttention"),
        (expected.T, f"the mask is transposed, (S, B) = {expected.T.shape}: one row per sequence, one column per key"),
        (np.arange(S)[None, :] > sizes[:, None],
         "off by one: position lengths[b] is the first padding position of sequence b, not its last real token"),
        (np.arange(S)[None, :] >= sizes[:, None] - 1,
         "off by one: the last real token (position lengths[b] - 1) is marked as padding"),
    ]
    if T is not None and T != S:
        query_mask = np.arange(T)[None, :] >= sizes[:, None]
        over_queries = (
            f"shape (B, T) = {(B, T)}: the mask covers the keys (the S source positions), not the queries, "
            f"so it must be (B, S) = {(B, S)}"
        )
        candidates += [(query_mask, over_queries), (~query_mask, over_queries)]
    as_bools = answer.astype(bool) if numbers and set(np.unique(answer).tolist()) <= {0, 1} else answer
    mistake = first_match(as_bools, candidates)
    if numbers:
        if same(as_bools, expected):
            mistake = "the pattern is right"
        pattern = f" ({mistake})" if mistake else ""
        return failed(question, f"expected booleans, got dtype {answer.dtype}{pattern}: a comparison gives booleans")
    if mistake is not None:
        return failed(question, mistake)
    if answer.shape != expected.shape:
        return failed(question, f"expected shape (B, S) = {expected.shape}, got {answer.shape}")
    for b, (row, length) in enumerate(zip(answer, sizes.tolist(), strict=True)):
        start = int(np.argmax(row)) if row.any() else S  # where this row's padding would start
        if not np.array_equal(row, expected[b]) and np.array_equal(row, np.arange(S) >= start):
            marks = f"marks padding from position {start} on" if start < S else "marks no padding at all"
            return failed(question, f"right shape, wrong lengths: row {b} {marks}, but sequence {b} has "
                                    f"lengths[{b}] = {length} real tokens: take the lengths from the lengths "
                                    "tensor, not from an earlier example")
    return failed(question, "right shape, wrong pattern: this mask does not mark exactly the padding positions")


def check_key_padding_function(function: Any, lengths: Any, S: int, T: int | None = None) -> Verdict:
    """Question "key padding mask": ``function(lengths, S)`` returns the boolean ``(B, S)``
    ``key_padding_mask`` (True = padding) for real lengths ``lengths (B,)`` padded to ``S``.

    Tried on the lesson's ``lengths`` and ``S``, then on lengths and an ``S`` of the checker's own
    (another batch size, one sequence of full length, one of length 1), of the kind ``lengths`` is,
    so a mask typed by hand or sizes taken from the notebook are named.
    """
    question = "key padding mask"
    S = check_int("S", S, low=1)
    sizes = _lengths(lengths, S)
    what = "the body: return the boolean (B, S) key_padding_mask for these lengths, True = padding"
    other_S = S + 1
    other = np.array([1, other_S, max(1, other_S // 2)], dtype=np.int64)  # B = 3, lengths the lesson does not hold
    other_lengths = (lengths.new_tensor(other) if hasattr(lengths, "new_tensor")
                     else other.astype(as_numpy(lengths).dtype))  # the kind of lengths the lesson holds
    verdict = lesson = failed(question, "no input tried")
    for given, size, length_array, queries in ((lengths, S, sizes, T), (other_lengths, other_S, other, None)):
        result = function_answer(question, function, (given, size), what)
        if isinstance(result, Verdict):
            verdict = result
        else:
            answer = mask_answer(question, result, "a boolean (B, S) mask, True = padding")
            verdict = answer if isinstance(answer, Verdict) else _torch_only(
                question, _padding_verdict(question, answer, length_array, size, queries), result, given,
                "nn.MultiheadAttention(key_padding_mask=...)")
        if verdict.ok:
            lesson = verdict if given is lengths else lesson
            continue
        if given is lengths:
            return verdict
        return failed(question, f"right for the lesson's lengths {sizes.tolist()} and S = {S}, but not for lengths "
                                f"{other.tolist()} and S = {other_S} ({verdict.message}): compute the mask from the "
                                "lengths and S the function is given, so that it serves any batch")
    return lesson  # the lesson's sizes, the ones the learner sees (the other batch passed too)


# ----- the float (additive) mask -----------------------------------------------------------------
def check_float_mask(mask: Any, allowed: Any, lengths: Any = None) -> Verdict:
    """Question "float mask": the additive mask for ``allowed (T, S)`` (True = may attend).

    Without ``lengths``: a ``(T, S)`` mask. With ``lengths (B,)`` (the real lengths of the ``B``
    context sequences, padded to ``S``): a ``(B, 1, T, S)`` mask for SDPA that also blocks each
    sequence's padding keys; its axis of size 1 broadcasts over the heads.
    """
    question = "float mask"
    allowed_mask = reference_mask("allowed", allowed, "(T, S)", rank=2)
    T, S = allowed_mask.shape
    layout = "(T, S)" if lengths is None else "(B, 1, T, S)"
    answer = mask_answer(question, mask, f"a float {layout} mask that is added to the scores")
    if isinstance(answer, Verdict):
        return answer
    if answer.dtype == np.bool_:
        return failed(question, "this is a boolean mask; the question asks for floats that are added to the scores")
    if lengths is None:
        verdict = _additive_verdict(
            question, answer, allowed_mask, mistakes=_float_mistakes(allowed_mask),
            shape_message=lambda shape: _shape_message(shape, T, S),
            right="0 keeps a score, -inf sends its weight to exactly 0",
            generic="right shape, wrong pattern: these numbers do not keep the allowed scores (0) and block the "
                    "others",
        )
    else:
        sizes = _lengths(lengths, S)
        generic = ("right shape, wrong pattern: these numbers do not keep exactly the allowed positions that are "
                   "real tokens of each sequence (0) and block the others")
        verdict = _additive_verdict(
            question, answer, _padded(allowed_mask, sizes), mistakes=_padded_mistakes(allowed_mask, sizes),
            shape_message=lambda shape: _padded_shape_message(shape, len(sizes), T, S),
            right="(B, 1, T, S): each query keeps the allowed scores of its own sequence's real tokens, -inf "
                  "sends the rest to exactly 0, and the axis of size 1 broadcasts over the heads",
            generic=generic,
        )
        other = _other_lengths(answer, allowed_mask, sizes) if verdict.message == generic else None
        verdict = verdict if other is None else failed(question, other)
        half = _half_dtype(mask)
        if verdict.ok and half is not None:
            verdict = failed(question, HALF_MASK.format(dtype=half))
    return _torch_only(question, verdict, mask, allowed, "scaled_dot_product_attention(attn_mask=...)")


HALF_MASK = (
    "the pattern is right, but the mask is {dtype}: SDPA takes a float mask only in float32 or in the queries' "
    "dtype, and with the lesson's float64 queries it raises RuntimeError (\"Expected attn_mask dtype to be bool or "
    "float or to match query dtype\"); build it in float64 (or float32)"
)


def _half_dtype(mask: Any) -> str | None:
    """``"float16"`` or ``"bfloat16"`` when ``mask`` is stored in half precision, else ``None``."""
    name = str(getattr(mask, "dtype", "")).removeprefix("torch.")
    return name if name in ("float16", "bfloat16", "half") else None


def _float_mistakes(allowed: Bools) -> list[tuple[Bools, str]]:
    """Patterns (where the answer keeps the score) of wrong ``(T, S)`` float masks."""
    T, S = allowed.shape
    found = [
        (~allowed, "inverted: this -inf sits where attention is allowed, so it blocks exactly the wrong positions"),
        (allowed.T, "the mask is transposed: rows are queries (T), columns keys (S)"),
        *_causal_variants(allowed),
    ]
    if T != S and np.array_equal(allowed, causal_mask(T, S)):
        found.append((causal_mask(T), _shape_message((T, T), T, S)))
    return found


def _padded(allowed: Bools, sizes: NDArray[np.int64]) -> Bools:
    """``(B, 1, T, S)``: allowed by ``allowed (T, S)`` and a real token of sequence b."""
    real = np.arange(allowed.shape[1])[None, :] < sizes[:, None]  # (B, S)
    return allowed[None, None, :, :] & real[:, None, None, :]


def _other_lengths(answer: NDArray[Any], allowed: Bools, sizes: NDArray[np.int64]) -> str | None:
    """The diagnosis for a ``(B, 1, T, S)`` mask that is right but for other lengths (such as the padding
    typed by hand in section 6), or ``None``."""
    S = allowed.shape[1]
    with np.errstate(invalid="ignore"):
        keeps = answer == 0
    if keeps.shape != (len(sizes), 1, *allowed.shape) or np.isnan(answer.astype(np.float64)).any():
        return None
    found = []
    for b, length in enumerate(sizes.tolist()):
        matches = [n for n in range(S + 1) if np.array_equal(keeps[b, 0], allowed & (np.arange(S) < n))]
        if not matches:
            return None
        if length not in matches:
            found.append((b, matches[0], length))
    if not found:
        return None
    b, n, length = found[0]
    return (f"right shape, wrong lengths: sequence {b} is cut after {n} real tokens, but lengths[{b}] = {length}: "
            "take the padding from the lengths tensor, not from an earlier example")


def _padded_mistakes(allowed: Bools, sizes: NDArray[np.int64]) -> list[tuple[Bools, str]]:
    """Patterns of wrong combined masks, each at the shape a learner would hand it in."""
    B = sizes.shape[0]
    T, S = allowed.shape
    positions = np.arange(S)[None, :]
    real = positions < sizes[:, None]  # (B, S)
    causal_only = "only the causal part: each sequence's padding keys still get weight (the lengths are not used)"
    padding_only = ("only the padding part: nothing stops a query from reading the keys after its own position "
                    "(allowed is not used)")
    may_attend = _padded(allowed, sizes)  # (B, 1, T, S)
    found: list[tuple[Bools, str]] = [
        (~may_attend,
         "inverted: your 0s sit where attention is blocked and your -inf where it is allowed, so each query reads "
         "only the keys it must not read; 0 keeps a score and -inf blocks it, so the -inf goes where the "
         "combined boolean mask is False"),
        (np.swapaxes(may_attend, 0, 1), _swapped_axes_message(B, T, S)),
        (np.broadcast_to(allowed, (B, 1, T, S)), causal_only),
        (allowed, f"a (T, S) mask holds no padding: each sequence needs its own rows, (B, 1, T, S) = {(B, 1, T, S)}"),
        (np.broadcast_to(real[:, None, None, :], (B, 1, T, S)), padding_only),
        (real[:, None, None, :], padding_only),
        (real, padding_only),
        (np.broadcast_to(~allowed, (B, 1, T, S)) & real[:, None, None, :],
         "the causal part is inverted: allowed says True = may attend, so its False positions are the ones to block"),
        (allowed[None, None] & ~real[:, None, None, :],
         "the padding part is inverted: the positions from lengths[b] on are the padding to block"),
        (allowed[None, None] & (positions <= sizes[:, None])[:, None, None, :],
         "off by one: position lengths[b] is the first padding position of sequence b and must be blocked too"),
        (allowed[None, None] & (positions < sizes[:, None] - 1)[:, None, None, :],
         "off by one: the last real token (position lengths[b] - 1) is blocked as if it were padding"),
        (_padded(allowed, sizes)[:, 0],
         f"shape (B, T, S) = {(B, T, S)}: SDPA lines a mask up with its (B, h, T, S) scores from the right, so your "
         f"B axis would meet the heads axis h (and with B = h nothing warns you); give it a heads axis of size 1"),
    ]
    found += [(variant[None, None] & real[:, None, None, :], message) for variant, message in _causal_variants(allowed)]
    return found


def _swapped_axes_message(B: int, T: int, S: int) -> str:
    return (f"the batch and heads axes are swapped: shape (1, B, T, S) = {(1, B, T, S)} puts the sequences on the "
            f"second axis, where SDPA's scores (B, h, T, S) hold the heads, so sequence b's padding would block "
            f"head b of every sequence (and when B equals the number of heads nothing warns you); the axis of size 1 "
            f"is the second one, (B, 1, T, S) = {(B, 1, T, S)}")


def _padded_shape_message(shape: tuple[int, ...], B: int, T: int, S: int) -> str:
    if B != 1 and shape == (1, B, T, S):
        return _swapped_axes_message(B, T, S)
    if shape == (B, T, S):
        return (f"shape (B, T, S) = {shape}: SDPA lines a mask up with its (B, h, T, S) scores from the right, so "
                "your B axis would meet the heads axis h; give it a heads axis of size 1")
    if shape == (B, T, 1, S):
        return (f"shape (B, T, 1, S) = {shape}: the axis of size 1 is in the third place, so SDPA would line your "
                f"T axis up with its heads axis h and your 1 with its T queries; the heads axis is the second one, "
                f"(B, 1, T, S) = {(B, 1, T, S)}: index [:, None, :, :], not [:, :, None]")
    if len(shape) == 4 and shape[0] == B and shape[2:] == (T, S):
        return (f"shape {shape}: the second axis must have size 1, so that it broadcasts over any number of "
                f"heads, (B, 1, T, S) = {(B, 1, T, S)}")
    return f"expected shape (B, 1, T, S) = {(B, 1, T, S)}, got {shape}"


# ----- calling nn.MultiheadAttention like our causal layer ---------------------------------------
def _mha_weights(mha: Any) -> tuple[list[Floats], list[Floats | None], int]:
    """``[wq, wk, wv, wo]`` in NumPy's ``(in, out)`` layout, the biases, and the head count of ``mha``."""
    try:
        stacked = as_numpy(mha.in_proj_weight).astype(np.float64)  # (3D, D), (out, in)
        wo = as_numpy(mha.out_proj.weight).astype(np.float64).T  # (D, D) -> (in, out)
        in_bias, out_bias = getattr(mha, "in_proj_bias", None), getattr(mha.out_proj, "bias", None)
        heads = int(mha.num_heads)
    except (AttributeError, TypeError) as error:
        wanted = "an nn.MultiheadAttention with one in_proj_weight"
        raise TypeError(f"mha must be {wanted}, got {type(mha).__name__}") from error
    D = wo.shape[0]
    weights = [stacked[i * D : (i + 1) * D].T for i in range(3)] + [wo]
    biases: list[Floats | None] = [None] * 4
    if in_bias is not None:
        b = as_numpy(in_bias).astype(np.float64)
        biases[:3] = [b[i * D : (i + 1) * D] for i in range(3)]
    if out_bias is not None:
        biases[3] = as_numpy(out_bias).astype(np.float64)
    return weights, biases, heads


Layer = tuple[list[Floats], list[Floats | None], int]  # what _mha_weights reads: weights, biases, heads


def _attention(queries: Floats, sources: Floats, layer: Layer, allowed: Bools | None, empty_row: float) -> Floats:
    """The layer on ``queries (B, T, D)`` attending to ``sources (B, S, D)`` -> ``(B, T, D)``; a row
    with nothing allowed becomes ``empty_row`` (NaN or 0), as PyTorch's paths return it."""
    weights, biases, heads = layer
    (B, T, D), S = queries.shape, sources.shape[1]
    d_h = D // heads

    def project(i: int, x: Floats) -> Floats:
        y, bias = x @ weights[i], biases[i]
        return y if bias is None else y + bias

    q = project(0, queries).reshape(B, T, heads, d_h).transpose(0, 2, 1, 3)  # (B, h, T, d_h)
    k, v = (project(i, sources).reshape(B, S, heads, d_h).transpose(0, 2, 1, 3) for i in (1, 2))  # (B, h, S, d_h)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_h)  # (B, h, T, S)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    empty = np.isneginf(scores).all(axis=-1, keepdims=True)  # (B, h, T, 1): rows blocked everywhere
    exps = np.exp(scores - np.where(empty, 0.0, scores.max(axis=-1, keepdims=True)))
    heads_out = np.where(empty, empty_row, exps / np.where(empty, 1.0, exps.sum(axis=-1, keepdims=True))) @ v
    merged = heads_out.transpose(0, 2, 1, 3).reshape(B, T, D)
    out: Floats = merged @ weights[3]
    return out if biases[3] is None else out + biases[3]


def _same_with_nan(answer: Floats, expected: Floats) -> bool:
    """`same`, except that NaN matches NaN (a row that PyTorch returns as NaN)."""
    if answer.shape != expected.shape or not np.array_equal(np.isnan(answer), np.isnan(expected)):
        return False
    return same(np.nan_to_num(answer, nan=0.0), np.nan_to_num(expected, nan=0.0))


# ----- T new tokens after S - T cached ones ------------------------------------------------------
def _another_layer(mha: Any) -> Any:
    """A copy of ``mha`` with other weights (the input projection scaled by 1.5), or ``mha`` itself
    if it cannot be copied: a function that ignores the layer it is given gives itself away."""
    try:
        other = copy.deepcopy(mha)
        other.in_proj_weight.data.mul_(1.5)
    except Exception:  # not a torch module after all: keep the one given
        return mha
    return other


def check_cached_causal_mha(function: Any, mha: Any, past: Any, new: Any) -> Verdict:
    """Question "cached causal nn.MultiheadAttention": ``function(mha, past, new)`` returns the
    output ``(B, T, D)`` of ``mha`` for the ``T`` new tokens ``new (B, T, D)``, each attending
    causally to the ``S - T`` earlier tokens ``past (B, S - T, D)`` and to the new tokens up to
    itself: the last ``T`` rows of causal self-attention over all ``S`` tokens.

    Tried on the lesson's inputs, on the first ``T - 1`` new tokens, and on random inputs of the
    checker's own with another batch size, past and new length, through a copy of ``mha`` with
    other weights (same type and dtype as ``new``).
    """
    question = "cached causal nn.MultiheadAttention"
    past_x = reference_array("past", past, "(B, S - T, D)", rank=3)
    new_x = reference_array("new", new, "(B, T, D)", rank=3)
    layer = _mha_weights(mha)
    D = layer[0][0].shape[0]
    (B, P, _), T = past_x.shape, new_x.shape[1]
    if past_x.shape[0] != new_x.shape[0] or (past_x.shape[2], new_x.shape[2]) != (D, D) or P < 1 or T < 2:
        raise ValueError(f"past must be (B, S - T, D) and new (B, T, D) with one B, D = {D}, S - T >= 1 and T >= 2, "
                         f"got {past_x.shape} and {new_x.shape}")
    what = ("the body: call mha so that each new token attends to the past and to the new tokens up to itself, "
            "and return the output (B, T, D)")
    rng = np.random.default_rng(11)  # inputs the notebook does not hold
    own = [rng.normal(size=(B + 1, P + 1, D)), rng.normal(size=(B + 1, T + 1, D))]
    own_past, own_new = (new.new_tensor(a) if hasattr(new, "new_tensor") else a.astype(as_numpy(new).dtype)
                         for a in own)
    other = _another_layer(mha)
    trials = [(mha, past, new), (mha, past, new[:, :-1]), (other, own_past, own_new)]
    verdict = failed(question, "no input tried")
    for module, before, after in trials:
        result = function_answer(question, function, (module, before, after), what)
        before_x = reference_array("past", before, "(B, S - T, D)", rank=3)
        after_x = reference_array("new", after, "(B, T, D)", rank=3)
        verdict = _cached_verdict(question, result, before_x, after_x, _mha_weights(module))
        if verdict.ok:  # the right numbers: are they the right kind (a tensor of new's dtype)?
            kind = same_kind(question, result, after)
            verdict = verdict if kind is None else kind
        if verdict.ok:
            continue
        if module is mha and after is new:
            if not isinstance(result, Verdict) and verdict.message.startswith(TOP_LEFT):
                hint = _hint_replaced_mask(function, module, before, after)
                return verdict if hint is None else failed(question, hint)
            return verdict
        if module is not mha and not isinstance(result, Verdict) and _cached_verdict(
                question, result, before_x, after_x, layer).ok:
            return failed(question, "your function does not use the layer it is given: with another mha it "
                                    "returned the notebook's numbers; call the mha argument")
        sizes = f"(B, S - T, T) = {(before_x.shape[0], before_x.shape[1], after_x.shape[1])}"
        return failed(question, f"right for the lesson's (B, S - T, T) = {(B, P, T)} but not for {sizes} "
                                f"({verdict.message}): take every size from past and new, not from the lesson")
    how = _how_it_was_called(question, function, mha, past, new) if verdict.ok else None
    return verdict if how is None else how


def _how_it_was_called(question: str, function: Any, module: Any, past: Any, new: Any) -> Verdict | None:
    """A right output, judged by the call that gave it: an ``is_causal=True`` hint that disagrees with the
    mask is refused (right only because the softmax path ignores it), and attention over all S tokens
    sliced to its last T rows is named; ``None`` for the plain right call."""
    call = _call_arguments(function, module, past, new)
    if call is None:
        return None
    if call.get("is_causal") is True:
        return failed(question, "is_causal=True disagrees with your mask: the hint says top-left, tril(ones(T, S)), "
                                "your mask is bottom-right. The output is right only because need_weights=True "
                                "takes the softmax path, which ignores the hint; on the SDPA path "
                                "(need_weights=False) the hint wins and replaces your mask (section 4: the hint "
                                "and the mask must agree). Drop is_causal=True")
    T = new.shape[1]
    rows = getattr(call.get("query"), "shape", (0, T))[1]
    if rows != T:
        return passed(question, f"causal self-attention over all S = {rows} tokens, then its last T rows: the same "
                                f"numbers, though it computes {rows - T} rows only to throw them away (queries from "
                                "new alone, with the bottom-right (T, S) mask, give just the T rows)")
    return None


TOP_LEFT = "top-left alignment"


def _call_arguments(function: Any, module: Any, past: Any, new: Any) -> dict[str, Any] | None:
    """The keyword arguments (``attn_mask``, ``is_causal``, ``need_weights``, ...) of the first call of
    ``module`` inside ``function(module, past, new)``, read with a forward pre-hook; ``None`` if the
    module takes no hook or is never called."""
    seen: list[dict[str, Any]] = []
    names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights",
             "is_causal")  # nn.MultiheadAttention.forward's parameters, in order

    def record(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.append({**dict(zip(names, args, strict=False)), **kwargs})

    try:
        handle = module.register_forward_pre_hook(record, with_kwargs=True)
    except (AttributeError, TypeError):
        return None
    try:
        function(module, past, new)
    except Exception:  # the learner's code: it ran once already, so this is unlikely
        return None
    finally:
        handle.remove()
    return seen[0] if seen else None


def _hint_replaced_mask(function: Any, module: Any, past: Any, new: Any) -> str | None:
    """Why a call gave the top-left triangle when it passed ``is_causal=True``: on the SDPA path the
    hint replaces the mask (section 4). ``None`` when the call passed no such hint."""
    call = _call_arguments(function, module, past, new)
    if call is None or call.get("is_causal") is not True:
        return None
    T, S = new.shape[1], past.shape[1] + new.shape[1]
    mask, yours = call.get("attn_mask"), ""
    if mask is not None:
        try:
            given = as_numpy(mask)
        except (TypeError, ValueError):
            given = None
        blocked = ~causal_mask(T, S)
        if given is not None and given.shape == (T, S) and (
                np.array_equal(given, blocked) if given.dtype == np.bool_ else np.array_equal(given != 0, blocked)):
            yours = " (your mask itself is right)"
    return (f"is_causal=True replaced your mask{yours}: with need_weights=False (and no key_padding_mask) "
            "nn.MultiheadAttention takes the SDPA path, drops attn_mask and calls SDPA with is_causal=True, whose "
            "triangle is top-left, tril(ones(T, S)): query t sees positions 0..t, not the past and the new tokens "
            "up to itself (the trap of section 4, where the hint overrode the mask). Drop is_causal=True and let "
            "the bottom-right mask do the work")


def _cached_verdict(question: str, result: Any, past: Floats, new: Floats, layer: Layer) -> Verdict:
    if isinstance(result, Verdict):
        if "is_causal" in result.message:
            return failed(question, f"{result.message.rstrip('.')}. is_causal=True is only a hint: a mask is still "
                                    "needed")
        if "attn_mask" in result.message and "shape" in result.message:
            T, S = new.shape[1], past.shape[1] + new.shape[1]
            if f"Size([{S}, {T}])" in result.message:
                return failed(question, f"the mask is transposed, (S, T) = {(S, T)}: nn.MultiheadAttention wants one "
                                        f"row per new query and one column per key, past and new together, (T, S) = "
                                        f"{(T, S)}; build it in that orientation instead of turning it round with .T")
            return failed(question, f"{result.message.rstrip('.')}. The mask has one row per new query and one "
                                    "column per key, past and new together: (T, S)")
        joined = re.search(r"Sizes of tensors must match except in dimension (-?\d+)", result.message)
        if joined and joined.group(1) != "1":
            axis = "batch axis" if joined.group(1) == "0" else "feature axis"
            return failed(question, f"torch.cat(..., dim={joined.group(1)}) joins past and new along the {axis}, "
                                    "where their sizes must match; the earlier and the new tokens follow each other "
                                    "on the token axis, dim=1 of (B, tokens, D)")
        return result
    if isinstance(result, tuple):
        return failed(question, f"your function returned a tuple of {len(result)}; return the output (B, T, D) only")
    answer = array_answer(question, result, "the output")
    if isinstance(answer, Verdict):
        return answer
    heads = layer[2]
    (B, T, D), P = new.shape, past.shape[1]
    S = P + T
    everything = np.concatenate([past, new], axis=1)  # (B, S, D)
    rows, cols = np.indices((T, S))
    if _same_with_nan(answer, _attention(new, everything, layer, causal_mask(T, S), np.nan)):
        return passed(question, "the bottom-right (T, S) mask over past and new together: the new tokens get the "
                                "last T rows of causal attention over all S tokens")
    candidates: list[tuple[Callable[[], Floats], str]] = [
        (lambda: _attention(new, new, layer, causal_mask(T), np.nan),
         "the past is missing: the new tokens attend only to each other; the keys and values are the S - T past "
         "tokens and the T new ones together"),
        (lambda: _attention(new, everything, layer, None, np.nan),
         "no mask: each new token also sees the new tokens after it"),
        (lambda: _attention(new, everything, layer, cols <= rows, np.nan),
         f"{TOP_LEFT}: with tril(ones(T, S)) (SDPA's is_causal triangle) query t sees positions 0..t; "
         "the T new tokens are the last T of the S positions (bottom-right)"),
        (lambda: _attention(new, everything, layer, cols >= rows + (S - T), np.nan),
         "anti-causal: your mask blocks the past and lets each new token see itself and the tokens after it"),
        (lambda: _attention(new, everything, layer, cols < rows + (S - T), np.nan),
         "the diagonal is blocked: each new token may attend to itself too"),
        (lambda: _attention(new, np.concatenate([new, past], axis=1), layer, causal_mask(T, S), np.nan),
         "the order is swapped: on the token axis the past comes first, then the new tokens"),
    ]
    for empty_row in (np.nan, 0.0):
        row = "NaN" if np.isnan(empty_row) else "zeros"
        candidates.append((
            functools.partial(_attention, new, everything, layer, ~causal_mask(T, S), empty_row),
            f"inverted convention: the mask blocks what it should allow (the last new token, blocked everywhere, "
            f"came back as {row}); nn.MultiheadAttention reads True as blocked"))
    for expected, message in candidates:
        if _same_with_nan(answer, expected()):
            return failed(question, message)
    if answer.shape == (B, S, D):
        return failed(question, f"shape (B, S, D) = {answer.shape}: these are the outputs of all S positions; the "
                                "question asks for the T new tokens' rows only")
    if answer.shape in ((B, T, S), (B, heads, T, S)):
        return failed(question, f"shape {answer.shape} looks like the attention weights; return the output (B, T, D)")
    if answer.shape != (B, T, D):
        return failed(question, f"expected shape (B, T, D) = {(B, T, D)}, got {answer.shape}")
    if np.isnan(answer).any():
        return failed(question, "some rows are NaN: a new token is blocked everywhere")
    return failed(question, "right shape, wrong numbers: not the causal output of the new tokens over past and new "
                            "together")
