"""The toy task of lesson 05 and the training run that produced ``data/toy_heads.npz``.

The task. A sequence holds ``T`` tokens. Each token is one of ``V`` symbols (drawn ``a b c ...``),
and exactly one token per sequence is *marked* (drawn in upper case, ``A B C ...``). At every
position ``t`` the model must name three symbols:

- the symbol of the previous token (position ``t - 1``; not scored at ``t = 0``),
- the symbol of the next token (position ``t + 1``; not scored at ``t = T - 1``),
- the symbol of the marked token, wherever it is.

The model is one bias-free multi-head self-attention layer (no mask: every position sees every
other) between token + position embeddings and a linear readout. Nothing tells a head which job
to do: the roles are whatever training finds. Lesson 05 measures them.

`compare_head_counts` trains the same task with one head of width ``D`` and with several narrower
heads (same ``D``, data, steps and optimiser); ``scripts/compare_head_counts.py`` ships its results
as ``data/head_count_comparison.json``, which lesson 05 loads with `inspect_heads`.

Data generation and the NumPy forward pass use NumPy only. PyTorch is imported inside the training
functions, so ``from lessons_lib.toy_task import make_batch`` works in a NumPy-only notebook.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.validation import check_ids, check_instance, check_int, check_rate, check_seed, head_width

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import torch

__all__ = [
    "COMPARISON_HEADS",
    "COMPARISON_PATH",
    "COMPARISON_SEEDS",
    "DATA_PATH",
    "HELD_OUT",
    "TARGET_NAMES",
    "ToyConfig",
    "TrainResult",
    "compare_head_counts",
    "config_from_sizes",
    "make_batch",
    "save_weights",
    "targets",
    "token_labels",
    "train",
]

DATA_PATH = Path(__file__).resolve().parent / "data" / "toy_heads.npz"
COMPARISON_PATH = DATA_PATH.with_name("head_count_comparison.json")
TARGET_NAMES = ("previous", "next", "marker")  # the three symbols named at each position, in order
HELD_OUT = 512  # sequences in the held-out batch every run is scored on
COMPARISON_HEADS = (1, 4)  # one head of width 16 against four heads of width 4: the same D = 16
COMPARISON_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class ToyConfig:
    """Sizes and training settings. ``symbols`` = V, ``length`` = T (= S), ``width`` = D, ``heads`` = h."""

    symbols: int = 6
    length: int = 8
    width: int = 16
    heads: int = 4
    steps: int = 300
    batch: int = 128
    learning_rate: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        head_width(self.width, self.heads)
        for name in ("symbols", "length", "steps", "batch"):
            check_int(f"ToyConfig.{name}", getattr(self, name), low=2)
        check_seed("ToyConfig.seed", self.seed)
        check_rate("ToyConfig.learning_rate", self.learning_rate)

    @property
    def vocab(self) -> int:
        """Token ids: ``0 .. V-1`` plain symbols, ``V .. 2V-1`` the same symbols marked."""
        return 2 * self.symbols


def make_batch(
    batch: int, config: ToyConfig = ToyConfig(), seed: int = 0
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Random sequences: ``tokens (B, T)`` int ids and ``marker (B,)`` the marked position of each.

    The same ``seed`` gives the same batch on every machine (NumPy's PCG64 stream is stable).
    """
    batch = check_int("batch", batch, symbol="B")
    rng = np.random.default_rng(check_seed("seed", seed))
    tokens = rng.integers(0, config.symbols, size=(batch, config.length))
    marker = rng.integers(0, config.length, size=batch)
    tokens[np.arange(batch), marker] += config.symbols  # mark one token per sequence
    return tokens.astype(np.int64), marker.astype(np.int64)


def token_labels(tokens: NDArray[np.integer], symbols: int) -> list[str]:
    """Display labels for one sequence ``tokens (T,)``: ``a b c`` plain, ``A B C`` marked."""
    _check_ids("tokens", tokens, "(T,)", 2 * check_int("symbols", symbols))
    return [chr(ord("A") + t - symbols) if t >= symbols else chr(ord("a") + t) for t in tokens]


