"""Lesson 05: looking inside the heads of a multi-head layer (NumPy only).

Everything here is a plain function on arrays; `lessons_lib.plotting.attention_maps` draws the results and
`lessons_lib.widgets.head_widgets` wires them to controls.

Notation: ``B`` batch, ``T`` query length, ``S`` source length, ``D`` model width, ``h`` heads,
``d_h = D / h`` head width. Weights are ``(in, out) = (D, D)`` arrays as in `mha_numpy.MultiHead`:
head ``i`` owns *columns* ``i*d_h : (i+1)*d_h`` of ``wq``, ``wk`` and ``wv``.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.mha_numpy import MultiHead, _attention, _split_heads
from lessons_lib.toy_task import (
    COMPARISON_PATH,
    DATA_PATH,
    ToyConfig,
    TrainResult,
    config_from_sizes,
    make_batch,
    targets,
    token_labels,
)
from lessons_lib.validation import (
    check_array,
    check_finite,
    check_ids,
    check_instance,
    check_int,
    check_overflow,
    check_record,
    check_size,
    check_width,
    divisor_options,
    head_width,
    load_npz,
)

Array = NDArray[np.floating]

__all__ = [
    "EVAL_SEED",
    "RELATIONSHIPS",
    "HeadCountComparison",
    "ToyHeads",
    "argmax_shares",
    "attention_cost",
    "average_over_heads",
    "column_blocks",
    "embed",
    "features_per_head",
    "head_behaviour",
    "head_columns",
    "head_maps",
    "head_options",
    "head_parts",
    "head_roles",
    "load_head_count_comparison",
    "load_toy_heads",
    "predict",
    "run_layer",
    "split_layout",
    "target_accuracy",
    "tokens_per_head",
    "trained_behaviour",
    "weight_entries",
]

EVAL_SEED = 4  # the fixed evaluation batch lesson 05 measures and shows
TOY_ARRAYS = ("sizes", "learning_rate", "token_embedding", "position_embedding", "wq", "wk", "wv", "wo", "readout",
              "accuracy")  # what toy_task.save_weights writes


@dataclass(frozen=True)
class ToyHeads:
    """The trained toy model of lesson 05 (see `lessons_lib.toy_task`), as NumPy float64 arrays.

    ``token_embedding (2V, D)``, ``position_embedding (T, D)``, ``layer`` a `MultiHead` holding the
    trained ``wq, wk, wv, wo (D, D)``, ``readout (D, 3V)``, ``accuracy (3,)`` measured after training.
    """

    config: ToyConfig
    token_embedding: Array
    position_embedding: Array
    layer: MultiHead
    readout: Array
    accuracy: Array

    def __post_init__(self) -> None:
        check_instance("config", self.config, ToyConfig, "a toy_task.ToyConfig")
        check_instance("layer", self.layer, MultiHead, "a mha_numpy.MultiHead")
        c = self.config
        shapes = {"token_embedding": (c.vocab, c.width), "position_embedding": (c.length, c.width)}
        check_record(self, shapes | {"readout": (c.width, 3 * c.symbols), "accuracy": (3,)})

    def labels(self, tokens: NDArray[np.integer]) -> list[str]:
        """Labels ``a b c`` (plain) / ``A B C`` (marked) for one sequence ``tokens (T,)``."""
        return token_labels(tokens, self.config.symbols)


def load_toy_heads(path: Path | str = DATA_PATH) -> ToyHeads:
    """Load the shipped weights (written by ``scripts/train_toy_heads.py``) into NumPy arrays."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no toy-heads weights at {path}; run `python scripts/train_toy_heads.py` to create them"
        )
    kind = "a toy-heads weights file (a .npz written by toy_task.save_weights)"
    arrays = load_npz(path, kind)
    missing = sorted(set(TOY_ARRAYS) - set(arrays))
    if missing:
        raise ValueError(f"{path} is not {kind}: it lacks the arrays {missing}")
    config = config_from_sizes(arrays["sizes"], float(arrays["learning_rate"]))
    wq, wk, wv, wo = (arrays[name].astype(np.float64) for name in ("wq", "wk", "wv", "wo"))
    layer = MultiHead.from_weights(wq, wk, wv, wo, config.heads)
    return ToyHeads(
        config=config,
        token_embedding=arrays["token_embedding"].astype(np.float64),
        position_embedding=arrays["position_embedding"].astype(np.float64),
        layer=layer,
        readout=arrays["readout"].astype(np.float64),
        accuracy=arrays["accuracy"].astype(np.float64),
    )


