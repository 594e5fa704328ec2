"""Peak memory of naive vs tiled attention at T = S = 2048, h = 8, d_h = 64, B = 1, float64.

    python benchmarks/tiled_memory.py

Measures the peak of NumPy allocations with `tracemalloc` while each version runs (the inputs are
allocated before the measurement starts), and the largest absolute difference of the outputs.
Targets: peak ratio naive / tiled >= 20 and difference <= 1e-12. Needs about 1.2 GB of free memory
for the naive version, which materialises ``B*h*T*S`` scores and weights (256 MiB each).

For information (lesson 08 points here, because `torch.profiler` writes diagnostics to stderr,
which a checked notebook cannot hold): PyTorch's `scaled_dot_product_attention` on the same inputs,
its time and its peak memory. `tracemalloc` cannot see PyTorch's allocator, so the peak is taken
from `torch.profiler.profile(profile_memory=True)`: the running total of the allocations and frees
it records during the call. It also lists the attention operators that run inside
`nn.MultiheadAttention`'s eval-mode fast path, which a Python-level spy cannot see.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import nn
from torch.profiler import ProfilerActivity, profile

from lessons_lib.efficient import tiled_attention
from lessons_lib.mha_numpy import attention

B, H, T, S, D_H = 1, 8, 2048, 2048, 64
BLOCK, QUERY_BLOCK = 256, 256
TARGET_RATIO, TARGET_DIFF = 20.0, 1e-12


def peak_bytes(run: Callable[[], NDArray[np.floating]]) -> tuple[int, NDArray[np.floating], float]:
    """``(peak traced bytes, result, seconds)`` of one call of ``run``."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, result, seconds


def torch_peak_bytes(run: Callable[[], object]) -> tuple[int, float, list[str]]:
    """``(peak bytes PyTorch's CPU allocator held, seconds, operator names)`` of one call of ``run``.

    The profiler records each allocation (+bytes) and free (-bytes) in time order; the peak is
    the largest running total. Tensors that existed before the call are not counted.
    """
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    seconds = time.perf_counter() - start
    held = peak = 0
    names = []
    for event in sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns()):
        if event.name() == "[memory]":
            held += event.nbytes()
            peak = max(peak, held)
        else:
            names.append(event.name())
    return peak, seconds, names


def fast_path_operators() -> list[str]:
    """Attention-related operators inside `nn.MultiheadAttention`'s eval-mode fast path."""
    mha = nn.MultiheadAttention(64, 4, batch_first=True, dtype=torch.float64).eval()
    x = torch.randn(2, 32, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        _, _, names = torch_peak_bytes(lambda: mha(x, x, x, need_weights=False))
    return sorted({name for name in names if "attention" in name or "softmax" in name})


def main() -> int:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, T, D_H))
    k = rng.standard_normal((B, H, S, D_H))
    v = rng.standard_normal((B, H, S, D_H))
    naive_peak, naive_out, naive_s = peak_bytes(lambda: attention(q, k, v)[0])
    tiled_peak, tiled_out, tiled_s = peak_bytes(
        lambda: tiled_attention(q, k, v, block_size=BLOCK, query_block_size=QUERY_BLOCK)
    )
    ratio = naive_peak / tiled_peak
    diff = float(np.abs(naive_out - tiled_out).max())
    mib = 2**20
    print(f"B={B} h={H} T={T} S={S} d_h={D_H} float64; tiled blocks: keys {BLOCK}, queries {QUERY_BLOCK}")
    print(f"one (B, h, T, S) float64 tensor: {B * H * T * S * 8 / mib:.0f} MiB")
    print(f"naive peak: {naive_peak / mib:.1f} MiB  ({naive_s:.2f} s)")
    print(f"tiled peak: {tiled_peak / mib:.1f} MiB  ({tiled_s:.2f} s)")
    qt, kt, vt = (torch.from_numpy(a) for a in (q, k, v))
    F.scaled_dot_product_attention(qt[..., :8, :], kt, vt)  # warm up: the first call loads the kernel
    sdpa_peak, sdpa_s, _ = torch_peak_bytes(lambda: F.scaled_dot_product_attention(qt, kt, vt))
    sdpa_diff = float(np.abs(F.scaled_dot_product_attention(qt, kt, vt).numpy() - naive_out).max())
    print(f"SDPA peak (torch.profiler): {sdpa_peak / mib:.1f} MiB  ({sdpa_s:.2f} s, with the profiler on), "
          f"max |naive - SDPA|: {sdpa_diff:.2e}  [information, no target]")
    print("operators inside nn.MultiheadAttention's eval fast path (need_weights=False):", fast_path_operators())
    ratio_ok, diff_ok = ratio >= TARGET_RATIO, diff <= TARGET_DIFF
    print(f"peak ratio naive/tiled: {ratio:.1f} (target >= {TARGET_RATIO:.0f}) {'PASS' if ratio_ok else 'MISS'}")
    print(f"max |naive - tiled|: {diff:.2e} (target <= {TARGET_DIFF:.0e}) {'PASS' if diff_ok else 'MISS'}")
    return 0 if ratio_ok and diff_ok else 1


if __name__ == "__main__":
    sys.exit(main())
