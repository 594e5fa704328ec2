"""Quick check of the lesson "Matching PyTorch": one checker per exercise.

Each compares the learner's answer with the right one and, when it is wrong, names the mistake
this lesson warns about that it equals; a "not yet" message never spells out the solution.

- `check_mha_mask`: the ``attn_mask`` of ``nn.MultiheadAttention``; ``allowed`` itself, a transposed
  mask, an anti-causal or top-left causal one, float masks (inverted additive, 0/1 numbers, NaN from
  ``0 * -inf``).
- `check_key_padding_mask`: ``key_padding_mask (B, S)`` from per-sequence lengths; the inverted
  convention, a ``(B, T)`` mask, a transposed one, an off-by-one, 0/1 numbers.
- `check_float_mask`: the additive mask from ``allowed``; 1/0 or 0/1 numbers, the sign flipped,
  -inf where allowed, NaN from ``(~allowed) * -inf`` (``0 * -inf`` is NaN), an anti-causal mask, a
  penalty too small to block, a boolean. A large finite penalty (at most -1e9) passes, with the
  caveat that a row blocked everywhere then gets no NaN: it attends as if unmasked in float64 and
  takes the plain mean of the values in float32.
- `check_causal_mha`: a function that calls ``nn.MultiheadAttention`` so that it equals our causal
  layer; no mask, the mask not inverted, the diagonal blocked, an anti-causal mask, a tuple or the
  weights returned, a NumPy array returned, a mask built for one length only.

Answers may be NumPy arrays or torch tensors; this module imports NumPy only (the learner's
``nn.MultiheadAttention`` is read through its attributes and called, never imported).
"""

from __future__ import annotations

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

__all__ = ["LARGE_PENALTY", "check_causal_mha", "check_float_mask", "check_key_padding_mask", "check_mha_mask"]

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]

# A finite penalty this large blocks as well as -inf whenever a row has an allowed position:
# exp(score - 1e9) underflows to exactly 0 in float32 and float64 (and -1e9 rounds to -inf in float16).
LARGE_PENALTY = -1e9

LARGE_PENALTY_CAVEAT = (
    "a large finite penalty blocks as well as -inf here (exp underflows to 0), with one difference: a row "
    "blocked everywhere gets no NaN to warn you; in float64 it attends as if it had no mask, in float32 "
    "(-1e9 + score rounds to -1e9) it takes the plain mean of the values (section 7)"
)
NAN_MASK = (
    "your mask holds NaN: 0 * -inf is NaN, not 0, so multiplying a boolean or 0/1 mask by -inf puts NaN "
    "wherever the mask is 0, and NaN + score makes those outputs NaN; put -inf only where attention is "
    "blocked and 0 elsewhere (section 7)"
)


def _causal_variants(allowed: Bools) -> list[tuple[Bools, str]]:
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
        variants.append((cols <= rows,
                         "top-left alignment: this is SDPA's is_causal triangle, tril(ones(T, S)), where query t "
                         "sees positions 0..t; allowed treats the T queries as the last T of the S positions "
                         "(bottom-right, section 4)"))
    return variants


