"""Quick check for lesson 03 (concatenate and project).

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

Answers may be NumPy arrays or torch tensors (converted with `as_numpy`); this module imports
NumPy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import Verdict, as_numpy, failed, passed

__all__ = ["check_combine", "check_linear_weight", "check_merge", "check_mha_mask"]

# float32 answers (a torch layer) differ from float64 references in about the 7th digit.
RTOL = 1e-5
ATOL = 1e-6


def _close(answer: NDArray[Any], expected: NDArray[Any]) -> bool:
    """Same shape and the same numbers up to float32 rounding."""
    return answer.shape == expected.shape and bool(np.allclose(answer, expected, rtol=RTOL, atol=ATOL))


def _answer(question: str, value: Any) -> NDArray[Any] | Verdict:
    """The learner's answer as a float or bool array, or a `Verdict` saying why it is not one."""
    if value is None:
        return failed(question, "no answer yet: replace None with your expression")
    array = as_numpy(value)
    if array.dtype.kind not in "fb":
        return failed(
            question,
            f"expected an array of numbers (float) or a boolean mask, got dtype {array.dtype}",
        )
    return array


def _reference(name: str, value: Any, rank: int, layout: str) -> NDArray[np.float64]:
    """A checker's reference argument as float64; ``ValueError``/``TypeError`` if it cannot be one."""
    array = as_numpy(value)
    if array.dtype.kind != "f":
        raise TypeError(f"{name} must hold floating-point numbers, got dtype {array.dtype}")
    if array.ndim != rank:
        raise ValueError(
            f"{name} must have {rank} axes laid out as {layout}, got shape {tuple(array.shape)}"
        )
    return array.astype(np.float64)


def _merge(heads_out: NDArray[np.float64]) -> NDArray[np.float64]:
    """The right merge: ``(B, h, T, d_h) -> (B, T, h, d_h) -> (B, T, D)``."""
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


def check_merge(merged: Any, heads_out: Any) -> Verdict:
    """Q1: ``merged`` should be ``heads_out (B, h, T, d_h)`` merged back to ``(B, T, D)``."""
    question = "Q1 merge"
    heads_out = _reference("heads_out", heads_out, 4, "(B, h, T, d_h)")
    answer = _answer(question, merged)
    if isinstance(answer, Verdict):
        return answer
    B, h, T, d_h = heads_out.shape
    expected = _merge(heads_out)
    if _close(answer, expected):
        return passed(
            question,
            f"transpose to (B, T, h, d_h), then reshape to (B, T, D) = {expected.shape}: "
            f"each token's row holds head 0's {d_h} features, then head 1's, and so on",
        )
    if _close(answer, heads_out.mean(axis=1)):
        return failed(
            question,
            f"you averaged the heads: shape {answer.shape} = (B, T, d_h) has lost the head axis. "
            f"Merging concatenates them, so every head keeps its own {d_h} features in (B, T, D)",
        )
    if _close(answer, heads_out.sum(axis=1)):
        return failed(
            question,
            f"you summed the heads: shape {answer.shape} = (B, T, d_h) has lost the head axis. "
            f"Merging concatenates them into (B, T, D)",
        )
    if _close(answer, heads_out.transpose(0, 2, 1, 3)):
        return failed(
            question,
            f"the transpose is right, (B, T, h, d_h) = {answer.shape}, but the reshape to "
            f"(B, T, D) = {expected.shape} is missing",
        )
    if _close(answer, heads_out.reshape(B, T, h * d_h)):
        return failed(
            question,
            "direct reshape without transposing back: reshaping (B, h, T, d_h) straight to "
            "(B, T, D) gives the right shape, but each row then holds several tokens of one head. "
            "Transpose to (B, T, h, d_h) first, then reshape",
        )
    if _close(answer, heads_out.transpose(0, 2, 3, 1).reshape(B, T, h * d_h)):
        return failed(
            question,
            "the features are interleaved: you moved the head axis last, (B, T, d_h, h), before "
            "the reshape. Use (B, T, h, d_h) so each head's features stay side by side",
        )
    if answer.shape != expected.shape:
        return failed(
            question, f"expected shape (B, T, D) = {expected.shape}, got {answer.shape}"
        )
    return failed(
        question,
        "the shape is right but the numbers are not a merge of heads_out: transpose (0, 2, 1, 3), "
        "then reshape to (B, T, D)",
    )


def check_linear_weight(weight: Any, w_in_out: Any) -> Verdict:
    """Q2: ``weight`` is what goes into ``nn.Linear.weight`` for the NumPy ``(in, out)`` matrix."""
    question = "Q2 copy into nn.Linear"
    w = _reference("w_in_out", w_in_out, 2, "(in_features, out_features)")
    answer = _answer(question, weight)
    if isinstance(answer, Verdict):
        return answer
    expected = w.T
    if _close(answer, expected):
        return passed(
            question,
            f"transposed: nn.Linear stores (out_features, in_features) = {expected.shape} and "
            f"computes x @ weight.T, which is x @ w",
        )
    if _close(answer, w):
        return failed(
            question,
            "not transposed: you copied the NumPy (in, out) matrix as it is, but nn.Linear stores "
            "(out_features, in_features) and computes x @ weight.T; copy w.T instead",
        )
    if answer.shape != expected.shape:
        return failed(
            question,
            f"expected shape (out_features, in_features) = {expected.shape}, got {answer.shape}",
        )
    return failed(question, "the shape is right but the numbers are not w.T")