def targets(tokens: NDArray[np.integer], marker: NDArray[np.integer], symbols: int) -> NDArray[np.int64]:
    """What the model must name: ``(B, T, 3)`` symbols (previous, next, marker); ``-1`` = not scored."""
    _check_ids("tokens", tokens, "(B, T)", 2 * check_int("symbols", symbols))
    B, T = tokens.shape
    _check_ids("marker", marker, "(B,)", T)
    if marker.shape != (B,):
        raise ValueError(f"marker must have shape (B,) = ({B},), one marked position per sequence, got {marker.shape}")
    symbol = tokens % symbols  # (B, T): drop the mark
    out = np.full((B, T, 3), -1, dtype=np.int64)
    out[:, 1:, 0] = symbol[:, :-1]  # previous token
    out[:, :-1, 1] = symbol[:, 1:]  # next token
    out[:, :, 2] = symbol[np.arange(B), marker][:, None]  # the marked token, at every position
    return out


_check_ids = check_ids  # integer ids in 0 .. limit - 1 (shared with inspect_heads)


@dataclass
class TrainResult:
    """Trained arrays in NumPy ``(in, out)`` layout, plus what the run measured."""

    config: ToyConfig
    arrays: dict[str, NDArray[np.float32]]
    final_loss: float
    accuracy: NDArray[np.float64]  # (3,) per target, on a held-out batch
    seconds: float
    losses: list[float] = field(default_factory=list)


def _build_model(config: ToyConfig) -> Any:
    """The trainable pieces as a ``torch.nn.ModuleDict`` (torch imported here, not at module load)."""
    import torch
    from torch import nn

    from lessons_lib.mha_torch import MultiHead

    attn = MultiHead(config.width, config.heads, seed=config.seed)  # wq..wo from NumPy's stream
    # Seed torch only after building the layer, so the other initial values do not depend on
    # whether (or how much) MultiHead's construction draws from torch's random generator.
    torch.manual_seed(config.seed)
    model = nn.ModuleDict(
        {
            "token": nn.Embedding(config.vocab, config.width),
            "attn": attn,
            "readout": nn.Linear(config.width, 3 * config.symbols, bias=False),
        }
    )
    model.register_parameter("position", nn.Parameter(0.5 * torch.randn(config.length, config.width)))
    return model


