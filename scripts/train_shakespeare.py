"""Train lesson 10's character-level GPT on Shakespeare's plays; write ``lessons_lib/data/shakespeare_gpt.npz``.

    python scripts/train_shakespeare.py                 # the shipped run (seed 0, CPU, 2 threads)
    python scripts/train_shakespeare.py --steps 40 --out /tmp/gpt.npz --figures /tmp/gpt.json   # a short run
    python scripts/train_shakespeare.py --measure-only  # re-measure the shipped weights, no training

The text comes from ``scripts/prepare_shakespeare.py`` (shipped in ``lessons_lib/data``). Training:
random windows of ``T_max + 1`` characters from the training plays (``batch`` of them a step, drawn
from a seeded NumPy generator), next-character cross-entropy, AdamW (weight decay on matrices only),
the learning rate warmed up linearly for ``warmup`` steps then decayed on a cosine to a tenth. No
dropout: 4.3 M training characters and 0.8 M parameters. Torch runs on 2 threads; a rerun on this
machine repeats the run to float rounding.

Written: the weights (float32, `lessons_lib.shakespeare.save_arrays`) and a figures file (JSON) with
the run's time, its training curve, and what `measure` finds on the validation plays: the loss, the
baselines (unigram and bigram models of the training text), every head's and layer's ablation, and
the head scores lesson 10 quotes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from lessons_lib.shakespeare import (
    MODEL_PATH,
    GPTConfig,
    Vocabulary,
    load_text,
    save_arrays,
    validation_windows,
)
from lessons_lib.shakespeare_torch import CharGPT, validation_loss

THREADS = 2
EVAL_EVERY = 250  # the curve's validation loss, on EVAL_WINDOWS fixed windows
EVAL_WINDOWS = 64
CURVE_STEPS = 30  # how many first training losses the figures keep (tests/test_shakespeare_training.py reruns them)
DATA_SEED_OFFSET = 1_000


def learning_rate(config: GPTConfig, step: int) -> float:
    """Linear warm-up to the peak, then a cosine down to a tenth of it at the last step."""
    if step < config.warmup:
        return config.learning_rate * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def batches(ids: NDArray[np.int64], config: GPTConfig) -> Iterator[torch.Tensor]:
    """Endless ``(batch, T_max + 1)`` windows at random starts, from one seeded generator."""
    rng = np.random.default_rng(DATA_SEED_OFFSET + config.seed)
    offsets = np.arange(config.context + 1)
    while True:
        starts = rng.integers(0, len(ids) - config.context - 1, size=config.batch)
        yield torch.from_numpy(ids[starts[:, None] + offsets])


def train(
    config: GPTConfig,
    vocabulary: Vocabulary,
    log_every: int = 100,
    eval_every: int = EVAL_EVERY,
    threads: int = THREADS,
    model: CharGPT | None = None,
    fast: bool = False,
) -> tuple[dict[str, Any], CharGPT]:
    """Train a fresh `CharGPT` (or ``model``, e.g. a converted one) on ``threads`` CPU threads;
    ``eval_every = 0`` records no validation curve (a quick test run). ``fast``: attention through
    ``F.scaled_dot_product_attention`` (`CharGPT.forward`'s ``need_weights=False``), the same function
    to float rounding; ``scripts/cache_ladder.py``'s runs use it, the shipped run did not."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ids = vocabulary.encode(load_text("train"))
        held_out = torch.from_numpy(validation_windows(load_text("valid"), vocabulary, config.context, EVAL_WINDOWS))
        model = CharGPT(config) if model is None else model
        decay = [p for n, p in model.named_parameters() if p.ndim == 2 and "position" not in n]
        other = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "position" not in n)]
        optimiser = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": other, "weight_decay": 0.0}],
            lr=config.learning_rate,
            betas=(0.9, 0.99),
        )
        losses: list[float] = []
        curve: dict[str, list[float]] = {"step": [], "validation_loss": []}
        start = time.perf_counter()
        stream = batches(ids, config)
        for step in range(config.steps):
            if eval_every and step % eval_every == 0:
                curve["step"].append(step)
                curve["validation_loss"].append(round(validation_loss(model, held_out, fast=fast), 4))
            for group in optimiser.param_groups:
                group["lr"] = learning_rate(config, step)
            window = next(stream)
            logits, _ = model(window[:, :-1], need_weights=not fast)
            loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
            optimiser.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            losses.append(loss.item())
            if log_every and (step + 1) % log_every == 0:
                recent = sum(losses[-log_every:]) / log_every
                print(
                    f"step {step + 1}/{config.steps}: training loss {recent:.3f}, {time.perf_counter() - start:.0f} s",
                    flush=True,
                )
        if eval_every:
            curve["step"].append(config.steps)
            curve["validation_loss"].append(round(validation_loss(model, held_out, fast=fast), 4))
        seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(before)
    every_50 = [round(float(np.mean(losses[i : i + 50])), 4) for i in range(0, len(losses), 50)]
    record = {
        "seconds": round(seconds, 1),
        "threads": threads,
        "config": asdict(config),
        "first_losses": [round(x, 4) for x in losses[:CURVE_STEPS]],
        "training_loss_every_50": every_50,
        "curve": curve,
    }
    return record, model


def main(argv: list[str]) -> int:
    defaults = GPTConfig()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--kv-heads", type=int, default=defaults.kv_heads)
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    parser.add_argument("--figures", type=Path, default=None, help="JSON of measured figures (default: beside --out)")
    parser.add_argument("--measure-only", action="store_true", help="re-measure the weights at --out, no training")
    parser.add_argument("--no-measure", action="store_true", help="train and save only (a quick trial)")
    args = parser.parse_args(argv)
    figures_path = args.figures or args.out.with_suffix(".json")
    if args.measure_only:
        figures = json.loads(figures_path.read_text())
    else:
        vocabulary = Vocabulary.from_text(load_text("train"), load_text("valid"))
        config = replace(
            defaults,
            vocab=len(vocabulary),
            steps=args.steps,
            seed=args.seed,
            learning_rate=args.learning_rate,
            kv_heads=args.kv_heads,
            warmup=min(defaults.warmup, max(1, args.steps // 10)),
        )
        figures, model = train(config, vocabulary)
        save_arrays(model.arrays(), config, vocabulary, args.out)
        print(
            f"trained {config.steps} steps in {figures['seconds']:.0f} s ({figures['seconds'] / 60:.1f} min) "
            f"on {THREADS} threads; wrote {args.out} ({args.out.stat().st_size:,} bytes)"
        )
    if not args.no_measure:
        from lessons_lib.shakespeare_torch import measure  # the numbers lesson 10 quotes

        figures |= measure(args.out)
    figures_path.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"wrote {figures_path}")
    for name in ("validation_loss", "baselines"):
        if name in figures:
            print(f"{name}: {figures[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