# ----- the boolean attn_mask of nn.MultiheadAttention ------------------------------------------
def check_mha_mask(attn_mask: Any, allowed: Any) -> Verdict:
    """Question "nn.MultiheadAttention mask": ``attn_mask`` from ``allowed (T, S)`` (True = may attend)."""
    question = "nn.MultiheadAttention mask"
    allowed_mask = reference_mask("allowed", allowed, "(T, S)", rank=2)
    answer = mask_answer(question, attn_mask, "a boolean (T, S) mask in nn.MultiheadAttention's convention")
    if isinstance(answer, Verdict):
        return answer
    blocked = ~allowed_mask
    if answer.dtype.kind == "f":
        return _check_additive_mask(question, answer, blocked)
    if answer.dtype != np.bool_:
        return failed(question, f"expected a boolean mask or a float additive mask, got dtype {answer.dtype}")
    if same(answer, blocked):
        return passed(question, "~allowed: nn.MultiheadAttention reads True as blocked, the opposite of SDPA")
    mistake = first_match(answer, [
        (allowed_mask,
         "inverted convention: you passed allowed itself (True = may attend), but nn.MultiheadAttention "
         "reads True as blocked, so it would block exactly the positions you meant to allow"),
        *[(~variant, message) for variant, message in _causal_variants(allowed_mask)],  # before .T: for T = S
        (blocked.T, "the mask is transposed: rows are queries (T) and columns are source positions (S)"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if answer.shape != blocked.shape:
        return failed(question, f"expected shape (T, S) = {blocked.shape}, got {answer.shape}")
    return failed(question, "the shape is right but the pattern does not block exactly what allowed forbids")


def _check_additive_mask(question: str, answer: NDArray[Any], blocked: Bools) -> Verdict:
    """A float mask is added to the scores: 0 where allowed, -inf where blocked."""
    if np.isnan(answer).any():
        return failed(question, NAN_MASK)
    if same(answer, np.where(blocked, -np.inf, 0.0)):
        return passed(question, "an additive mask (0 = allowed, -inf = blocked) works too; the boolean is ~allowed")
    zeros_and_ones = (
        "a float mask is added to the scores, it is not a switch: these 0s and 1s only raise some scores "
        "by 1 and block nothing"
    )
    mistake = first_match(answer, [
        (np.where(blocked, 0.0, -np.inf),
         "inverted additive mask: this -inf sits where attention is allowed, so it blocks the wrong positions"),
        (blocked.astype(float), zeros_and_ones),
        ((~blocked).astype(float), zeros_and_ones),
    ])
    return failed(question, mistake or "a float mask is added to the scores: 0 keeps a score, -inf blocks it")


# ----- key_padding_mask from lengths -------------------------------------------------------------
def check_key_padding_mask(mask: Any, lengths: Any, S: int, T: int | None = None) -> Verdict:
    """Question "key padding mask": ``(B, S)`` booleans, True at the padding of each sequence.

    ``lengths (B,)`` are the real lengths (each at most ``S``); ``T`` (optional, the query length)
    lets the checker recognise a mask built over the queries instead of the keys.
    """
    question = "key padding mask"
    S = check_int("S", S, low=0)  # NumPy integers too
    sizes = as_numpy(lengths)
    valid = sizes.ndim == 1 and sizes.dtype.kind in "iu" and isinstance(S, int)
    if not valid or not ((0 <= sizes) & (sizes <= S)).all():
        raise ValueError(f"lengths must be a 1-D integer array with entries in 0 .. S = {S}, got {lengths!r}")
    answer = mask_answer(question, mask, "a boolean (B, S) mask, True = padding")
    if isinstance(answer, Verdict):
        return answer
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
    return failed(question, "the shape is right but the pattern does not mark exactly the padding positions")


# ----- the float (additive) mask -----------------------------------------------------------------
def check_float_mask(mask: Any, allowed: Any) -> Verdict:
    """Question "float mask": the additive ``(T, S)`` mask for ``allowed (T, S)`` (True = may attend)."""
    question = "float mask"
    allowed_mask = reference_mask("allowed", allowed, "(T, S)", rank=2)
    answer = mask_answer(question, mask, "a float (T, S) mask that is added to the scores")
    if isinstance(answer, Verdict):
        return answer
    if answer.dtype == np.bool_:
        return failed(question, "this is a boolean mask; the question asks for floats that are added to the scores")
    values = answer.astype(np.float64)
    if np.isnan(values).any():
        return failed(question, NAN_MASK)
    if same(values, np.where(allowed_mask, 0.0, -np.inf)):
        return passed(question, "0 keeps a score, -inf sends its weight to exactly 0")
    blocked = ~allowed_mask
    if values.shape == allowed_mask.shape and (values[allowed_mask] == 0).all() and blocked.any():
        penalty = values[blocked]
        if (penalty <= LARGE_PENALTY).all() and np.isfinite(penalty).all():
            return passed(question, LARGE_PENALTY_CAVEAT)
        if (penalty < 0).all() and np.isfinite(penalty).all():
            return failed(
                question,
                f"a penalty of {penalty.max():g} only lowers those scores: a blocked position keeps some "
                f"weight (about exp({penalty.max():g}) relative to an allowed one)",
            )
    ones = "a float mask is added to the scores, it is not a switch: these 0s and 1s block nothing"
    mistake = first_match(values, [
        (np.where(allowed_mask, -np.inf, 0.0),
         "inverted: this -inf sits where attention is allowed, so it blocks exactly the wrong positions"),
        (np.where(allowed_mask, 0.0, np.inf),
         "the sign is flipped: +inf makes a blocked score infinitely large, and the softmax returns NaN"),
        (allowed_mask.astype(float), ones),
        (blocked.astype(float), ones),
        (np.where(allowed_mask, 0.0, -np.inf).T, "the mask is transposed: rows are queries (T), columns keys (S)"),
        *[(np.where(variant, 0.0, -np.inf), message) for variant, message in _causal_variants(allowed_mask)],
    ])
    if mistake is not None:
        return failed(question, mistake)
    if values.shape != allowed_mask.shape:
        return failed(question, f"expected shape (T, S) = {allowed_mask.shape}, got {values.shape}")
    return failed(question, "the shape is right but these numbers do not keep the allowed scores and block the others")


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


def _self_attention(x: Floats, weights: list[Floats], biases: list[Floats | None], heads: int,
                    allowed: Bools | None, empty_row: float) -> Floats:
    """Self-attention ``x (B, T, D) -> (B, T, D)``; a row with nothing allowed becomes ``empty_row`` (NaN or 0)."""
    B, T, D = x.shape
    d_h = D // heads

    def project(i: int) -> Floats:
        y, bias = x @ weights[i], biases[i]
        return y if bias is None else y + bias

    q, k, v = (project(i).reshape(B, T, heads, d_h).transpose(0, 2, 1, 3) for i in range(3))  # (B, h, T, d_h)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_h)  # (B, h, T, T)
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


def check_causal_mha(function: Any, mha: Any, x: Any) -> Verdict:
    """Question "causal nn.MultiheadAttention": ``function(mha, x)`` returns the output ``(B, T, D)``
    of ``mha`` on ``x (B, T, D)`` (self-attention) with the causal mask of our layer.

    Tried on ``x``, on its first ``T - 1`` tokens and on a random input of the checker's own with
    another batch size and length (same type and dtype as ``x``), so a mask must follow the input's
    length; the output must be of the kind ``x`` is (a tensor for a tensor, same dtype).
    """
    question = "causal nn.MultiheadAttention"
    xs = reference_array("x", x, "(B, T, D)", rank=3)
    weights, biases, heads = _mha_weights(mha)
    if xs.shape[-1] != weights[0].shape[0] or xs.shape[1] < 2:
        raise ValueError(f"x must be (B, T, D) with D = {weights[0].shape[0]} and T >= 2, got {xs.shape}")
    what = "the body: call mha so that it matches our causal layer, and return its output (B, T, D)"
    B, T, D = xs.shape
    own = np.random.default_rng(7).normal(size=(B + 1, T + 2, D))  # an input the notebook does not hold
    own_x = x.new_tensor(own) if hasattr(x, "new_tensor") else own.astype(as_numpy(x).dtype)  # x's kind and dtype
    verdict = failed(question, "no input tried")
    for inputs in (x, x[:, :-1], own_x):
        result = function_answer(question, function, (mha, inputs), what)
        size = reference_array("x", inputs, "(B, T, D)", rank=3)
        verdict = _causal_verdict(question, result, size, weights, biases, heads)
        if verdict.ok:  # the right numbers: are they the right kind (a tensor of x's dtype)?
            kind = same_kind(question, result, inputs)
            verdict = verdict if kind is None else kind
        if not verdict.ok:
            if inputs is x:
                return verdict
            return failed(question, f"right for the lesson's x (B, T) = {(B, T)} but not for (B, T) = "
                                    f"{size.shape[:2]} ({verdict.message}): take every size from x itself, "
                                    "not from the lesson")
    return verdict


def _causal_verdict(question: str, result: Any, xs: Floats, weights: list[Floats], biases: list[Floats | None],
                    heads: int) -> Verdict:
    if isinstance(result, Verdict):
        if "is_causal" in result.message:
            hint = "is_causal=True is only a hint: a mask is still needed"
            return failed(question, f"{result.message.rstrip('.')}. {hint}")
        return result
    if isinstance(result, tuple):
        return failed(question, f"your function returned a tuple of {len(result)}; return the output (B, T, D) only")
    answer = array_answer(question, result, "the output")
    if isinstance(answer, Verdict):
        return answer
    B, T, D = xs.shape
    causal = causal_mask(T)
    if _same_with_nan(answer, _self_attention(xs, weights, biases, heads, causal, np.nan)):
        return passed(question, "the causal mask in nn.MultiheadAttention's convention: the same output as our layer")
    for empty_row in (np.nan, 0.0):
        row = "NaN" if np.isnan(empty_row) else "zeros"
        for allowed, message in (
            (~causal, f"inverted convention: the mask blocks what it should allow (the last query, blocked "
                      f"everywhere, came back as {row}); nn.MultiheadAttention reads True as blocked"),
            (np.tril(np.ones((T, T), dtype=bool), k=-1),
             f"the diagonal is blocked: a query may attend to itself (query 0, blocked everywhere, "
             f"came back as {row})"),
            (np.triu(np.ones((T, T), dtype=bool)),
             "anti-causal: your mask blocks the past and lets each query see itself and the future (tril and "
             "triu swapped); causal attention blocks the positions after the query"),
        ):
            if _same_with_nan(answer, _self_attention(xs, weights, biases, heads, allowed, empty_row)):
                return failed(question, message)
    if same(answer, _self_attention(xs, weights, biases, heads, None, np.nan)):
        return failed(question, "no mask: every query sees every position, the future included")
    if answer.shape in ((B, T, T), (B, heads, T, T)):
        return failed(question, f"shape {answer.shape} looks like the attention weights; return the output (B, T, D)")
    if answer.shape != (B, T, D):
        return failed(question, f"expected shape (B, T, D) = {(B, T, D)}, got {answer.shape}")
    if np.isnan(answer).any():
        return failed(question, "some rows are NaN: a query is blocked everywhere")
    return failed(question, "the shape is right but the numbers are not our causal layer's output")
