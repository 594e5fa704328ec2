"""Argument checks shared by `numpy_core` and `torch_core`.

They look only at shapes, dtypes and sizes, so one message serves both libraries. Every message
names the argument, what was expected and what was given.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any


def check_int(name: str, value: Any) -> None:
    """``TypeError`` unless ``value`` is an integer (Python or NumPy); ``bool`` is refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")


def check_positive_int(name: str, value: Any, hint: str = "") -> None:
    """``TypeError`` unless ``value`` is an integer, ``ValueError`` unless it is positive."""
    check_int(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {name}={value}{hint}")


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, smallest first: the valid ``h`` for ``D = n``, or ``h_kv`` for ``h = n``."""
    check_positive_int("n", n)
    return [m for m in range(1, int(n) + 1) if n % m == 0]


def check_layer_sizes(width: int, heads: int) -> None:
    """``ValueError`` unless ``width > 0``, ``heads > 0`` and ``width % heads == 0``."""
    for name, value in (("width", width), ("heads", heads)):
        check_int(name, value)
    if width <= 0:
        raise ValueError(f"width (D) must be positive, got width={width}")
    if heads <= 0:
        raise ValueError(f"heads (h) must be positive, got heads={heads}")
    if width % heads != 0:
        raise ValueError(
            f"width D={width} is not divisible by heads h={heads}: every head needs the same width "
            f"d_h = D / h. Choose heads from the divisors of {width}: {divisors(width)}"
        )


def check_rank(name: str, shape: Sequence[int], rank: int, layout: str, exact: bool = False) -> None:
    """``ValueError`` if ``shape`` has fewer (or, with ``exact``, other) than ``rank`` axes."""
    if len(shape) < rank or (exact and len(shape) != rank):
        need = f"exactly {rank}" if exact else f"at least {rank}"
        raise ValueError(
            f"{name} must have {need} axes, laid out as {layout}; got shape {tuple(shape)} "
            f"with {len(shape)} axes"
        )


def check_array(name: str, array: Any) -> None:
    """``TypeError`` unless ``array`` is a NumPy array or torch tensor (it has a shape and a dtype)."""
    if getattr(array, "shape", None) is None or getattr(array, "dtype", None) is None:
        raise TypeError(f"{name} must be an array, got {type(array).__name__}")


def check_library(name: str, array: Any, library: str) -> None:
    """``TypeError`` if ``array`` comes from the other library (``library``: "numpy" or "torch")."""
    is_torch = type(array).__module__.split(".")[0] == "torch"
    if is_torch != (library == "torch"):
        wanted, fix = (
            ("torch.Tensor", "torch.from_numpy(x)") if library == "torch" else ("NumPy array", "x.detach().numpy()")
        )
        raise TypeError(
            f"{name} must be a {wanted} for lessons_lib.{library}_core, got {type(array).__name__}; "
            f"convert it with {fix}, or use the module of the library your data lives in"
        )


def check_source_length(name: str, shape: Sequence[int]) -> None:
    """``ValueError`` if there are no source positions (S = 0): a softmax over nothing is undefined."""
    if shape[-2] == 0:
        raise ValueError(
            f"{name} has no source positions (S=0, shape {tuple(shape)}); attention needs at least "
            f"one position to attend to"
        )


def check_float(name: str, array: Any) -> None:
    """``TypeError`` unless ``array`` is a NumPy array or torch tensor of floating-point numbers."""
    dtype = getattr(array, "dtype", None)
    is_float = getattr(array, "is_floating_point", None)
    if dtype is None:
        raise TypeError(f"{name} must be an array, got {type(array).__name__}")
    floating = is_float() if callable(is_float) else getattr(dtype, "kind", "") == "f"
    if not floating:
        raise TypeError(
            f"{name} must hold floating-point numbers, got dtype {dtype}; "
            f"convert it first, e.g. with .astype(float) or .float()"
        )


def check_qkv(q: Any, k: Any, v: Any, library: str) -> None:
    """Checks for ``attention(q (..., T, d), k (..., S, d), v (..., S, d_v))`` in ``library``."""
    for name, array in (("q", q), ("k", k), ("v", v)):
        check_float(name, array)
        check_library(name, array, library)
    check_rank("q", q.shape, 2, "(..., T, d)")
    check_rank("k", k.shape, 2, "(..., S, d)")
    check_rank("v", v.shape, 2, "(..., S, d_v)")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}; "
            f"convert them to one precision first"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature width d, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same source length S, got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    check_source_length("k", k.shape)
    leading = [tuple(a.shape[:-2]) for a in (q, k, v)]
    width = max(len(lead) for lead in leading)
    for axis in range(1, width + 1):
        sizes = {lead[-axis] for lead in leading if len(lead) >= axis} - {1}
        if len(sizes) > 1:
            raise ValueError(
                f"the leading (batch/head) axes of q, k and v do not broadcast: {leading[0]}, "
                f"{leading[1]} and {leading[2]}; they must match or be 1"
            )


def check_dtype_matches(name: str, dtype: Any, layer_dtype: Any) -> None:
    """``TypeError`` if an input's dtype differs from the layer's weights (no silent casting)."""
    if dtype != layer_dtype:
        raise TypeError(
            f"{name} has dtype {dtype} but the layer's weights are {layer_dtype}; convert the "
            f"input, or build the layer with dtype={dtype} to compute in that precision"
        )


def check_layer_array(name: str, array: Any, layer_dtype: Any, library: str) -> None:
    """An input of a layer: floating point, from ``library``, and in the layer's dtype."""
    check_float(name, array)
    check_library(name, array, library)
    check_dtype_matches(name, array.dtype, layer_dtype)


def layer_mask(allowed: Any, B: int, h: int, T: int, S: int, library: str) -> Any:
    """Check a layer's ``allowed`` mask; return it broadcastable to ``(B, h, T, S)``.

    A ``(B, T, S)`` mask gets a head axis, ``(B, 1, T, S)``: the same mask for every head.
    """
    check_bool_mask(allowed, library)
    layer_mask_shape(allowed.shape, B, h, T, S)
    return allowed[:, None] if allowed.ndim == 3 else allowed


def check_bool_mask(allowed: Any, library: str) -> None:
    """``TypeError`` unless ``allowed`` is a boolean array (``library``: "numpy" or "torch")."""
    dtype = getattr(allowed, "dtype", None)
    if dtype is None:
        raise TypeError(f"allowed must be a boolean array, got {type(allowed).__name__}")
    if str(dtype) not in ("bool", "torch.bool"):
        raise TypeError(
            f"allowed must be a boolean mask (True = may attend), got dtype {dtype}. "
            f"If you have an additive mask of 0 and -inf, use allowed = (mask == 0)"
        )
    check_library("allowed", allowed, library)


def mask_shape(shape: Sequence[int], scores_shape: Sequence[int]) -> None:
    """``ValueError`` unless a mask of ``shape`` broadcasts to the scores ``(..., T, S)``."""
    ok = len(shape) <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(shape), reversed(scores_shape))
    )
    if not ok:
        raise ValueError(
            f"allowed has shape {tuple(shape)}, which does not broadcast to the attention scores "
            f"(..., T, S) = {tuple(scores_shape)}; its last two axes must be (T, S) or 1"
        )


