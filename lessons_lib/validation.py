"""Argument checks at the boundary of every public function and layer (internal to the package).

One helper per kind of check. A wrong type raises ``TypeError`` (a non-integer size, a wrong dtype,
a NumPy array given to a PyTorch function); a wrong value or shape raises ``ValueError``. Every
message names the argument, what was expected and what was given. The helpers look only at shapes,
dtypes and sizes, so the NumPy and PyTorch modules share every message.

Helpers that accept a size return it as a Python ``int``, so ``np.int64(2)`` works wherever ``2``
does and arithmetic on it never overflows a fixed-width integer.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

Library = str  # "numpy" or "torch"


# ----- sizes ---------------------------------------------------------------------------------
def check_int(name: str, value: Any, low: int | None = 1, high: int | None = None, symbol: str = "") -> int:
    """``value`` as a Python int: ``TypeError`` unless an integer (not ``bool``), ``ValueError``
    unless ``low <= value`` (and ``value <= high`` when given; ``low=None``: no lower bound).
    ``symbol`` is the notation, e.g. "h"."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    number = int(value)  # a Python int: NumPy integers overflow, Python ints do not
    label = f"{name} ({symbol})" if symbol else name
    if high is not None and low is not None and not low <= number <= high:
        raise ValueError(f"{label} must be in {low} .. {high}, got {name}={number}")
    if low is not None and number < low:
        need = {0: "non-negative", 1: "positive"}.get(low, f"at least {low}")
        raise ValueError(f"{label} must be {need}, got {name}={number}")
    return number


SIZE_LIMIT = 2**40  # the largest width or head count accepted: far beyond any model, and quick to factor


