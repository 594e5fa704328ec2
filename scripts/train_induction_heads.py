"""Train the two-layer attention-only model of lesson 09 and write ``lessons_lib/data/induction_heads.npz``.

    python scripts/train_induction_heads.py              # the shipped run (seed 0, CPU, one thread)
    python scripts/train_induction_heads.py --seed 1 --out /tmp/other.npz --figures /tmp/other.json
    python scripts/train_induction_heads.py --layers 1 --out lessons_lib/data/induction_one_layer.npz
    python scripts/train_induction_heads.py --measure-only     # re-measure the shipped weights, no training
    python scripts/train_induction_heads.py --curve-only       # retrain, record the training curve, keep the weights

The task: each sequence is ``L`` random distinct tokens followed by the same ``L`` tokens again
(`lessons_lib.induction.repeated_tokens`). The model predicts the next token at every position. The
first half is unpredictable (at best ``ln(V - t - 1)`` at position ``t``: the next token is one not seen
yet); the second half is predictable only by looking
back at what followed the earlier copy of the current token, which is what an induction head does.
Training batches repeat runs of ``shortest .. L`` tokens (then random filler), so the copy's offset
varies: with a fixed ``L`` a single first-layer head learns to attend ``L - 1`` positions back by
position alone (we saw it: induction score 0.79 in layer 0) and no induction circuit forms.

Shipped runs: seed 0, 3000 Adam steps, batch 64, lr 6e-3, about 21 s of CPU on one thread for the
two-layer model (``induction_heads.npz``); the same with ``--layers 1`` gives the one-layer model
(``induction_one_layer.npz``) with which lesson 09 shows that one layer of these heads does not
learn the task. The figures file beside each ``.npz`` holds the numbers the lesson quotes and the
first `CURVE_STEPS` training losses, which tests/test_induction_training.py compares with a short
retraining.

The model: token embedding + learned position embedding, two causal multi-head attention layers
(`lessons_lib.mha_torch.MultiHead`, bias-free) each added to the residual stream, then a linear
unembedding. No MLPs and no LayerNorm: the circuit needs neither, and without them every path
from a head to the logits is a product of matrices that the lesson can read.

``--curve-only`` reruns the shipped training and records, every `RECORD_EVERY` steps, the losses and
the heads' scores on the held-out batch (``induction_heads_curve.json``, read by
`lessons_lib.induction.load_training_curve`): Olsson et al. (2022)'s phase change, the loss falling
as the induction heads form. It leaves the shipped weights alone and prints how far the retrained
weights are from them.

The notebook only loads the files (`lessons_lib.induction`, NumPy); it never trains.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import Tensor, nn

from lessons_lib.induction import CURVE_PATH, DATA_PATH, EVAL_SEED, InductionConfig, repeated_tokens, save_weights
from lessons_lib.mha_torch import MultiHead, causal_mask

CURVE_STEPS = 60  # how many first training losses the figures file keeps (a short retraining repeats them)
RECORD_EVERY = 20  # --curve-only: evaluate on the held-out batch every this many steps
CURVE_BATCH = 256  # the held-out batch of the curve: repeated_tokens(CURVE_BATCH, V, L, EVAL_SEED), as the lesson's
TRAIN_SEED_OFFSET = 10_000  # training batch i uses seed TRAIN_SEED_OFFSET * (seed + 1) + i: never an eval seed


@dataclass
class TrainResult:
    """Trained arrays (NumPy ``(in, out)`` layout, float32) and the run's loss curve and time."""

    config: InductionConfig
    arrays: dict[str, NDArray[np.float32]]
    seconds: float  # CPU seconds of the training loop
    losses: list[float] = field(default_factory=list)
    curve: dict[str, list[float]] = field(default_factory=dict)  # filled when `train` records (record_every > 0)


