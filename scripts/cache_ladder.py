"""The cache-versus-quality ladder on lesson 10's model, trained here: ``lessons_lib/data/shakespeare_ladder.json``.

    python scripts/cache_ladder.py uptrain             # converted models re-trained 5 %   (10 min here)
    python scripts/cache_ladder.py scratch "h_kv = 2"  # one shape trained from scratch     (12-14 min each)
    python scripts/cache_ladder.py scratch "h_kv = 1"
    python scripts/cache_ladder.py scratch "d_c = 64"
    python scripts/cache_ladder.py heads --seed 0      # h = 1, 2, 4, 8, 16 at width 128   (11-12 min a seed)
    python scripts/cache_ladder.py heads --seed 1
    python scripts/cache_ladder.py heads --seed 2

Each command trains on CPU with 2 threads, prints its time and merges its part into the JSON file
(other parts are kept), so each can be rerun alone; the seven took 83 minutes here, one after another.
Nothing here runs in a notebook or in the tests; ``tests/test_cache_ladder.py`` reruns a few steps of
each and checks the stored numbers.

- **uptrain**: ``scripts/convert_shakespeare.py``'s conversions of the shipped model (GQA ``h_kv = 2``,
  MQA ``h_kv = 1`` by pooling; latent caches ``d_c = 64, 32, 16`` by truncated SVD, now as trainable
  ``W_dkv``, ``W_uk``, ``W_uv``: `shakespeare_torch.latent_kv`), each trained further for 225 steps, 5 %
  of the shipped run's 4,500 (Ainslie et al. 2023 uptrained with 5 % of pre-training). The unconverted
  model gets the same 225 steps as the control: extra training alone is then not mistaken for the
  conversion's recovery. Every model and step sees the same batches (data seed 1, not the shipped run's 0).
  Two peak learning rates, 1e-3 and 3e-3, each for every model: the recovery depends on it.
- **scratch**: one converted shape trained from random weights for 4,725 steps, the steps the uptrained
  model had in all (4,500 + 225), with the shipped run's recipe: is converting worth it?
- **heads**: ``h = 1, 2, 4, 8, 16`` heads (``d_h = 128 .. 8``) at width ``D = 128``, all else the shipped
  model's, each trained for 650 steps (the budget 15 runs fit in) from one seed; the Q, K, V, O matrices
  start from the same numbers for every ``h`` of a seed (only their split into heads differs). Measured:
  the validation loss and, per head, the loss added when that head alone is zeroed (64 windows).

Every loss is the mean over all 487,168 validation characters (the 4 plays no model trains on), in nats.
Cache sizes count numbers a token keeps per layer: ``2 h_kv d_h`` keys and values, or ``d_c`` latent
numbers; bytes per token for the 4 layers at 2 bytes a number (a 16-bit cache).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_shakespeare import train

from lessons_lib.cache_ladder import LADDER_PATH, cache_numbers, pooled_arrays
from lessons_lib.shakespeare import GPTConfig, load_arrays, load_text, validation_windows
from lessons_lib.shakespeare_torch import CharGPT, latent_kv, validation_loss

THREADS = 2
BYTES_PER_NUMBER = 2
UPTRAIN_STEPS = 225  # 5 % of the shipped run's 4,500
UPTRAIN_LEARNING_RATES = (1e-3, 3e-3)  # peaks tried (the shipped run's was 3e-3); 22 warm-up steps, cosine to a tenth
UPTRAIN_DATA_SEED = 1
UPTRAINED = ("h_kv = 4", "h_kv = 2", "h_kv = 1", "d_c = 64", "d_c = 32", "d_c = 16")
SCRATCH = ("h_kv = 2", "h_kv = 1", "d_c = 64")
HEAD_COUNTS = (1, 2, 4, 8, 16)
SWEEP_STEPS = 650
SWEEP_SEEDS = (0, 1, 2)
ABLATION_WINDOWS = 64
FIRST = 8  # first training losses kept for the reruns in tests/test_cache_ladder.py


def shape(name: str, config: GPTConfig) -> tuple[GPTConfig, int | None]:
    """``"h_kv = 2"`` -> (config with 2 K/V heads, None); ``"d_c = 64"`` -> (config, 64)."""
    key, _, value = name.partition(" = ")
    if key == "h_kv":
        return replace(config, kv_heads=int(value)), None
    if key == "d_c":
        return config, int(value)
    raise ValueError(f"a shape is 'h_kv = N' or 'd_c = N', got {name!r}")


def cache_row(name: str, config: GPTConfig, rank: int | None) -> dict[str, Any]:
    numbers = cache_numbers(config, rank)
    mha = 2 * config.width
    kind = "latent" if rank is not None else {config.heads: "MHA", 1: "MQA"}.get(config.kv_heads, "GQA")
    return {
        "name": name,
        "kind": kind,
        "cached_numbers_per_token_per_layer": numbers,
        "cache_bytes_per_token": numbers * config.layers * BYTES_PER_NUMBER,
        "cache_share": round(numbers / mha, 4),
    }


def converted(
    name: str, steps: int | None = None, learning_rate: float = UPTRAIN_LEARNING_RATES[0]
) -> tuple[CharGPT, GPTConfig]:
    """The shipped model converted to shape ``name`` (no training), and the config to uptrain it with."""
    arrays, config, _ = load_arrays()
    new_config, rank = shape(name, config)
    if rank is None:
        new, new_config = pooled_arrays(arrays, config, new_config.kv_heads)
        model = CharGPT.from_arrays(new, new_config)
    else:
        model = latent_kv(CharGPT.from_arrays(arrays, config), rank)
    steps = UPTRAIN_STEPS if steps is None else steps
    up = replace(
        new_config,
        steps=steps,
        warmup=max(1, steps // 10),
        learning_rate=learning_rate,
        seed=UPTRAIN_DATA_SEED,
    )
    return model, up


def from_scratch(name: str, steps: int | None = None) -> tuple[CharGPT, GPTConfig]:
    """A model of shape ``name`` with fresh weights and the shipped recipe for ``steps`` steps."""
    _, shipped, _ = load_arrays()
    config, rank = shape(name, shipped)
    config = replace(config, steps=shipped.steps + UPTRAIN_STEPS if steps is None else steps)
    if steps is not None:
        config = replace(config, warmup=min(shipped.warmup, max(1, steps // 10)))
    model = CharGPT(config)
    if rank is not None:
        latent_kv(model, rank, from_weights=False, seed=config.seed)
    return model, config


def with_heads(heads: int, seed: int, steps: int | None = None) -> tuple[CharGPT, GPTConfig]:
    """A fresh model with ``heads`` heads of width ``D / heads``, trained ``steps`` (`SWEEP_STEPS`) steps
    from ``seed``."""
    _, shipped, _ = load_arrays()
    steps = SWEEP_STEPS if steps is None else steps
    config = replace(shipped, heads=heads, kv_heads=heads, steps=steps, warmup=max(1, steps // 10), seed=seed)
    return CharGPT(config), config


def every_window(config: GPTConfig) -> torch.Tensor:
    _, _, vocabulary = load_arrays()
    return torch.from_numpy(validation_windows(load_text("valid"), vocabulary, config.context))


def head_costs(model: CharGPT) -> list[list[float]]:
    """Loss added (nats) when one head is zeroed, on the first `ABLATION_WINDOWS` validation windows."""
    _, _, vocabulary = load_arrays()
    windows = torch.from_numpy(
        validation_windows(load_text("valid"), vocabulary, model.config.context, ABLATION_WINDOWS)
    )
    base = validation_loss(model, windows, fast=True)
    return [
        [round(validation_loss(model, windows, [(i, j)], fast=True) - base, 4) for j in range(model.config.heads)]
        for i in range(model.config.layers)
    ]


def run(model: CharGPT, config: GPTConfig) -> tuple[dict[str, Any], CharGPT]:
    _, _, vocabulary = load_arrays()
    record, model = train(config, vocabulary, log_every=0, eval_every=0, threads=THREADS, model=model, fast=True)
    return record, model


def merge(out: Path, section: str, key: str, row: dict[str, Any], about: dict[str, Any]) -> None:
    """Put ``row`` under ``section -> key`` of the JSON at ``out``, keeping everything else."""
    ladder: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    ladder.setdefault("written_by", "scripts/cache_ladder.py")
    ladder.setdefault("torch", torch.__version__)
    part = ladder.setdefault(section, {})
    part.setdefault("about", {}).update(about)
    part.setdefault("rows", {})[key] = row
    out.write_text(json.dumps(ladder, indent=1) + "\n")


def uptrain(out: Path, names: tuple[str, ...] = UPTRAINED) -> None:
    start = time.perf_counter()
    for name in names:
        runs = []
        model, config = converted(name)
        windows = every_window(config)
        before = validation_loss(model, windows, fast=True)  # the same converted model for every rate
        for rate in UPTRAIN_LEARNING_RATES:
            model, config = converted(name, learning_rate=rate)
            record, model = run(model, config)
            after = validation_loss(model, windows, fast=True)
            runs.append(
                {
                    "learning_rate": rate,
                    "validation_loss": round(after, 4),
                    "seconds": record["seconds"],
                    "first_losses": record["first_losses"][:FIRST],
                    "training_loss_every_50": record["training_loss_every_50"],
                }
            )
            print(
                f"{name:9s} converted {before:.4f} -> uptrained at {rate:g}: {after:.4f} ({record['seconds']:.0f} s)",
                flush=True,
            )
        row = cache_row(name, config, shape(name, config)[1]) | {"loss_converted": round(before, 4), "uptrained": runs}
        about = {"steps": config.steps, "warmup": config.warmup, "data_seed": config.seed, "threads": THREADS}
        merge(out, "uptrained", name, row, about)
    print(f"uptrain: {time.perf_counter() - start:.0f} s in all; wrote {out}")


def scratch(out: Path, name: str) -> None:
    start = time.perf_counter()
    model, config = from_scratch(name)
    print(f"{name}: {config.steps} steps from scratch ...", flush=True)
    record, model = run(model, config)
    final = validation_loss(model, every_window(config), fast=True)
    row = cache_row(name, config, shape(name, config)[1]) | {
        "validation_loss": round(final, 4),
        "steps": config.steps,
        "seconds": record["seconds"],
        "first_losses": record["first_losses"][:FIRST],
        "training_loss_every_50": record["training_loss_every_50"],
    }
    about = {k: v for k, v in asdict(config).items() if k not in ("kv_heads",)} | {"threads": THREADS}
    merge(out, "scratch", name, row, about)
    print(f"{name}: validation loss {final:.4f}; {time.perf_counter() - start:.0f} s; wrote {out}")


def heads(out: Path, seed: int, counts: tuple[int, ...] = HEAD_COUNTS) -> None:
    start = time.perf_counter()
    for h in counts:
        model, config = with_heads(h, seed)
        record, model = run(model, config)
        final = validation_loss(model, every_window(config), fast=True)
        costs = head_costs(model)
        row = {
            "heads": h,
            "head_width": config.head_width,
            "seed": seed,
            "validation_loss": round(final, 4),
            "head_costs": costs,
            "seconds": record["seconds"],
            "first_losses": record["first_losses"][:FIRST],
            "training_loss_every_50": record["training_loss_every_50"],
        }
        about = {
            "steps": config.steps,
            "warmup": config.warmup,
            "learning_rate": config.learning_rate,
            "batch": config.batch,
            "ablation_windows": ABLATION_WINDOWS,
            "threads": THREADS,
        }
        merge(out, "head_counts", f"h = {h}, seed {seed}", row, about)
        print(
            f"h = {h:2d} (d_h = {config.head_width:3d}), seed {seed}: loss {final:.4f} ({record['seconds']:.0f} s)",
            flush=True,
        )
    print(f"heads, seed {seed}: {time.perf_counter() - start:.0f} s; wrote {out}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=LADDER_PATH)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("uptrain", help="convert and re-train 5 %% (all six, or those --only names)")
    up.add_argument("--only", nargs="+", choices=UPTRAINED, default=list(UPTRAINED))
    sc = commands.add_parser("scratch", help="train one shape from scratch")
    sc.add_argument("name", choices=SCRATCH)
    hd = commands.add_parser("heads", help="h = 1, 2, 4, 8, 16 for one seed")
    hd.add_argument("--seed", type=int, choices=SWEEP_SEEDS, required=True)
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        if args.command == "uptrain":
            uptrain(args.out, tuple(args.only))
        elif args.command == "scratch":
            scratch(args.out, args.name)
        else:
            heads(args.out, args.seed)
    finally:
        torch.set_num_threads(threads)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
