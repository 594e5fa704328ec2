"""Train the two-layer attention-only model of lesson 09 and write ``lessons_lib/data/induction_heads.npz``.

    python scripts/train_induction_heads.py              # the shipped run (seed 0, CPU, one thread)
    python scripts/train_induction_heads.py --seed 1 --out /tmp/other.npz --figures /tmp/other.json
    python scripts/train_induction_heads.py --layers 1 --out lessons_lib/data/induction_one_layer.npz
    python scripts/train_induction_heads.py --measure-only     # re-measure the shipped weights, no training

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

The notebook only loads the file (`lessons_lib.induction`, NumPy); it never trains.
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

from lessons_lib.induction import DATA_PATH, InductionConfig, repeated_tokens, save_weights
from lessons_lib.mha_torch import MultiHead, causal_mask

CURVE_STEPS = 60  # how many first training losses the figures file keeps (a short retraining repeats them)
TRAIN_SEED_OFFSET = 10_000  # training batch i uses seed TRAIN_SEED_OFFSET * (seed + 1) + i: never an eval seed


@dataclass
class TrainResult:
    """Trained arrays (NumPy ``(in, out)`` layout, float32) and the run's loss curve and time."""

    config: InductionConfig
    arrays: dict[str, NDArray[np.float32]]
    seconds: float  # CPU seconds of the training loop
    losses: list[float] = field(default_factory=list)


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


def train(config: InductionConfig) -> TrainResult:
    """Adam on fresh batches; one CPU thread, so a rerun on this machine repeats every bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(config)
    finally:
        torch.set_num_threads(threads)


def _train(config: InductionConfig) -> TrainResult:
    start = time.process_time()  # CPU time: on a shared machine the wall time says little
    model = AttentionOnly(config)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    first_seed = TRAIN_SEED_OFFSET * (config.seed + 1)
    losses: list[float] = []
    for step in range(config.steps):
        tokens = torch.from_numpy(
            repeated_tokens(config.batch, config.vocab, config.half, first_seed + step, config.shortest)
        )
        logits = model(tokens[:, :-1])  # (B, 2L - 1, V): predict token t + 1 from tokens 0 .. t
        loss = F.cross_entropy(logits.reshape(-1, config.vocab), tokens[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
        losses.append(loss.item())
    seconds = time.process_time() - start
    return TrainResult(config, numpy_arrays(model), seconds, losses)


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
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