def layer_mask_shape(shape: Sequence[int], B: int, h: int, T: int, S: int) -> None:
    """Masks for a layer: ``(T, S)``, ``(B, T, S)`` or broadcastable to ``(B, h, T, S)``."""
    if len(shape) == 3:
        target: tuple[int, ...] = (B, T, S)
    elif len(shape) in (2, 4):
        target = (B, h, T, S)
    else:
        raise ValueError(
            f"allowed must have shape (T, S), (B, T, S) or (B, h, T, S), got {tuple(shape)}"
        )
    ok = all(m in (1, s) for m, s in zip(reversed(shape), reversed(target)))
    if not ok:
        layout = {2: "(T, S)", 3: "(B, T, S)", 4: "(B, h, T, S)"}[len(shape)]
        raise ValueError(
            f"allowed has shape {tuple(shape)} but this call needs {layout} with "
            f"B={B}, h={h}, T={T}, S={S} (or 1 on an axis to share it)"
        )


def check_layer_inputs(
    query_shape: Sequence[int], context_shape: Sequence[int], width: int
) -> tuple[int, int, int]:
    """Validate ``(B, T, D)`` query and ``(B, S, D)`` context shapes; return ``(B, T, S)``."""
    check_rank("query", query_shape, 3, "(B, T, D)", exact=True)
    check_rank("context", context_shape, 3, "(B, S, D)", exact=True)
    for name, shape in (("query", query_shape), ("context", context_shape)):
        if shape[-1] != width:
            raise ValueError(
                f"{name} has width {shape[-1]} on its last axis but the layer width D is {width}; "
                f"make sure the last axis holds the features (got shape {tuple(shape)})"
            )
    check_source_length("context", context_shape)
    if query_shape[0] != context_shape[0]:
        raise ValueError(
            f"query and context must have the same batch size B, got {query_shape[0]} and {context_shape[0]}"
        )
    return query_shape[0], query_shape[1], context_shape[1]


def empty_rows_message() -> str:
    return (
        "a query row has no allowed position (its row of `allowed` is all False), so its softmax "
        "would be 0/0 = NaN. Make sure every query may attend to at least one source position; "
        "for padded queries, allow one position and ignore their outputs"
    )