def embed(model: ToyHeads, tokens: NDArray[np.integer]) -> Array:
    """``tokens (B, T)`` -> layer input ``x (B, T, D)`` = token embedding + position embedding."""
    check_instance("model", model, ToyHeads, "the trained layer from inspect_heads.load_toy_heads()")
    check_array("tokens", tokens, "numpy", "(B, T)", floating=False)
    if tokens.dtype.kind not in "iu" or np.shape(tokens)[1] != model.config.length:
        raise ValueError(
            f"tokens must be integer ids (B, T) with T={model.config.length} positions (the trained length), "
            f"got {tokens.dtype} {np.shape(tokens)}"
        )
    vocab = model.token_embedding.shape[0]
    if tokens.size and not 0 <= tokens.min() <= tokens.max() < vocab:
        raise ValueError(f"token ids must be in 0 .. {vocab - 1}, got {tokens.min()} .. {tokens.max()}")
    x: Array = model.token_embedding[tokens] + model.position_embedding  # (B, T, D)
    return x


def run_layer(model: ToyHeads, tokens: NDArray[np.integer]) -> tuple[Array, Array]:
    """The trained layer on ``tokens (B, T)``: ``(output (B, T, D), weights (B, h, T, S))``."""
    return model.layer(embed(model, tokens))


def predict(model: ToyHeads, tokens: NDArray[np.integer]) -> NDArray[np.int64]:
    """The symbols the model names at each position: ``(B, T, 3)`` = (previous, next, marker)."""
    output, _ = run_layer(model, tokens)
    logits = (output @ model.readout).reshape(*tokens.shape, 3, model.config.symbols)
    guess: NDArray[np.int64] = logits.argmax(axis=-1)
    return guess


def head_behaviour(weights: Array, marker: NDArray[np.integer]) -> dict[str, Array]:
    """Mean attention weight each head puts on each relationship, over a batch.

    Args:
        weights: ``(B, h, T, S)`` self-attention weights (``S == T``).
        marker: ``(B,)`` the marked position of each sequence.

    Returns:
        ``{"previous": (h,), "next": (h,), "marker": (h,)}``: the weight on position ``t - 1``
        (averaged over ``t >= 1``), on ``t + 1`` (over ``t <= T - 2``) and on the marked position
        (over all ``t``). Spreading evenly would give ``1 / S`` everywhere.
    """
    check_array("weights", weights, "numpy", "(B, h, T, S)")
    B, _, T, S = weights.shape
    if T != S:
        raise ValueError(f"head_behaviour needs self-attention weights with T == S, got {weights.shape}")
    check_ids("marker", marker, "(B,)", S)
    if marker.shape != (B,):
        raise ValueError(f"marker must have shape (B,) = ({B},), got {tuple(marker.shape)}")
    t = np.arange(T - 1)
    previous = weights[:, :, t + 1, t]  # (B, h, T-1): row t+1, column t
    following = weights[:, :, t, t + 1]  # (B, h, T-1): row t, column t+1
    on_marker = weights[np.arange(B), :, :, marker]  # (B, h, T)
    return {
        "previous": previous.mean(axis=(0, 2)),
        "next": following.mean(axis=(0, 2)),
        "marker": on_marker.mean(axis=(0, 2)),
    }


