"""Shrink the KV cache of lesson 10's model without training: GQA/MQA by pooling, a latent by SVD.

    python scripts/convert_shakespeare.py     # writes lessons_lib/data/shakespeare_conversions.json

The first rung of issue 30's cache-versus-quality ladder, measured on the shipped model
(`lessons_lib.shakespeare`, h = h_kv = 4 heads of d_h = 32 in each of its 4 layers). Each variant
changes only the key and value projections ``W_k, W_v (D, h_kv * d_h)`` of every block:

- **GQA / MQA by pooling** (lesson 06, Ainslie et al. 2023's conversion before their uptraining):
  `cache_ladder.pooled_arrays` (`gqa_numpy.pool_kv_columns`) averages the K (and V) columns of each
  group of ``g = h / h_kv`` heads;
  a token then caches ``2 * h_kv * d_h`` numbers per layer instead of ``2 * h * d_h``.
- **A latent by truncated SVD** (lesson 07's ``W_dkv`` / ``W_uk`` / ``W_uv``): the stacked
  ``[W_k | W_v] (D, 2 h d_h) = U S V^T`` is cut to its ``d_c`` largest singular values,
  ``W_dkv = U_c sqrt(S_c) (D, d_c)`` and ``[W_uk | W_uv] = sqrt(S_c) V_c^T (d_c, 2 h d_h)``
  (`cache_ladder.latent_factors`); a token caches the latent
  ``c = LN1(x) @ W_dkv``, ``d_c`` numbers per layer. The model has learned absolute positions, no
  rotary part, so nothing needs decoupling: the product ``W_dkv @ W_uk`` is a rank-``d_c`` ``W_k``, and
  the loss is measured with exactly that (absorption changes the cost, not the function: lesson 07).
  ``[W_k | W_v]`` has ``D = 128`` rows, so its rank is at most ``D``: ``d_c = D`` is exact, at half the
  multi-head cache (caching ``LN1(x)`` itself would do as much); smaller ``d_c`` trade loss for bytes.

For each variant: the numbers cached per token and layer, the bytes per token for the whole model at
2 bytes per number (16-bit caches, as lesson 06 counts), and the validation loss on the same 400
windows as the ablations of ``shakespeare_gpt.json`` (PyTorch), plus the loss on the 16 windows lesson 10
uses (NumPy; ``tests/test_shakespeare_conversions.py`` recomputes two of them). No training: the next rungs
(uptraining, the same shapes from scratch, the head-count sweep) are ``scripts/cache_ladder.py``'s.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from numpy.typing import NDArray

from lessons_lib.cache_ladder import latent_arrays, pooled_arrays
from lessons_lib.shakespeare import (
    DATA,
    GPTConfig,
    load_arrays,
    load_text,
    loss,
    model_from_arrays,
    validation_windows,
)
from lessons_lib.shakespeare_torch import ABLATION_WINDOWS, SAMPLE_WINDOWS, CharGPT, validation_loss

OUT = DATA / "shakespeare_conversions.json"
KV_HEADS = (4, 2, 1)
LATENT_RANKS = (128, 96, 64, 32, 16)  # [W_k | W_v] is (D, 2 h d_h) = (128, 256): its rank is at most D
BYTES_PER_NUMBER = 2

Arrays = dict[str, NDArray[Any]]


def main(argv: list[str]) -> int:
    start = time.perf_counter()
    arrays, config, vocabulary = load_arrays()
    text = load_text("valid")
    windows = torch.from_numpy(validation_windows(text, vocabulary, config.context, ABLATION_WINDOWS))
    sample = validation_windows(text, vocabulary, config.context, SAMPLE_WINDOWS)
    per_layer_mha = 2 * config.kv_heads * config.head_width
    variants: list[tuple[str, str, int, Arrays, GPTConfig, int]] = []
    for kv_heads in KV_HEADS:
        new, cfg = pooled_arrays(arrays, config, kv_heads)
        kind = {config.heads: "MHA (shipped)", 1: "MQA (pooled)"}.get(kv_heads, "GQA (pooled)")
        variants.append((f"h_kv = {kv_heads}", kind, kv_heads, new, cfg, 2 * kv_heads * config.head_width))
    for rank in LATENT_RANKS:
        variants.append((f"d_c = {rank}", "latent (SVD)", rank, latent_arrays(arrays, config, rank), config, rank))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    rows: list[dict[str, Any]] = []
    try:
        for name, kind, size, new, cfg, per_layer in variants:
            torch_loss = validation_loss(CharGPT.from_arrays(new, cfg), windows)
            numpy_loss = loss(model_from_arrays(new, cfg, vocabulary), sample)
            rows.append(
                {
                    "name": name,
                    "kind": kind,
                    "size": size,
                    "cached_numbers_per_token_per_layer": per_layer,
                    "cache_bytes_per_token": per_layer * config.layers * BYTES_PER_NUMBER,
                    "cache_share": round(per_layer / per_layer_mha, 4),
                    "validation_loss": round(torch_loss, 4),
                    "sample_loss": round(numpy_loss, 4),
                }
            )
            print(
                f"{kind:14s} {name:10s} caches {per_layer:3d} numbers/token/layer "
                f"({per_layer * config.layers * BYTES_PER_NUMBER:5d} B/token): loss {torch_loss:.4f} "
                f"(16 windows {numpy_loss:.4f})",
                flush=True,
            )
    finally:
        torch.set_num_threads(threads)
    base = rows[0]["validation_loss"]
    for row in rows:
        row["loss_added"] = round(row["validation_loss"] - base, 4)
    result = {
        "model": "lessons_lib/data/shakespeare_gpt.npz",
        "windows": ABLATION_WINDOWS,
        "sample_windows": SAMPLE_WINDOWS,
        "bytes_per_number": BYTES_PER_NUMBER,
        "seconds": round(time.perf_counter() - start, 1),
        "variants": rows,
    }
    out = Path(argv[0]) if argv else OUT
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{result['seconds']:.0f} s; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
