"""Lesson 10: the time of one generated character as the text grows, with the KV cache and without.

    python benchmarks/generation_cache.py            # measure, print, write lessons_lib/data/generation_cache.json
    python benchmarks/generation_cache.py --repeats 5 --out /tmp/g.json

The model is lesson 10's shipped character GPT, run by `lessons_lib.shakespeare` (NumPy, float32, as
the lesson runs it). Two ways of producing character ``t + 1`` of a text that holds ``t + 1`` characters:

- **cached**: `shakespeare.decode_step`: the new position's query, key and value only; the keys and
  values of the ``t`` earlier positions come from the `kv_cache.KVCache` (lesson 06);
- **recompute**: `shakespeare.run` on the whole text so far, keeping only the last position's logits.

For each text length in `LENGTHS` the script times both (the shortest of ``--repeats`` runs of each,
the cache filled beforehand) and writes the per-character seconds and their ratio. The ratio, not the
seconds, is what lesson 10 quotes: seconds depend on the machine and what else runs on it (the load
average is printed and stored beside them). One NumPy/BLAS thread, so the two are measured alike.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

from lessons_lib.kv_cache import KVCache
from lessons_lib.shakespeare import DATA, ShakespeareModel, decode_step, load_model, load_text, run

LENGTHS = (8, 16, 32, 64, 128, 192, 255)
OUT = DATA / "generation_cache.json"


def shortest(repeats: int, work):  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def step_from(model: ShakespeareModel, cache: KVCache, keys: list, values: list, token: int) -> None:  # type: ignore[type-arg]
    """One cached step after the same cached positions each time (the cache is reset to them first)."""
    cache.keys, cache.values = list(keys), list(values)
    decode_step(model, token, cache)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    model = load_model()
    ids = model.vocabulary.encode(load_text("valid")[: model.config.context])
    rows = []
    for t in LENGTHS:
        cache = KVCache(model.config.layers)
        for token in ids[:t]:  # positions 0 .. t-1 cached
            decode_step(model, int(token), cache)
        keys = [None if k is None else k.copy() for k in cache.keys]
        values = [None if v is None else v.copy() for v in cache.values]

        cached_step = partial(step_from, model, cache, keys, values, int(ids[t]))
        recompute_step = partial(run, model, ids[None, : t + 1])
        cached, recomputed = shortest(args.repeats, cached_step), shortest(args.repeats, recompute_step)
        rows.append(
            {
                "characters": t + 1,
                "cached_seconds": cached,
                "recompute_seconds": recomputed,
                "ratio": round(recomputed / cached, 2),
            }
        )
        print(
            f"text of {t + 1:3d} characters: cached {cached * 1e3:7.3f} ms, recompute {recomputed * 1e3:7.3f} ms, "
            f"ratio {recomputed / cached:6.2f}"
        )
    result = {
        "model": "lessons_lib/data/shakespeare_gpt.npz, float32, NumPy",
        "repeats": args.repeats,
        "threads": 1,
        "load_average": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"load average {result['load_average']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