def head_roles(behaviour: dict[str, Array], threshold: float = 0.6) -> list[str]:
    """Name each head by the relationship holding at least ``threshold`` of its weight, else "mixed".

    ``behaviour`` is what `head_behaviour` returns: relationship name -> ``(h,)`` mean weights.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        kind = type(threshold).__name__
        raise TypeError(f"threshold must be a share of the weight, in (0, 1], got {kind} {threshold!r}")
    if not 0 < float(threshold) <= 1:
        raise ValueError(f"threshold must be a share of the weight, in (0, 1], got {float(threshold)!r}")
    if not isinstance(behaviour, dict):
        raise TypeError(
            f"behaviour must be a dict of relationship -> (h,) weights, as head_behaviour returns, "
            f"got {type(behaviour).__name__}"
        )
    if not behaviour:
        raise ValueError("behaviour must name at least one relationship (as head_behaviour returns), got {}")
    names = list(behaviour)
    for name in names:
        check_array(f"behaviour[{name!r}]", behaviour[name], "numpy", "(h,)")
    if len({behaviour[name].shape for name in names}) > 1:
        shapes = {name: behaviour[name].shape for name in names}
        raise ValueError(f"every entry of behaviour must have the same shape (h,), got {shapes}")
    table = np.stack([behaviour[name] for name in names])  # (relationships, h)
    best = table.argmax(axis=0)
    return [names[r] if table[r, i] >= threshold else "mixed" for i, r in enumerate(best)]


def argmax_shares(weights: Array, marker: NDArray[np.integer]) -> Array:
    """How often each head's *strongest* position is each relationship, over a batch: ``(3, h)``.

    Args:
        weights: ``(B, h, T, S)`` self-attention weights (``S == T``).
        marker: ``(B,)`` the marked position of each sequence.

    Returns:
        ``(3, h)``: row 0 the share of queries ``t >= 1`` whose largest weight sits on ``t - 1``, row 1
        the share of queries ``t <= T - 2`` whose largest weight sits on ``t + 1``, row 2 the share of
        all queries whose largest weight sits on the marked position (rows in `RELATIONSHIPS` order).
        Unlike `head_behaviour` it ignores how sharp a row is: a peak of 0.4 counts as much as 1.0.
    """
    check_array("weights", weights, "numpy", "(B, h, T, S)")
    B, _, T, S = weights.shape
    if T != S:
        raise ValueError(f"argmax_shares needs self-attention weights with T == S, got {weights.shape}")
    check_ids("marker", marker, "(B,)", S)
    if marker.shape != (B,):
        raise ValueError(f"marker must have shape (B,) = ({B},), got {tuple(marker.shape)}")
    best = weights.argmax(axis=-1)  # (B, h, T): each query's strongest source position
    t = np.arange(T)
    on_previous = best[:, :, 1:] == t[1:] - 1  # (B, h, T-1)
    on_next = best[:, :, :-1] == t[:-1] + 1  # (B, h, T-1)
    on_marker = best == marker[:, None, None]  # (B, h, T)
    shares: Array = np.stack([hit.mean(axis=(0, 2)) for hit in (on_previous, on_next, on_marker)])
    return shares


RELATIONSHIPS = ("previous", "next", "marker")  # the rows of `argmax_shares`, the keys of `head_behaviour`


def head_parts(head_out: Array, wo: Array) -> Array:
    """Each head's share of the layer output: ``head_out (B, h, T, d_h)``, ``wo (D, D)`` -> ``(B, h, T, D)``.

    Head ``i``'s part is its output times *its rows* ``i*d_h : (i+1)*d_h`` of the (in, out) output
    projection. The parts add up to the layer's output, ``merge_heads(head_out) @ wo``: concatenating
    and projecting is the same as projecting each head and summing.
    """
    check_array("head_out", head_out, "numpy", "(B, h, T, d_h)")
    check_array("wo", wo, "numpy", "(D, D)")
    h, d_h = head_out.shape[1], head_out.shape[3]
    if wo.shape[0] != h * d_h:
        raise ValueError(
            f"wo must have h*d_h = {h}*{d_h} = {h * d_h} rows (one block of d_h rows per head), got {wo.shape}"
        )
    rows = wo.reshape(h, d_h, wo.shape[1])  # (D, D) -> (h, d_h, D): head i's rows in rows[i]
    parts: Array = np.einsum("bhtd,hdo->bhto", head_out, rows)  # (B, h, T, d_h) @ (h, d_h, D) -> (B, h, T, D)
    return parts


def target_accuracy(
    model: ToyHeads, output: Array, tokens: NDArray[np.integer], marker: NDArray[np.integer]
) -> Array:
    """Accuracy of the trained readout on a layer ``output (B, T, D)``, per target: ``(3,)``.

    The targets are those of `toy_task.targets` (previous, next, marked symbol); positions without a
    target (no previous token at ``t = 0``, no next one at ``t = T - 1``) are not scored.
    """
    check_instance("model", model, ToyHeads, "the trained layer from inspect_heads.load_toy_heads()")
    check_array("output", output, "numpy", "(B, T, D)")
    check_array("tokens", tokens, "numpy", "(B, T)", floating=False)
    if output.shape != (*tokens.shape, model.config.width):
        raise ValueError(
            f"output must be (B, T, D) = {(*tokens.shape, model.config.width)} for these tokens, got {output.shape}"
        )
    check_ids("marker", marker, "(B,)", tokens.shape[1])
    goal = targets(tokens, marker, model.config.symbols)  # (B, T, 3); -1 where there is no target
    logits = (output @ model.readout).reshape(*tokens.shape, 3, model.config.symbols)  # (B, T, 3, V)
    right = logits.argmax(axis=-1) == goal
    scored = goal >= 0
    accuracy: Array = (right & scored).sum(axis=(0, 1)) / scored.sum(axis=(0, 1))
    return accuracy


def trained_behaviour(result: TrainResult) -> dict[str, Any]:
    """`head_behaviour` of a fresh training run (``toy_task.train``) on the evaluation batch of 256.

    Returns ``{"weight_on": {"previous": [h floats], "next": [...], "marker": [...]}}``, JSON-ready.
    """
    check_instance("result", result, TrainResult, "a toy_task.TrainResult, as toy_task.train returns")
    c = result.config
    a = {name: value.astype(np.float64) for name, value in result.arrays.items()}
    layer = MultiHead.from_weights(a["wq"], a["wk"], a["wv"], a["wo"], c.heads)
    tokens, marker = make_batch(256, c, seed=EVAL_SEED)
    _, weights = layer(a["token_embedding"][tokens] + a["position_embedding"])  # (B, h, T, S)
    return {"weight_on": {name: values.tolist() for name, values in head_behaviour(weights, marker).items()}}


@dataclass(frozen=True)
class HeadCountComparison:
    """The shipped results of ``scripts/compare_head_counts.py`` (see `toy_task.compare_head_counts`).

    ``accuracy (len(head_counts), len(seeds), len(targets))`` held-out accuracy per run and target;
    ``weight_on`` relationship -> ``(len(head_counts), len(seeds))`` list of per-head mean weights;
    ``config`` the settings every run shared (width, steps, optimiser, ...).
    """

    head_counts: tuple[int, ...]
    seeds: tuple[int, ...]
    targets: tuple[str, ...]
    accuracy: NDArray[np.float64]
    final_loss: NDArray[np.float64]
    weight_on: dict[str, list[list[list[float]]]]
    config: dict[str, Any]

    def __post_init__(self) -> None:
        runs = (len(self.head_counts), len(self.seeds))
        for name, shape in (("accuracy", (*runs, len(self.targets))), ("final_loss", runs)):
            check_array(f"HeadCountComparison.{name}", getattr(self, name), "numpy", "(...)")
            if getattr(self, name).shape != shape:
                raise ValueError(
                    f"HeadCountComparison.{name} must have shape {shape} (head counts, seeds"
                    f"{', targets' if name == 'accuracy' else ''}), got {getattr(self, name).shape}"
                )


def load_head_count_comparison(path: Path | str = COMPARISON_PATH) -> HeadCountComparison:
    """Load the one-head-vs-several-heads results; ``ValueError`` naming the problem if malformed."""
    path = Path(path)
    script = "scripts/compare_head_counts.py"
    if not path.is_file():
        raise FileNotFoundError(f"no head-count comparison at {path}; run `python {script}` to create it")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        counts, seeds = tuple(int(h) for h in record["head_counts"]), tuple(int(s) for s in record["seeds"])
        targets = tuple(str(t) for t in record["targets"])
        runs = {(int(run["heads"]), int(run["seed"])): run for run in record["runs"]}
        missing = [key for key in ((h, s) for h in counts for s in seeds) if key not in runs]
        if missing:
            raise ValueError(f"no run for (heads, seed) in {missing}")
        table = [[runs[h, s] for s in seeds] for h in counts]
        accuracy = np.array([[[float(r["accuracy"][t]) for t in targets] for r in row] for row in table])
        final_loss = np.array([[float(r["final_loss"]) for r in row] for row in table])
        weight_on = {t: [[list(map(float, r["weight_on"][t])) for r in row] for row in table] for t in targets}
        config = dict(record["config"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        problem = f"missing entry {error}" if isinstance(error, KeyError) else str(error)
        raise ValueError(
            f"{path} is not a valid head-count comparison ({problem}); re-run `python {script}`"
        ) from error
    if not np.all((accuracy >= 0) & (accuracy <= 1)):
        raise ValueError(f"{path}: accuracies must lie in [0, 1], got {accuracy.min()} .. {accuracy.max()}")
    return HeadCountComparison(counts, seeds, targets, accuracy, final_loss, weight_on, config)


def average_over_heads(weights: Array) -> Array:
    """``(B, h, T, S) -> (B, T, S)``: a display shortcut only; no head computes this map."""
    check_array("weights", weights, "numpy", "(B, h, T, S)")
    mean: Array = weights.mean(axis=1)
    return mean


def head_options(width: int) -> list[int]:
    """The head counts ``h`` that split ``D = width`` into equal heads: the divisors of ``D``.

    A widget's choices, so the list stops after a few: every divisor when there are at most 16,
    else the 15 smallest and ``D`` itself. ``D`` is at most 2**40.
    """
    return divisor_options(check_size("width", width, symbol="D"))


def _check_projection(w: Array, heads: int) -> tuple[int, int]:
    check_array("w", w, "numpy", "(D_in, D)")
    return w.shape[1], head_width(w.shape[1], heads)


def head_columns(w: Array, head: int, heads: int) -> Array:
    """The columns of ``w (D_in, D)`` that belong to ``head`` when ``D`` is split into ``heads``.

    Returns ``(D_in, d_h)``: head ``i`` reads every input feature (all rows) but only produces its
    own ``d_h`` outputs (its columns ``i*d_h : (i+1)*d_h``).
    """
    _, d_h = _check_projection(w, heads)
    head = check_int("head", head, low=0, high=int(heads) - 1)
    return w[:, head * d_h : (head + 1) * d_h]


def column_blocks(w: Array, heads: int) -> Array:
    """Re-slice one projection ``w (D_in, D)`` into ``(h, D_in, d_h)`` column blocks, one per head.

    The numbers do not change; only where the head boundaries fall does. ``column_blocks(w, h)[i]``
    equals ``head_columns(w, i, h)``.
    """
    _, d_h = _check_projection(w, heads)
    return w.reshape(w.shape[0], heads, d_h).transpose(1, 0, 2)  # (D_in, D) -> (D_in, h, d_h) -> (h, D_in, d_h)


def head_maps(x: Array, wq: Array, wk: Array, heads: int) -> Array:
    """Attention maps of the same ``wq, wk (D, D)`` read as ``heads`` heads: ``(B, h, T, T)``.

    ``x (B, T, D)`` attends to itself; each head uses ``d_h = D / h`` columns and scales by
    ``1/sqrt(d_h)``, exactly as `mha_numpy.MultiHead` would with ``heads`` heads.
    """
    check_array("x", x, "numpy", "(B, T, D)")
    _check_projection(wq, heads)
    _check_projection(wk, heads)
    if wk.shape != wq.shape:
        raise ValueError(f"wq and wk must have the same shape (D, D), got wq {wq.shape} and wk {wk.shape}")
    check_width("x", tuple(x.shape), wq.shape[0])
    for name, array in (("x", x), ("wq", wq), ("wk", wk)):
        check_finite(name, array)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
        q = _split_heads(x @ wq, int(heads))  # (B, T, D) -> (B, h, T, d_h)
        k = _split_heads(x @ wk, int(heads))  # (B, T, D) -> (B, h, T, d_h)
        _, weights = _attention(q, k, k, None)  # values do not matter for the maps
    check_overflow("head_maps", weights, {"x": x})
    return weights


def split_layout(length: int, width: int, heads: int, mode: str) -> NDArray[np.int64]:
    """Which head each entry ``(t, feature)`` of a ``(T, D)`` input lands in: ``(T, D)`` head ids.

    ``mode="correct"``: reshape to ``(T, h, d_h)`` then transpose to ``(h, T, d_h)`` (what
    `mha_numpy.split_heads` does). ``mode="wrong"``: reshape straight to ``(h, T, d_h)``; the shape
    is right but head ``i`` then receives whole tokens (a block of rows), not its ``d_h`` features.
    """
    d_h = head_width(width, heads)
    length = check_int("length", length, symbol="T")
    if mode not in ("correct", "wrong"):
        raise ValueError(f"mode must be 'correct' or 'wrong', got {mode!r}")
    entry = np.arange(length * width).reshape(1, length, width)  # (1, T, D): entry id = t*D + feature
    if mode == "correct":
        split = _split_heads(entry.astype(np.float64), heads).astype(np.int64)  # (1, h, T, d_h)
    else:
        split = entry.reshape(1, heads, length, d_h)  # the pitfall: same shape, wrong numbers
    owner = np.empty(length * width, dtype=np.int64)
    for head in range(heads):
        owner[split[0, head].ravel()] = head
    return owner.reshape(length, width)


def features_per_head(layout: NDArray[np.integer], heads: int) -> list[list[int]]:
    """For a `split_layout` ``(T, D)``: the sorted input features each head receives."""
    _check_layout(layout, heads)
    return [sorted({int(f) for f in np.nonzero(layout == i)[1]}) for i in range(heads)]


def tokens_per_head(layout: NDArray[np.integer], heads: int) -> list[list[int]]:
    """For a `split_layout` ``(T, D)``: the sorted token positions each head receives."""
    _check_layout(layout, heads)
    return [sorted({int(t) for t in np.nonzero(layout == i)[0]}) for i in range(heads)]


def _check_layout(layout: Any, heads: Any) -> None:
    check_array("layout", layout, "numpy", "(T, D)", floating=False)
    check_int("heads", heads, symbol="h")


def weight_entries(B: int, h: int, T: int, S: int) -> int:
    """Entries in a materialised attention-weight tensor ``(B, h, T, S)``: one map per head."""
    return math.prod(check_int(name, n) for name, n in (("B", B), ("h", h), ("T", T), ("S", S)))


def attention_cost(B: int, T: int, S: int, D: int, h: int) -> dict[str, int]:
    """Sizes and work of one attention call with ``h`` heads of width ``d_h = D / h``.

    ``weight_entries = B*h*T*S`` (grows with h); ``score_multiplies = B*h*T*S*d_h = B*T*S*D`` and
    ``mix_multiplies`` (weights @ values) the same: both depend on the total head width ``h*d_h``,
    not on how it is cut into heads.
    """
    d_h = head_width(D, h)
    entries = weight_entries(B, h, T, S)
    return {"d_h": d_h, "weight_entries": entries, "score_multiplies": entries * d_h, "mix_multiplies": entries * d_h}