class AttentionOnly(nn.Module):
    """Embeddings, `MultiHead` layers added to the residual stream, and the unembedding."""

    def __init__(self, config: InductionConfig) -> None:
        super().__init__()
        layers = [MultiHead(config.width, config.heads, seed=config.seed + i) for i in range(config.layers)]
        torch.manual_seed(config.seed)  # after MultiHead, whose weights come from NumPy's stream
        self.token = nn.Embedding(config.vocab, config.width)  # drawn in this order: token, unembed, position
        self.layers: list[MultiHead] = nn.ModuleList(layers)  # type: ignore[assignment]
        self.unembed = nn.Linear(config.width, config.vocab, bias=False)
        self.position = nn.Parameter(0.1 * torch.randn(config.context, config.width))

    def forward(self, tokens: Tensor) -> Tensor:
        """``tokens (B, T)`` -> next-token logits ``(B, T, V)``; the same sums as `induction.run`."""
        T = tokens.shape[1]
        allowed = causal_mask(T)
        x = self.token(tokens) + self.position[:T]  # (B, T, D): the residual stream
        for layer in self.layers:
            out, _ = layer(x, allowed=allowed)
            x = x + out  # each layer reads the stream and adds what it writes
        logits: Tensor = self.unembed(x)
        return logits


def train(config: InductionConfig, record_every: int = 0) -> TrainResult:
    """Adam on fresh batches; one CPU thread, so a rerun on this machine repeats every bit. With
    ``record_every > 0``, `evaluate` runs before steps 0, k, 2k, ... and after the last (no random
    numbers drawn, no gradient: the training itself is unchanged)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(config, record_every)
    finally:
        torch.set_num_threads(threads)


def evaluate(model: AttentionOnly, tokens: Tensor, half: int) -> dict[str, float]:
    """On whole held-out sequences ``tokens (B, 2L)``: the first and repeated halves' mean losses, the
    largest induction score of the last layer and previous-token score (first half) of the first."""
    with torch.no_grad():
        inputs = tokens[:, :-1]
        T = inputs.shape[1]
        allowed = causal_mask(T)
        x = model.token(inputs) + model.position[:T]
        weights = []
        for layer in model.layers:
            out, w = layer(x, allowed=allowed)  # w (B, h, T, T)
            weights.append(w)
            x = x + out
        loss = F.cross_entropy(model.unembed(x).transpose(1, 2), tokens[:, 1:], reduction="none").mean(dim=0)
        t = torch.arange(half, T)
        first = torch.arange(1, half)
        induction = weights[-1][..., t, t - half + 1].mean(dim=(0, 2)).max()
        previous = weights[0][..., first, first - 1].mean(dim=(0, 2)).max()
    return {"first_half_loss": loss[: half - 1].mean().item(), "repeated_half_loss": loss[half:].mean().item(),
            "induction_score": induction.item(), "previous_token_score": previous.item()}


def _train(config: InductionConfig, record_every: int = 0) -> TrainResult:
    start = time.process_time()  # CPU time: on a shared machine the wall time says little
    model = AttentionOnly(config)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    first_seed = TRAIN_SEED_OFFSET * (config.seed + 1)
    losses: list[float] = []
    held_out = torch.from_numpy(repeated_tokens(CURVE_BATCH, config.vocab, config.half, EVAL_SEED))
    curve: dict[str, list[float]] = {}

    def record(step: int) -> None:
        for name, value in {"step": float(step), **evaluate(model, held_out, config.half)}.items():
            curve.setdefault(name, []).append(value)

    for step in range(config.steps):
        if record_every and step % record_every == 0:
            record(step)
        tokens = torch.from_numpy(
            repeated_tokens(config.batch, config.vocab, config.half, first_seed + step, config.shortest)
        )
        logits = model(tokens[:, :-1])  # (B, 2L - 1, V): predict token t + 1 from tokens 0 .. t
        loss = F.cross_entropy(logits.reshape(-1, config.vocab), tokens[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
        losses.append(loss.item())
    if record_every:
        record(config.steps)
    seconds = time.process_time() - start
    return TrainResult(config, numpy_arrays(model), seconds, losses, curve)


def numpy_arrays(model: AttentionOnly) -> dict[str, NDArray[np.float32]]:
    """The parameters as float32 NumPy arrays; ``nn.Linear``'s ``(out, in)`` is transposed to ``(in, out)``."""
    with torch.no_grad():
        arrays: dict[str, Tensor] = {
            "token_embedding": model.token.weight,  # (V, D)
            "position_embedding": model.position,  # (2L - 1, D)
            "unembedding": model.unembed.weight.T,  # (D, V)
        }
        for i, layer in enumerate(model.layers):
            for name in ("wq", "wk", "wv", "wo"):
                arrays[f"layer{i}_{name}"] = getattr(layer, name).weight.T  # (D, D)
        return {name: value.detach().numpy().astype(np.float32) for name, value in arrays.items()}


