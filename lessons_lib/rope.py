"""Rotary position embedding (RoPE), small and in NumPy (lesson 07).

RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding",
arXiv:2104.09864) splits a feature vector of even width ``d`` into ``d / 2`` pairs
``(x[2i], x[2i+1])`` and rotates pair ``i`` by the angle ``position * base ** (-2i / d)``.
Rotations keep lengths, and the dot product of a query rotated at position ``m`` with a key
rotated at position ``n`` depends only on ``m - n``: attention sees relative positions.

Lesson 07 uses it to show why latent attention (MLA) keeps the rotary part of the keys apart.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.validation import check_array, check_int

__all__ = ["apply_rope", "rope_angles", "rotation_matrix"]

Array = NDArray[np.floating]


def _check_features(d: int) -> int:
    d = check_int("d", d)
    if d % 2 != 0:
        raise ValueError(f"RoPE rotates pairs of features, so the feature width d must be even; got d={d}")
    return d


def _check_base(base: float) -> float:
    if isinstance(base, bool) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a number greater than 1 (RoPE uses 10000), got {type(base).__name__} {base!r}")
    if not base > 1.0 or not math.isfinite(base):
        raise ValueError(f"base must be a finite number greater than 1 (RoPE uses 10000), got base={base}")
    return float(base)


Positions = NDArray[np.integer] | NDArray[np.floating] | Sequence[float]


def _positions_array(positions: Positions) -> Array:
    pos = np.asarray(positions)
    if pos.ndim != 1:
        raise ValueError(f"positions must be a 1-D array (one position per row), got shape {pos.shape}")
    if pos.dtype.kind not in "iuf":  # bool, complex and strings are not positions
        raise TypeError(f"positions must be integers or floats, got dtype {pos.dtype}")
    return pos.astype(np.float64)


def rope_angles(positions: Positions, d: int, base: float = 10000.0) -> Array:
    """Rotation angles ``(P, d / 2)``: ``angle[p, i] = positions[p] * base ** (-2i / d)``."""
    return _angles(_positions_array(positions), _check_features(d), _check_base(base))


def _angles(pos: Array, d: int, base: float) -> Array:
    frequencies = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,)
    return pos[:, None] * frequencies[None, :]  # (P, 1) * (1, d/2) -> (P, d/2)


def apply_rope(x: Array, positions: Positions, base: float = 10000.0) -> Array:
    """Rotate each feature pair of ``x (..., P, d)``; row ``p`` is at position ``positions[p]``.

    Returns an array of the same shape and dtype. Pair ``i`` is features ``(2i, 2i + 1)``.
    """
    check_array("x", x, "numpy", "(..., P, d)")
    _check_features(x.shape[-1])
    pos = _positions_array(positions)
    if pos.shape[0] != x.shape[-2]:
        raise ValueError(
            f"positions has {pos.shape[0]} entries but x has {x.shape[-2]} rows on axis -2 "
            f"(shape {tuple(x.shape)}); give one position per row"
        )
    return _rope(x, pos, _check_base(base))


def _rope(x: Array, positions: NDArray[np.integer[Any]] | Array, base: float) -> Array:
    """`apply_rope` without its checks, for callers that checked ``x`` and built ``positions`` themselves."""
    return _rotate(x, _angles(np.asarray(positions, dtype=np.float64), x.shape[-1], base))


def _rotate(x: Array, angles: Array) -> Array:
    """Rotate feature pair ``i`` of every row ``p`` of ``x (..., P, d)`` by ``angles[p, i]``."""
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)  # (P, d/2) each
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., P, d/2) each
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rotation_matrix(position: float, d: int, base: float = 10000.0) -> NDArray[np.float64]:
    """The ``(d, d)`` matrix ``R`` with ``apply_rope(x, [position]) == x @ R`` for a row ``x``.

    Block-diagonal with one 2x2 rotation per feature pair; used to show that the matrix between a
    query and a key depends on both positions.
    """
    angles = rope_angles([position], d, base)[0]  # (d/2,)
    R = np.zeros((len(angles) * 2, len(angles) * 2))
    for i, a in enumerate(angles):
        c, s = np.cos(a), np.sin(a)
        # row vector convention: (x0, x1) @ [[c, s], [-s, c]] = (x0 c - x1 s, x0 s + x1 c)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    return R