def check_size(name: str, value: Any, symbol: str = "") -> int:
    """A layer size (a width or a head count): a positive int of at most `SIZE_LIMIT` = 2**40.

    Larger sizes are refused at once: no model is that wide, and listing the divisors of such a
    number (for a message or a widget) would take minutes.
    """
    number = check_int(name, value, symbol=symbol)
    if number > SIZE_LIMIT:
        label = f"{name} ({symbol})" if symbol else name
        raise ValueError(
            f"{label} must be at most 2**40 = {SIZE_LIMIT}, got {name}={number}: no layer is that large, "
            f"so sizes beyond 2**40 are refused"
        )
    return number


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, smallest first: the valid ``h`` for ``D = n``, or ``h_kv`` for ``h = n``.

    ``n`` is at most `SIZE_LIMIT` = 2**40 (larger values are refused at once). The candidates
    ``m <= sqrt(n)`` (at most 2**20) are tried in one NumPy pass and paired with ``n // m``, so even
    ``n = 2**40`` takes milliseconds.
    """
    import numpy as np

    n = check_size("n", n)
    candidates = np.arange(1, math.isqrt(n) + 1, dtype=np.int64)
    small = [int(m) for m in candidates[n % candidates == 0]]
    large = [n // m for m in reversed(small) if m * m != n]
    return small + large


OPTION_LIMIT = 16  # the most entries an option list (a widget's dropdown) offers


def divisor_options(n: int) -> list[int]:
    """The divisors of ``n`` as choices for a widget: all of them if there are at most `OPTION_LIMIT`
    (16), else the 15 smallest and ``n`` itself. ``n`` is at most `SIZE_LIMIT` (2**40)."""
    found = divisors(n)
    return found if len(found) <= OPTION_LIMIT else [*found[: OPTION_LIMIT - 1], found[-1]]


def divisors_text(n: int, most: int = 8) -> str:
    """The divisors of ``n`` for a message: all of them if there are at most ``most``, else the six
    smallest and the two largest, e.g. ``[1, 2, 4, 8, 16, 32, ..., 2**39, 2**40] (41 in all)``."""
    found = divisors(n)
    if len(found) <= most:
        return str(found)
    shown = ", ".join(str(d) for d in found[:6]) + ", ..., " + ", ".join(str(d) for d in found[-2:])
    return f"[{shown}] ({len(found)} in all)"


def check_seed(name: str, seed: Any) -> int:
    """A random seed: ``TypeError`` unless an int, ``ValueError`` if negative (NumPy refuses those)."""
    return check_int(name, seed, low=0)


def causal_sizes(T: Any, S: Any) -> tuple[int, int]:
    """``(T, S)`` of a causal mask (``S`` defaults to ``T``); ``ValueError`` unless ``0 < T <= S``."""
    T = check_int("T", T, low=None)
    S = T if S is None else check_int("S", S, low=None)
    if not 0 < T <= S:
        raise ValueError(f"causal_mask needs 0 < T <= S, got T={T}, S={S}")
    return T, S


def head_width(width: Any, heads: Any) -> int:
    """``d_h = D / h``; ``ValueError`` unless both are positive and ``h`` divides ``D``."""
    width = check_size("width", width, symbol="D")
    heads = check_int("heads", heads, symbol="h")
    if width % heads != 0:
        raise ValueError(
            f"width D={width} is not divisible by heads h={heads}: every head needs the same width "
            f"d_h = D / h. Choose heads from the divisors of {width}: {divisors_text(width)}"
        )
    return int(width // heads)


def group_size(heads: Any, kv_heads: Any) -> int:
    """``g = h / h_kv``; ``ValueError`` unless ``h_kv`` is a positive divisor of ``h``."""
    heads = check_size("heads", heads, symbol="h")
    kv_heads = check_int("kv_heads", kv_heads, low=None)
    if kv_heads <= 0 or heads % kv_heads != 0:
        raise ValueError(
            f"kv_heads h_kv={kv_heads} must be a positive divisor of heads h={heads}, so that each "
            f"key/value head serves the same number g = h / h_kv of query heads. "
            f"Valid choices for h={heads}: {divisors_text(heads)}"
        )
    return int(heads // kv_heads)


# ----- arrays --------------------------------------------------------------------------------
def _is_torch(array: Any) -> bool:
    return type(array).__module__.split(".")[0] == "torch"


def _is_float(array: Any) -> bool:
    is_float = getattr(array, "is_floating_point", None)
    return bool(is_float()) if callable(is_float) else getattr(array.dtype, "kind", "") == "f"


def _rank(layout: str) -> tuple[int, bool]:
    """``"(B, T, D)" -> (3, True)`` (exactly 3 axes); ``"(..., T, d)" -> (2, False)`` (at least 2)."""
    axes = [axis.strip() for axis in layout.strip("()").split(",") if axis.strip()]
    open_ended = bool(axes) and axes[0] == "..."
    return len(axes) - open_ended, not open_ended


def check_array(
    name: str,
    array: Any,
    library: Library,
    layout: str,
    dtype: Any = None,
    floating: bool = True,
    dtype_fix: str | None = None,
) -> None:
    """One array argument: an array of ``library``, floating point unless ``floating=False`` (and of
    ``dtype`` when given), with the axes ``layout`` names, e.g. ``"(B, T, D)"`` or ``"(..., T, d)"``.

    ``dtype_fix`` replaces the advice given for a wrong dtype (e.g. for a layer that has one dtype only).
    """
    if getattr(array, "shape", None) is None or getattr(array, "dtype", None) is None:
        raise TypeError(
            f"{name} must be an array, got {type(array).__name__}; make one first, e.g. np.asarray({name}) "
            f"(or torch.tensor({name}) for a PyTorch function)"
        )
    check_library(name, array, library)
    _check_plain(name, array)
    if floating and not _is_float(array):
        raise TypeError(
            f"{name} must hold floating-point numbers, got dtype {array.dtype}; "
            f"convert it first, e.g. with .astype(float) or .float()"
        )
    if dtype is not None and array.dtype != dtype:
        fix = dtype_fix or (
            f"convert the input, or build the layer with dtype={array.dtype} (a PyTorch layer: layer.to({array.dtype}))"
        )
        raise TypeError(f"{name} has dtype {array.dtype} but the layer's weights are {_dtype_name(dtype)}; {fix}")
    rank, exact = _rank(layout)
    shape = tuple(array.shape)
    if len(shape) < rank or (exact and len(shape) != rank):
        need = f"exactly {rank}" if exact else f"at least {rank}"
        axes = "axis" if rank == 1 else "axes"
        raise ValueError(
            f"{name} must have {need} {axes}, laid out as {layout}; got shape {shape} with {len(shape)} "
            f"{'axis' if len(shape) == 1 else 'axes'}"
        )


def _check_plain(name: str, array: Any) -> None:
    """Refuse what looks like an array but holds no usable numbers: a NumPy masked array (the mask
    would be ignored) or a PyTorch tensor on the ``meta`` device (a shape without values)."""
    if getattr(array, "is_meta", False):
        raise ValueError(
            f"{name} is on the meta device: it has a shape but no values, so nothing can be computed "
            f"from it; make it on a real device, e.g. torch.zeros(..., device='cpu')"
        )
    if type(array).__module__.startswith("numpy.ma"):
        raise TypeError(
            f"{name} is a masked array (numpy.ma), whose mask the layers would ignore; pass plain numbers "
            f"instead, e.g. {name}.filled(0.0), and say which positions to skip with the allowed mask"
        )


def _dtype_name(dtype: Any) -> str:
    """``np.float64`` (a class), ``np.dtype('float64')`` and ``torch.float64`` as people write them."""
    import numpy as np

    return str(dtype) if _is_torch(dtype) else str(np.dtype(dtype))


def check_library(name: str, array: Any, library: Library) -> None:
    """``TypeError`` if ``array`` comes from the other library (``library``: "numpy" or "torch")."""
    if _is_torch(array) == (library == "torch"):
        return
    if library == "torch":
        raise TypeError(
            f"{name} must be a torch.Tensor here, got {type(array).__name__}; convert it with "
            f"torch.from_numpy({name}), or use the NumPy twin of this module (mha_numpy, gqa_numpy, block_numpy)"
        )
    raise TypeError(
        f"{name} must be a NumPy array here, got {type(array).__name__}; convert it with {name}.detach().numpy(). "
        f"Only mha_numpy, gqa_numpy and block_numpy have PyTorch twins (mha_torch, gqa_torch, block_torch); "
        f"mla, rope, efficient and induction are NumPy only"
    )


def _sum_allows(array: Any, allow_minus_inf: bool) -> bool:
    """A one-pass test that ``array`` holds no NaN and no ``+inf`` (nor ``-inf`` unless allowed).

    A NaN or ``+inf`` entry makes the sum NaN or ``+inf``, so a finite sum (or ``-inf`` when
    ``-inf`` is allowed) proves the array clean; a sum that overflows proves nothing (``False``),
    and the caller then looks at every entry.
    """
    total = float((array.detach() if _is_torch(array) else array).sum())
    return math.isfinite(total) or (allow_minus_inf and total == -math.inf)


def check_finite(name: str, array: Any, allow_minus_inf: bool = False) -> None:
    """``ValueError`` naming the first NaN or infinite entry of ``array`` (NumPy or torch).

    Attention turns one such entry into NaN outputs without a word, so the input is refused at the
    boundary. ``allow_minus_inf``: scores may hold ``-inf`` (a masked position), never NaN or ``+inf``.
    The usual case (a clean array) costs one sum; entries are looked at only when the sum is not finite.
    """
    if _sum_allows(array, allow_minus_inf):
        return
    if _is_torch(array):
        import torch

        values = array.detach()
        bad = ~torch.isfinite(values)
        if allow_minus_inf:
            bad &= ~torch.isneginf(values)
        if not bool(bad.any()):
            return
        first = tuple(int(i) for i in bad.nonzero()[0])
        count, value = int(bad.sum()), float(values[first])
    else:
        import numpy as np

        bad = ~np.isfinite(array)
        if allow_minus_inf:
            bad &= ~np.isneginf(array)
        if not bad.any():
            return
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        count, value = int(bad.sum()), float(array[first])
    kind = "NaN" if math.isnan(value) else f"{value}"
    more = f" ({count} non-finite entries in all)" if count > 1 else ""
    raise ValueError(
        f"{name} contains {kind} at index {first}{more}; attention would spread it into NaN outputs without a "
        f"word. Find where it came from (a division by zero, an overflow, the log of 0) and fix it there"
    )


def _all_finite(array: Any) -> bool:
    if _sum_allows(array, allow_minus_inf=False):
        return True
    if _is_torch(array):
        import torch

        return bool(torch.isfinite(array.detach()).all())
    import numpy as np

    return bool(np.isfinite(array).all())


def _largest(array: Any) -> float:
    if _is_torch(array):
        return float(array.detach().abs().max()) if array.numel() else 0.0
    import numpy as np

    return float(np.abs(array).max()) if array.size else 0.0


ATTENTION_OVERFLOW = (
    "the attention scores grow with the square of the input, and the result would be NaN. Scale {name} "
    "down first, e.g. divide it by its largest absolute value, or normalise it (LayerNorm)"
)
NORM_OVERFLOW = (
    "LayerNorm squares it for the variance, and every output would be 0. Scale {name} down first, e.g. "
    "divide it by its largest absolute value (LayerNorm hardly depends on the scale)"
)


def check_overflow(what: str, result: Any, inputs: dict[str, Any], why: str = ATTENTION_OVERFLOW) -> None:
    """``ValueError`` if ``result``, computed from finite ``inputs`` (and finite weights), holds NaN or
    inf: a number on the way overflowed the dtype. The layers refuse such inputs rather than return
    NaN; the message names the largest input and its magnitude, then says ``why`` and the fix
    (`ATTENTION_OVERFLOW` or `NORM_OVERFLOW`, with ``{name}`` for the input's name).

    Costs one sum of ``result`` when all is well.
    """
    if _all_finite(result):
        return
    name, given = max(inputs.items(), key=lambda item: _largest(item[1]))
    dtype = str(given.dtype).replace("torch.", "")
    raise ValueError(
        f"{what} overflowed: {name} is finite but so large (largest |{name}| = {_largest(given):.3g}) that "
        f"numbers computed from it exceed {dtype}: " + why.format(name=name)
    )


def check_relative_error_inputs(output: Any, reference: Any, library: Library) -> None:
    """``output`` and ``reference``: arrays of ``library`` of one shape, the reference not all zeros."""
    check_array("output", output, library, "(...)")
    check_array("reference", reference, library, "(...)")
    if tuple(output.shape) != tuple(reference.shape):
        raise ValueError(
            f"output and reference must have the same shape, got {tuple(output.shape)} and {tuple(reference.shape)}"
        )
    if not bool((reference != 0).any()):
        raise ValueError("reference is all zeros: an error relative to it is undefined (it would divide by 0)")


def check_norm_inputs(x: Any, gain: Any, bias: Any, eps: Any, library: Library) -> None:
    """A normalisation's ``x (..., D)``, ``gain (D,)``, optional ``bias (D,)`` and ``eps > 0``."""
    check_array("x", x, library, "(..., D)")
    D = int(x.shape[-1])
    for name, vector in (("gain", gain), ("bias", bias)):
        if vector is None and name == "bias":
            continue
        check_array(name, vector, library, "(D,)")
        if tuple(vector.shape) != (D,):
            raise ValueError(
                f"{name} must have shape (D,) = ({D},), one entry per feature of x, got {tuple(vector.shape)}"
            )
    check_eps(eps)


def check_eps(eps: Any) -> float:
    """A normalisation's ``eps`` as a Python float: a finite positive real number (NumPy floats too)."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a small positive float such as 1e-5, got {type(eps).__name__} {eps!r}")
    value = float(eps)
    if not value > 0:
        raise ValueError(f"eps must be a positive float (it keeps LayerNorm from dividing by zero), got {value}")
    if not math.isfinite(value):
        raise ValueError(
            f"eps must be a positive float and finite, got {value}: LayerNorm divides by sqrt(var + eps), "
            f"so an infinite eps turns every output into 0; use a small value such as 1e-5"
        )
    return value


def check_rate(name: str, value: Any) -> float:
    """A learning rate as a Python float: ``TypeError`` unless a real number, ``ValueError`` unless
    finite and positive (a negative rate climbs the loss instead of descending it)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive float such as 0.01, got {type(value).__name__} {value!r}")
    rate = float(value)
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(
            f"{name} must be a finite positive float such as 0.01 (the optimiser's step size; a negative "
            f"rate climbs the loss), got {rate}"
        )
    return rate


def check_record(record: Any, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """The NumPy float arrays of a record (a dataclass of a trained model): each named attribute of
    ``record`` must have the shape ``shapes`` gives (read from the record's config)."""
    kind = type(record).__name__
    for name, shape in shapes.items():
        array = getattr(record, name)
        check_array(f"{kind}.{name}", array, "numpy", "(...)")
        if tuple(array.shape) != shape:
            raise ValueError(
                f"{kind}.{name} must have shape {shape} for {record.config}, got {tuple(array.shape)}"
            )


def check_flag(name: str, value: Any) -> bool:
    """``TypeError`` unless ``value`` is ``True`` or ``False`` (a string such as "False" is truthy)."""
    if type(value).__name__ not in ("bool", "bool_"):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_ids(name: str, ids: Any, layout: str, limit: int) -> None:
    """Integer ids (tokens, positions) laid out as ``layout``, each in ``0 .. limit - 1``."""
    check_array(name, ids, "numpy", layout, floating=False)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer ids, got dtype {ids.dtype}")
    if ids.size and not 0 <= ids.min() <= ids.max() < limit:
        raise ValueError(f"{name} must be in 0 .. {limit - 1}, got {ids.min()} .. {ids.max()}")


def check_instance(name: str, value: Any, kind: type | tuple[type, ...], example: str) -> None:
    """``TypeError`` unless ``value`` is a ``kind``; ``example`` says how to make one."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {example}, got {type(value).__name__}")


def check_float_dtype(dtype: Any, library: Library) -> Any:
    """A layer's ``dtype`` argument: ``TypeError`` unless a floating-point type of ``library``."""
    if library == "torch":
        import torch

        if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
            return dtype
        example = "torch.float32 or torch.float64"
    else:
        import numpy as np

        try:
            if np.dtype(dtype).kind == "f":
                return np.dtype(dtype)
        except TypeError:
            pass
        example = "np.float32 or np.float64"
    raise TypeError(f"dtype must be a floating-point type such as {example}, got {dtype!r}")


def check_weight(name: str, weight: Any, shape: tuple[int, ...], library: Library, layout: str) -> None:
    """A weight handed to ``from_weights``: an array of ``library``, floating point, of ``shape``."""
    check_array(name, weight, library, layout)
    if tuple(weight.shape) != shape:
        raise ValueError(f"{name} must have shape {layout} = {shape}, got {tuple(weight.shape)}")
    check_finite(name, weight)


def check_same_dtype(named: dict[str, Any]) -> Any:
    """``TypeError`` unless every array in ``named`` has one dtype; returns it."""
    dtypes = [str(array.dtype) for array in named.values()]
    if len(set(dtypes)) > 1:
        *rest, last = named
        names = f"{', '.join(rest)} and {last}"
        raise TypeError(
            f"{names} must share one dtype, got {', '.join(dtypes)}; convert them to one precision first"
        )
    return next(iter(named.values())).dtype


# ----- attention arguments -------------------------------------------------------------------
def check_qkv(q: Any, k: Any, v: Any, allowed: Any, library: Library) -> None:
    """Everything ``attention(q (..., T, d), k (..., S, d), v (..., S, d_v), allowed)`` needs."""
    check_array("q", q, library, "(..., T, d)")
    check_array("k", k, library, "(..., S, d)")
    check_array("v", v, library, "(..., S, d_v)")
    check_same_dtype({"q": q, "k": k, "v": v})
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same feature width d, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same source length S, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    check_source_length("k", k.shape)
    if q.shape[-1] == 0:
        raise ValueError(
            f"q and k have no features (d=0, q {tuple(q.shape)}): every score would be 0/sqrt(0) = NaN; "
            f"queries and keys need at least one feature"
        )
    for name, array in (("q", q), ("k", k), ("v", v)):
        check_finite(name, array)
    leading = [tuple(a.shape[:-2]) for a in (q, k, v)]
    for axis in range(1, max(len(lead) for lead in leading) + 1):
        if len({lead[-axis] for lead in leading if len(lead) >= axis} - {1}) > 1:
            raise ValueError(
                f"the leading (batch/head) axes of q, k and v do not broadcast: {leading[0]}, "
                f"{leading[1]} and {leading[2]}; they must match or be 1"
            )
    if allowed is not None:
        scores_shape = (*_broadcast(leading), q.shape[-2], k.shape[-2])
        check_mask(allowed, library, scores_shape)


def _broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    width = max(len(shape) for shape in shapes)
    padded = [(1,) * (width - len(shape)) + shape for shape in shapes]
    return tuple(max(sizes) for sizes in zip(*padded, strict=True))


def check_source_length(name: str, shape: Sequence[int]) -> None:
    """``ValueError`` if there are no source positions (S = 0): a softmax over nothing is undefined."""
    if shape[-2] == 0:
        raise ValueError(
            f"{name} has no source positions (S=0, shape {tuple(shape)}); attention needs at least one "
            f"position to attend to"
        )


def check_mask(allowed: Any, library: Library, scores_shape: Sequence[int]) -> None:
    """A boolean ``allowed`` mask (``True`` = may attend) broadcastable to the scores ``(..., T, S)``,
    with at least one allowed position in every query row."""
    _check_bool(allowed, library)
    if not _broadcasts(tuple(allowed.shape), tuple(scores_shape)):
        raise ValueError(
            f"allowed has shape {tuple(allowed.shape)}, which does not broadcast to the attention scores "
            f"(..., T, S) = {tuple(scores_shape)}; its last two axes must be (T, S) or 1"
        )
    check_rows_allowed(allowed)


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    return len(shape) <= len(target) and all(m in (1, t) for m, t in zip(shape[::-1], target[::-1], strict=False))


def _check_bool(allowed: Any, library: Library) -> None:
    if getattr(allowed, "dtype", None) is None:
        raise TypeError(f"allowed must be a boolean array, got {type(allowed).__name__}")
    if str(allowed.dtype) not in ("bool", "torch.bool"):
        raise TypeError(
            f"allowed must be a boolean mask (True = may attend), got dtype {allowed.dtype}. "
            f"If you have an additive mask of 0 and -inf, use allowed = (mask == 0)"
        )
    check_library("allowed", allowed, library)


def check_rows_allowed(allowed: Any) -> None:
    """``ValueError`` if a query row of ``allowed`` has no allowed position (its softmax would be NaN)."""
    if not bool(allowed.any(-1).all()):
        raise ValueError(
            "a query row has no allowed position (its row of `allowed` is all False), so its softmax "
            "would be 0/0 = NaN. Make sure every query may attend to at least one source position; "
            "for padded queries, allow one position and ignore their outputs"
        )


# ----- layer arguments -----------------------------------------------------------------------
def check_layer_inputs(
    query: Any,
    context: Any,
    width: int,
    dtype: Any,
    library: Library,
    names: tuple[str, str] = ("query", "context"),
    dtype_fix: str | None = None,
) -> tuple[int, int, int]:
    """A layer call's ``query (B, T, D)`` and ``context (B, S, D)``; returns ``(B, T, S)``.

    ``names`` are the arguments' names in messages (a self-attention layer passes its ``x`` twice);
    ``dtype_fix`` as in `check_array`.
    """
    q_name, c_name = names
    check_array(q_name, query, library, "(B, T, D)", dtype, dtype_fix=dtype_fix)
    check_array(c_name, context, library, "(B, S, D)", dtype, dtype_fix=dtype_fix)
    for name, shape in ((q_name, tuple(query.shape)), (c_name, tuple(context.shape))):
        check_width(name, shape, width)
    check_source_length(c_name, context.shape)
    check_finite(q_name, query)
    if context is not query:
        check_finite(c_name, context)
    if query.shape[0] != context.shape[0]:
        raise ValueError(
            f"query and context must have the same batch size B, got {query.shape[0]} and {context.shape[0]}"
        )
    return int(query.shape[0]), int(query.shape[1]), int(context.shape[1])


def check_width(name: str, shape: tuple[int, ...], width: int) -> None:
    """``ValueError`` unless the last axis of ``shape`` is the layer width ``D``."""
    if shape[-1] != width:
        raise ValueError(
            f"{name} has width {shape[-1]} on its last axis but the layer width D is {width}; "
            f"make sure the last axis holds the features (got shape {shape})"
        )


def layer_mask(allowed: Any, B: int, h: int, T: int, S: int, library: Library) -> Any:
    """Check a layer's ``allowed`` mask (or ``None``); return it broadcastable to ``(B, h, T, S)``.

    Accepted shapes: ``(T, S)``, ``(B, T, S)`` (the same mask for every head: it gets a head axis)
    and anything broadcastable to ``(B, h, T, S)``.
    """
    if allowed is None:
        return None
    _check_bool(allowed, library)
    shape = tuple(allowed.shape)
    if len(shape) not in (2, 3, 4):
        raise ValueError(f"allowed must have shape (T, S), (B, T, S) or (B, h, T, S), got {shape}")
    if not _broadcasts(shape, (B, T, S) if len(shape) == 3 else (B, h, T, S)):
        layout = {2: "(T, S)", 3: "(B, T, S)", 4: "(B, h, T, S)"}[len(shape)]
        raise ValueError(
            f"allowed has shape {shape} but this call needs {layout} with "
            f"B={B}, h={h}, T={T}, S={S} (or 1 on an axis to share it)"
        )
    check_rows_allowed(allowed)
    return allowed[:, None] if len(shape) == 3 else allowed


def check_attend_inputs(
    query: Any, k: Any, v: Any, layer: Any, library: Library
) -> tuple[int, int, int]:
    """A GQA layer's ``attend(query (B, T, D), k, v (B, h_kv, S, d_h))``; returns ``(B, T, S)``.

    ``layer`` supplies ``width``, ``kv_heads``, ``head_width`` and ``dtype``.
    """
    check_array("query", query, library, "(B, T, D)", layer.dtype)
    check_width("query", tuple(query.shape), layer.width)
    check_array("k", k, library, "(B, h_kv, S, d_h)", layer.dtype)
    check_array("v", v, library, "(B, h_kv, S, d_h)", layer.dtype)
    B, h_kv, S, d_h = k.shape
    if (h_kv, d_h) != (layer.kv_heads, layer.head_width) or v.shape != k.shape:
        raise ValueError(
            f"k and v must both be (B, h_kv, S, d_h) with h_kv={layer.kv_heads}, d_h={layer.head_width}; "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    check_source_length("k", (S, d_h))
    if query.shape[0] != B:
        raise ValueError(f"query and k must have the same batch size B, got {query.shape[0]} and {B}")
    for name, array in (("query", query), ("k", k), ("v", v)):
        check_finite(name, array)
    return int(B), int(query.shape[1]), int(S)


# ----- files ---------------------------------------------------------------------------------
def load_npz(path: Any, kind: str) -> dict[str, Any]:
    """Every array of the ``.npz`` at ``path``; ``ValueError`` naming ``kind`` if it is not one."""
    import zipfile

    import numpy as np

    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path} is not {kind}: NumPy cannot read it as a .npz archive") from error
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is not {kind}: it holds one array, not a .npz archive of named arrays")
    with data:
        return {name: data[name] for name in data.files}