def main(argv: list[str]) -> int:
    defaults = InductionConfig()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--layers", type=int, default=defaults.layers, help="attention layers (2: the lesson's model)")
    parser.add_argument("--measure-only", action="store_true",
                        help="do not train: re-measure the weights at --out and rewrite its figures file")
    parser.add_argument("--out", type=Path, default=DATA_PATH)
    parser.add_argument("--figures", type=Path, default=None, help="JSON of measured figures (default: beside --out)")
    parser.add_argument("--curve-only", action="store_true",
                        help="retrain, write the training curve to --curve, keep the weights at --out")
    parser.add_argument("--curve", type=Path, default=CURVE_PATH, help="JSON of the training curve")
    args = parser.parse_args(argv)
    if args.curve_only:
        return write_curve(args)

    from lessons_lib.induction import load_induction_model, measure  # NumPy: the numbers the lesson shows

    figures_path = args.figures or args.out.with_suffix(".json")
    if args.measure_only:  # keep the training record (time, config, first losses), measure again
        old = json.loads(figures_path.read_text())
        kept = {name: old[name] for name in ("seconds", "config", "first_losses") if name in old}
        figures: dict[str, Any] = {**kept, "config": asdict(load_induction_model(args.out).config)}
        figures |= measure(args.out)
        path = args.out
    else:
        config = InductionConfig(**{
            **asdict(defaults), "seed": args.seed, "steps": args.steps, "learning_rate": args.learning_rate,
            "layers": args.layers,
        })
        result = train(config)
        path = save_weights(result.arrays, config, args.out)
        first, last = result.losses[0], result.losses[-1]
        print(f"trained {config.steps} steps in {result.seconds:.1f} s of CPU; loss {first:.3f} -> {last:.3f}")
        curve = [round(loss, 4) for loss in result.losses[:CURVE_STEPS]]
        figures = {"seconds": round(result.seconds, 1), "config": asdict(config), "first_losses": curve}
        figures |= measure(path)
    figures_path.write_text(
        "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in figures.items()) + "\n}\n"
    )
    for name, value in figures.items():
        print(f"{name}: {value}")
    print(f"{'measured' if args.measure_only else 'wrote'} {path} ({path.stat().st_size} bytes); wrote {figures_path}")
    return 0


def write_curve(args: argparse.Namespace) -> int:
    """Retrain with the config of the weights at ``args.out``, recording the curve; the weights stay."""
    from lessons_lib.induction import load_induction_model

    shipped = load_induction_model(args.out)
    result = train(shipped.config, record_every=RECORD_EVERY)
    retrained = np.concatenate([a.ravel() for a in result.arrays.values()])
    stored = np.load(args.out)
    kept = np.concatenate([stored[name].ravel() for name in result.arrays])
    print(f"retrained in {result.seconds:.1f} s of CPU; largest difference from the shipped weights: "
          f"{np.abs(retrained - kept).max():.2g}")
    every = {"config": asdict(shipped.config), "record_every": RECORD_EVERY,
             "training_loss": [round(loss, 4) for loss in result.losses]}
    record = every | {name: [round(v, 4) for v in values] for name, values in result.curve.items()}
    args.curve.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in record.items()) + "\n}\n")
    print(f"wrote {args.curve}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
