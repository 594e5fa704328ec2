"""Quick check of the lesson "Concatenate and project" (checkers in
``lessons_lib.checks.concatenate_and_project``).

Each checker compares a learner's answer with the right one and, when it is wrong, tries the
mistakes this lesson warns about and names the one that matches:

- `check_merge`: merging ``(B, h, T, d_h) -> (B, T, D)``; recognises a direct reshape without the
  transpose back, the features interleaved in ``(d_h, h)`` order, the heads averaged or summed
  instead of concatenated, and a transpose without the reshape.
- `check_linear_weight`: the tensor copied into ``nn.Linear.weight``; recognises the NumPy
  ``(in, out)`` matrix copied without transposing.
- `check_mha_mask`: the ``attn_mask`` for ``nn.MultiheadAttention``; recognises the inverted
  convention (passing ``allowed`` itself, True = may attend), a transposed mask, and an inverted
  additive (float) mask.
- `check_combine`: the layer output from per-head outputs and ``W_o``; recognises averaging the
  heads, forgetting ``W_o``, multiplying by ``W_o`` transposed, a wrong merge, and dividing by ``h``.

Answers may be NumPy arrays or torch tensors; this module imports NumPy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    mask_answer,
    passed,
    reference_array,
    reference_mask,
    same,
)

__all__ = ["check_combine", "check_linear_weight", "check_merge", "check_mha_mask"]


def _merge(heads_out: NDArray[np.float64]) -> NDArray[np.float64]:
    """The right merge: ``(B, h, T, d_h) -> (B, T, h, d_h) -> (B, T, D)``."""
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


def check_merge(merged: Any, heads_out: Any) -> Verdict:
    """Question "merge": ``heads_out (B, h, T, d_h)`` merged back to ``(B, T, D)``."""
    question = "merge"
    heads = reference_array("heads_out", heads_out, "(B, h, T, d_h)", rank=4)
    answer = array_answer(question, merged, "your merged (B, T, D) array")
    if isinstance(answer, Verdict):
        return answer
    B, h, T, d_h = heads.shape
    expected = _merge(heads)
    if same(answer, expected):
        return passed(
            question,
            f"transpose to (B, T, h, d_h), then reshape to (B, T, D) = {expected.shape}: "
            f"each token's row holds head 0's {d_h} features, then head 1's, and so on",
        )
    mistake = first_match(answer, [
        (lambda: heads.mean(axis=1),
         f"you averaged the heads: shape {answer.shape} = (B, T, d_h) has lost the head axis. "
         f"Merging concatenates them, so every head keeps its own {d_h} features in (B, T, D)"),
        (lambda: heads.sum(axis=1),
         f"you summed the heads: shape {answer.shape} = (B, T, d_h) has lost the head axis. "
         f"Merging concatenates them into (B, T, D)"),
        (lambda: heads.transpose(0, 2, 1, 3),
         f"the transpose is right, (B, T, h, d_h) = {answer.shape}, but the reshape to "
         f"(B, T, D) = {expected.shape} is missing"),
        (lambda: heads.reshape(B, T, h * d_h),
         "direct reshape without transposing back: reshaping (B, h, T, d_h) straight to "
         "(B, T, D) gives the right shape, but each row then holds several tokens of one head. "
         "Transpose to (B, T, h, d_h) first, then reshape"),
        (lambda: heads.transpose(0, 2, 3, 1).reshape(B, T, h * d_h),
         "the features are interleaved: you moved the head axis last, (B, T, d_h, h), before "
         "the reshape. Use (B, T, h, d_h) so each head's features stay side by side"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if answer.shape != expected.shape:
        return failed(question, f"expected shape (B, T, D) = {expected.shape}, got {answer.shape}")
    return failed(
        question,
        "the shape is right but the numbers are not a merge of heads_out: transpose (0, 2, 1, 3), "
        "then reshape to (B, T, D)",
    )


def check_linear_weight(weight: Any, w_in_out: Any) -> Verdict:
    """Question "nn.Linear weight": what goes into ``nn.Linear.weight`` for the NumPy ``(in, out)`` matrix."""
    question = "nn.Linear weight"
    w = reference_array("w_in_out", w_in_out, "(in_features, out_features)", rank=2)
    answer = array_answer(question, weight, "the (out_features, in_features) weight")
    if isinstance(answer, Verdict):
        return answer
    expected = w.T
    if same(answer, expected):
        return passed(
            question,
            f"transposed: nn.Linear stores (out_features, in_features) = {expected.shape} and "
            f"computes x @ weight.T, which is x @ w",
        )
    if same(answer, w):
        return failed(
            question,
            "not transposed: you copied the NumPy (in, out) matrix as it is, but nn.Linear stores "
            "(out_features, in_features) and computes x @ weight.T; copy w.T instead",
        )
    if answer.shape != expected.shape:
        return failed(question, f"expected shape (out_features, in_features) = {expected.shape}, got {answer.shape}")
    return failed(question, "the shape is right but the numbers are not w.T")


def check_mha_mask(attn_mask: Any, allowed: Any) -> Verdict:
    """Question "nn.MultiheadAttention mask": ``attn_mask`` from ``allowed (T, S)`` (True = may attend)."""
    question = "nn.MultiheadAttention mask"
    allowed_mask = reference_mask("allowed", allowed, "(T, S)", rank=2)
    answer = mask_answer(question, attn_mask, "~allowed")
    if isinstance(answer, Verdict):
        return answer
    blocked = ~allowed_mask
    if answer.dtype.kind == "f":
        return _check_additive_mask(question, answer, blocked)
    if answer.dtype != np.bool_:
        return failed(
            question,
            f"expected a boolean mask (True = blocked) or a float additive mask, got dtype {answer.dtype}",
        )
    if same(answer, blocked):
        return passed(question, "~allowed: nn.MultiheadAttention reads True as blocked, the opposite of SDPA")
    mistake = first_match(answer, [
        (allowed_mask,
         "inverted convention: you passed allowed itself (True = may attend), but "
         "nn.MultiheadAttention reads True as blocked. Pass ~allowed"),
        (blocked.T, "the mask is transposed: rows are queries (T) and columns are source positions (S)"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if answer.shape != blocked.shape:
        return failed(question, f"expected shape (T, S) = {blocked.shape}, got {answer.shape}")
    return failed(question, "the shape is right but the pattern is not ~allowed (True where attention is blocked)")


def _check_additive_mask(question: str, answer: NDArray[Any], blocked: NDArray[np.bool_]) -> Verdict:
    """A float mask is added to the scores: 0 where allowed, -inf where blocked."""
    if same(answer, np.where(blocked, -np.inf, 0.0)):
        return passed(
            question,
            "an additive float mask (0 = allowed, -inf = blocked) also works; the boolean form is ~allowed",
        )
    if same(answer, np.where(blocked, 0.0, -np.inf)):
        return failed(
            question,
            "inverted additive mask: -inf must go where attention is blocked and 0 where it is "
            "allowed (the boolean form is ~allowed)",
        )
    return failed(
        question,
        "a float mask is added to the scores: use 0 where allowed and -inf where blocked, or "
        "pass the boolean ~allowed",
    )


def check_combine(output: Any, heads_out: Any, wo: Any) -> Verdict:
    """Question "layer output": from ``heads_out (B, h, T, d_h)`` and ``wo (D, D)`` (in, out)."""
    question = "layer output"
    heads = reference_array("heads_out", heads_out, "(B, h, T, d_h)", rank=4)
    w = reference_array("wo", wo, "(D, D)", rank=2)
    B, h, T, d_h = heads.shape
    if w.shape != (h * d_h, h * d_h):
        D = h * d_h
        raise ValueError(f"wo must be (D, D) = {(D, D)} for heads_out of shape {heads.shape}, got {w.shape}")
    answer = array_answer(question, output, "merged @ wo, shape (B, T, D)")
    if isinstance(answer, Verdict):
        return answer
    merged = _merge(heads)
    expected = merged @ w
    if same(answer, expected):
        return passed(question, "concatenate (merge) the heads, then multiply by W_o: row block i of W_o reads head i")
    averaged = (
        f"you averaged (or summed) the heads instead of concatenating: shape {answer.shape} = "
        f"(B, T, d_h) no longer says which head produced what, and W_o {w.shape} cannot read "
        f"it. Merge to (B, T, D), then multiply by W_o"
    )
    mistake = first_match(answer, [
        (lambda: heads.mean(axis=1), averaged),
        (lambda: heads.sum(axis=1), averaged),
        (merged, "you forgot the output projection: multiply the merged heads by W_o"),
        (lambda: merged @ w.T,
         "W_o is transposed: NumPy weights are (in, out), so use merged @ wo (the .T belongs "
         "only to nn.Linear's (out, in) storage)"),
        (lambda: heads.reshape(B, T, h * d_h) @ w,
         "the merge is a direct reshape without transposing back, so each row mixes tokens; "
         "transpose to (B, T, h, d_h) before reshaping"),
        (lambda: expected / h,
         f"the result is 1/h = 1/{h} of the right one: you averaged the heads' contributions. "
         f"Concatenation + W_o adds them"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if answer.shape != expected.shape:
        return failed(question, f"expected shape (B, T, D) = {expected.shape}, got {answer.shape}")
    return failed(question, "the shape is right but the numbers differ from merge(heads_out) @ wo")
