"""The cache-versus-quality ladder of lesson 10's model: smaller KV caches made from the trained weights.

Two conversions of every block's key and value projections ``W_k, W_v (D, h_kv * d_h)``, in NumPy's
``(in, out)`` layout, and the file of measured results the lessons read:

- `pooled_arrays`: GQA / MQA by averaging each group's K and V columns (lesson 06, Ainslie et al. 2023);
- `latent_factors` / `latent_arrays`: a latent cache of ``d_c`` numbers by a truncated SVD of the stacked
  ``[W_k | W_v]`` (lesson 07's ``W_dkv``, ``W_uk``, ``W_uv``);
- `load_ladder`: ``lessons_lib/data/shakespeare_ladder.json``, written by ``scripts/cache_ladder.py``
  (uptraining, the same shapes trained from scratch, the head-count sweep); lessons only read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.gqa_numpy import pool_kv_columns
from lessons_lib.shakespeare import DATA, GPTConfig, check_arrays
from lessons_lib.validation import check_array, check_instance, check_int

__all__ = ["LADDER_PATH", "cache_numbers", "latent_arrays", "latent_factors", "load_ladder", "pooled_arrays"]

LADDER_PATH = DATA / "shakespeare_ladder.json"
Arrays = dict[str, NDArray[Any]]


def pooled_arrays(arrays: Arrays, config: GPTConfig, kv_heads: int) -> tuple[Arrays, GPTConfig]:
    """Every block's ``wk`` and ``wv`` pooled to ``kv_heads`` K/V heads, and the config that says so."""
    check_arrays(arrays, config)
    out = dict(arrays)
    for i in range(config.layers):
        for name in ("wk", "wv"):
            out[f"block{i}_{name}"] = pool_kv_columns(arrays[f"block{i}_{name}"], config.kv_heads, kv_heads)
    return out, GPTConfig(**{**config.__dict__, "kv_heads": kv_heads})


def latent_factors(
    wk: NDArray[Any], wv: NDArray[Any], rank: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``W_dkv (D, d_c)``, ``W_uk (d_c, h_kv d_h)``, ``W_uv (d_c, h_kv d_h)`` whose products
    ``W_dkv @ W_uk``, ``W_dkv @ W_uv`` are the best rank-``d_c`` approximation of ``[W_k | W_v]``.

    Truncated SVD ``[W_k | W_v] = U S V^T``; the singular values are split evenly between the two
    sides (``U sqrt(S)`` and ``sqrt(S) V^T``), so neither factor starts much larger than the other
    when the pair is trained further. Float64.
    """
    check_array("wk", wk, "numpy", "(D, h_kv * d_h)")
    check_array("wv", wv, "numpy", "(D, h_kv * d_h)")
    if wk.shape != wv.shape:
        raise ValueError(f"wk and wv must have one shape (D, h_kv * d_h), got {wk.shape} and {wv.shape}")
    D, kv = wk.shape
    rank = check_int("rank", rank, high=min(D, 2 * kv), symbol="d_c")
    stacked = np.concatenate([wk, wv], axis=1).astype(np.float64)  # (D, 2 h_kv d_h)
    u, s, vt = np.linalg.svd(stacked, full_matrices=False)
    root = np.sqrt(s[:rank])
    w_dkv = u[:, :rank] * root  # (D, d_c): what a token caches is LN1(x) @ W_dkv
    up = root[:, None] * vt[:rank]  # (d_c, 2 h_kv d_h)
    return w_dkv, up[:, :kv], up[:, kv:]


def latent_arrays(arrays: Arrays, config: GPTConfig, rank: int) -> Arrays:
    """Every block's ``wk``, ``wv`` replaced by ``W_dkv @ W_uk``, ``W_dkv @ W_uv`` of rank ``d_c``
    (float32): the same function as a latent cache, run by the ordinary model."""
    check_arrays(arrays, config)
    out = dict(arrays)
    for i in range(config.layers):
        w_dkv, w_uk, w_uv = latent_factors(arrays[f"block{i}_wk"], arrays[f"block{i}_wv"], rank)
        out[f"block{i}_wk"] = (w_dkv @ w_uk).astype(np.float32)
        out[f"block{i}_wv"] = (w_dkv @ w_uv).astype(np.float32)
    return out


def cache_numbers(config: GPTConfig, rank: int | None = None) -> int:
    """Numbers one token caches in one layer: ``2 h_kv d_h`` for keys and values, or ``d_c`` for a latent."""
    check_instance("config", config, GPTConfig, "a shakespeare.GPTConfig, e.g. GPTConfig()")
    if rank is None:
        return 2 * config.kv_heads * config.head_width
    return check_int("rank", rank, symbol="d_c")


def load_ladder(path: Path | str = LADDER_PATH) -> dict[str, Any]:
    """The measured ladder (``scripts/cache_ladder.py``'s JSON): ``uptrained``, ``scratch``, ``head_counts``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python scripts/cache_ladder.py --help` to write it")
    ladder: dict[str, Any] = json.loads(path.read_text())
    return ladder