def _logits(model: Any, tokens: torch.Tensor, config: ToyConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """``tokens (B, T)`` -> ``(logits (B, T, 3, V), weights (B, h, T, S))``."""
    x = model["token"](tokens) + model.position  # (B, T, D)
    y, weights = model["attn"](x)  # (B, T, D), (B, h, T, T)
    logits = model["readout"](y)  # (B, T, 3V)
    return logits.reshape(*tokens.shape, 3, config.symbols), weights


def train(config: ToyConfig = ToyConfig()) -> TrainResult:
    """Train on fresh random batches with Adam; CPU, seeded. Returns NumPy ``(in, out)`` arrays."""
    import torch

    check_instance("config", config, ToyConfig, "a toy_task.ToyConfig, e.g. ToyConfig(heads=4)")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster and gives the same numbers everywhere
    try:
        return _train(config)
    finally:
        torch.set_num_threads(threads)


def _train(config: ToyConfig) -> TrainResult:
    import torch
    import torch.nn.functional as F

    start = time.perf_counter()
    model = _build_model(config)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    rng_seed = 1000 * (config.seed + 1)  # training batches never reuse the evaluation seeds
    losses: list[float] = []
    for step in range(config.steps):
        tokens, marker = make_batch(config.batch, config, seed=rng_seed + step)
        goal = torch.from_numpy(targets(tokens, marker, config.symbols))
        logits, _ = _logits(model, torch.from_numpy(tokens), config)
        loss = F.cross_entropy(logits.reshape(-1, config.symbols), goal.reshape(-1), ignore_index=-1)
        optimiser.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start

    with torch.no_grad():
        held_tokens, held_marker = make_batch(HELD_OUT, config, seed=rng_seed - 1)
        held_goal = targets(held_tokens, held_marker, config.symbols)
        logits, _ = _logits(model, torch.from_numpy(held_tokens), config)
        guess = logits.argmax(-1).numpy()
        scored = held_goal >= 0
        accuracy = np.array([(guess[..., i] == held_goal[..., i])[scored[..., i]].mean() for i in range(3)])
        arrays = {
            "token_embedding": model["token"].weight.numpy().copy(),  # (2V, D)
            "position_embedding": model.position.numpy().copy(),  # (T, D)
            # nn.Linear stores (out, in); the lessons multiply by (in, out), so transpose.
            "wq": model["attn"].wq.weight.T.numpy().copy(),
            "wk": model["attn"].wk.weight.T.numpy().copy(),
            "wv": model["attn"].wv.weight.T.numpy().copy(),
            "wo": model["attn"].wo.weight.T.numpy().copy(),
            "readout": model["readout"].weight.T.numpy().copy(),  # (D, 3V)
        }
    arrays = {name: value.astype(np.float32) for name, value in arrays.items()}
    return TrainResult(config, arrays, losses[-1], accuracy, seconds, losses)


def save_weights(result: TrainResult, path: Path = DATA_PATH) -> Path:
    """Write the trained arrays and the config to a compressed ``.npz`` (a few kilobytes)."""
    check_instance("result", result, TrainResult, "a toy_task.TrainResult, as toy_task.train returns")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    c = result.config
    sizes = np.array([c.symbols, c.length, c.width, c.heads, c.steps, c.batch, c.seed], dtype=np.int64)
    contents: dict[str, Any] = {
        "sizes": sizes,
        "learning_rate": np.array(c.learning_rate),
        "accuracy": result.accuracy,
        **result.arrays,
    }
    np.savez_compressed(path, **contents)
    return path


def config_from_sizes(sizes: NDArray[np.integer], learning_rate: float) -> ToyConfig:
    """Rebuild the `ToyConfig` stored in a weights file (see `save_weights`)."""
    if np.shape(sizes) != (7,):
        raise ValueError(
            f"sizes must hold the 7 numbers save_weights stores (symbols, length, width, heads, steps, batch, "
            f"seed), got shape {np.shape(sizes)}: the file was not written by toy_task.save_weights"
        )
    symbols, length, width, heads, steps, batch, seed = (int(n) for n in sizes)
    return ToyConfig(symbols, length, width, heads, steps, batch, float(learning_rate), seed)


def compare_head_counts(
    config: ToyConfig = ToyConfig(),
    head_counts: Sequence[int] = COMPARISON_HEADS,
    seeds: Sequence[int] = COMPARISON_SEEDS,
    measure: Callable[[TrainResult], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train the task once per (seed, head count) with everything else of ``config`` equal.

    For one seed every head count starts from the same numbers (`MultiHead` draws its ``(D, D)``
    matrices whatever ``h`` is; torch is seeded after it) and sees the same batches, so only where
    the head boundaries fall differs. Returns a JSON-ready record: the shared settings, then per run
    ``heads``, ``head_width``, ``seed``, held-out ``accuracy`` per target, ``final_loss`` and
    whatever ``measure(result)`` adds (e.g. `inspect_heads.trained_behaviour`: where the heads look).
    """
    runs = []
    for seed in seeds:
        for heads in head_counts:
            result = train(replace(config, heads=heads, seed=seed))
            runs.append(
                {
                    "heads": heads,
                    "head_width": config.width // heads,
                    "seed": seed,
                    "accuracy": dict(zip(TARGET_NAMES, result.accuracy.tolist(), strict=True)),
                    "final_loss": result.final_loss,
                    **(measure(result) if measure is not None else {}),
                }
            )
    shared = ("symbols", "length", "width", "steps", "batch", "learning_rate")
    settings: dict[str, Any] = {name: getattr(config, name) for name in shared}
    settings.update(optimiser="Adam", device="cpu", threads=1, held_out_sequences=HELD_OUT)
    return {
        "config": settings,
        "head_counts": list(head_counts),
        "seeds": list(seeds),
        "targets": list(TARGET_NAMES),
        "runs": runs,
    }