def check_mha_mask(attn_mask: Any, allowed: Any) -> Verdict:
    """Q3: ``attn_mask`` for ``nn.MultiheadAttention`` from ``allowed (T, S)`` (True = may attend)."""
    question = "Q3 nn.MultiheadAttention mask"
    allowed_array = as_numpy(allowed)
    if allowed_array.dtype != np.bool_ or allowed_array.ndim != 2:
        raise ValueError(
            f"allowed must be a boolean (T, S) mask, got dtype {allowed_array.dtype} and shape "
            f"{tuple(allowed_array.shape)}"
        )
    answer = _answer(question, attn_mask)
    if isinstance(answer, Verdict):
        return answer
    blocked = ~allowed_array
    if answer.dtype.kind == "f":
        return _check_additive_mask(question, answer, blocked)
    if answer.shape == blocked.shape and np.array_equal(answer, blocked):
        return passed(
            question,
            "~allowed: nn.MultiheadAttention reads True as blocked, the opposite of SDPA",
        )
    if answer.shape == allowed_array.shape and np.array_equal(answer, allowed_array):
        return failed(
            question,
            "inverted convention: you passed allowed itself (True = may attend), but "
            "nn.MultiheadAttention reads True as blocked. Pass ~allowed",
        )
    if answer.shape == blocked.T.shape and np.array_equal(answer, blocked.T):
        return failed(
            question,
            "the mask is transposed: rows are queries (T) and columns are source positions (S)",
        )
    if answer.shape != blocked.shape:
        return failed(question, f"expected shape (T, S) = {blocked.shape}, got {answer.shape}")
    return failed(
        question, "the shape is right but the pattern is not ~allowed (True where attention is blocked)"
    )


def _check_additive_mask(question: str, answer: NDArray[Any], blocked: NDArray[np.bool_]) -> Verdict:
    """A float mask is added to the scores: 0 where allowed, -inf where blocked."""
    expected = np.where(blocked, -np.inf, 0.0)
    if answer.shape == expected.shape and np.array_equal(answer, expected):
        return passed(
            question,
            "an additive float mask (0 = allowed, -inf = blocked) also works; the boolean "
            "form is ~allowed",
        )
    if answer.shape == expected.shape and np.array_equal(answer, np.where(blocked, 0.0, -np.inf)):
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
    """Q4: the layer output from ``heads_out (B, h, T, d_h)`` and ``wo (D, D)`` (in, out)."""
    question = "Q4 combine the heads"
    heads = _reference("heads_out", heads_out, 4, "(B, h, T, d_h)")
    w = _reference("wo", wo, 2, "(D, D)")
    B, h, T, d_h = heads.shape
    if w.shape != (h * d_h, h * d_h):
        raise ValueError(
            f"wo must be (D, D) = {(h * d_h, h * d_h)} for heads_out of shape {heads.shape}, "
            f"got {w.shape}"
        )
    answer = _answer(question, output)
    if isinstance(answer, Verdict):
        return answer
    merged = _merge(heads)
    expected = merged @ w
    if _close(answer, expected):
        return passed(
            question,
            "concatenate (merge) the heads, then multiply by W_o: row block i of W_o reads head i",
        )
    if _close(answer, heads.mean(axis=1)) or _close(answer, heads.sum(axis=1)):
        return failed(
            question,
            f"you averaged (or summed) the heads instead of concatenating: shape {answer.shape} = "
            f"(B, T, d_h) no longer says which head produced what, and W_o {w.shape} cannot read "
            f"it. Merge to (B, T, D), then multiply by W_o",
        )
    if _close(answer, merged):
        return failed(question, "you forgot the output projection: multiply the merged heads by W_o")
    if _close(answer, merged @ w.T):
        return failed(
            question,
            "W_o is transposed: NumPy weights are (in, out), so use merged @ wo (the .T belongs "
            "only to nn.Linear's (out, in) storage)",
        )
    if _close(answer, heads.reshape(B, T, h * d_h) @ w):
        return failed(
            question,
            "the merge is a direct reshape without transposing back, so each row mixes tokens; "
            "transpose to (B, T, h, d_h) before reshaping",
        )
    if _close(answer, expected / h):
        return failed(
            question,
            f"the result is 1/h = 1/{h} of the right one: you averaged the heads' contributions. "
            f"Concatenation + W_o adds them",
        )
    if answer.shape != expected.shape:
        return failed(question, f"expected shape (B, T, D) = {expected.shape}, got {answer.shape}")
    return failed(question, "the shape is right but the numbers differ from merge(heads_out) @ wo")
