"""Induction heads in a two-layer attention-only model (lesson 09), read in NumPy from shipped weights.

The task: a sequence of ``L`` distinct random tokens followed by the same ``L`` tokens again
(`repeated_tokens`); the model predicts each next token. The model (trained by
``scripts/train_induction_heads.py``): token embedding + position embedding form the residual
stream ``x``; each of two causal `mha_numpy.MultiHead` layers adds its output, ``x = x + MHA(x)``;
the unembedding turns ``x`` into next-token logits. It reads at most ``2L - 1`` tokens (the input
is a sequence without its last token; the targets are the sequence shifted by one).

Layers and heads are numbered from 0 in code: "layer 0" is the first layer.

Two scores per head, from its attention weights ``A (B, T, T)`` (query ``t``, key ``s``):

- previous-token score  ``prev = mean over b and t = a .. P-1 of A[b, t, t - 1]``
  (``a = 1, P = T`` by default; ``P = L`` scores the first half only, the keys an induction head
  reads; ``a = L`` the repeated half, where a head may also look at the earlier copy ``t - L``)
- induction score       ``ind  = mean over b and t = L .. T-1 of A[b, t, t - L + 1]``

Position ``t - L + 1`` holds the token that came *after* the earlier copy of token ``t`` (that copy
sits at ``t - L``): an induction head attends there and copies it. Both scores lie in ``[0, 1]``.

Attending there is half of an induction head (Olsson et al., 2022); the other half is *copying*:
what the head writes must raise the logit of the token it reads. `copying_scores` measures that
from the weights, through each head's full OV circuit ``W_E @ OV @ W_U`` (Elhage et al., 2021).

Training varies the repeat's length (see `repeated_tokens`), so the earlier copy cannot be found by
position: the last layer's head must match tokens. It can if an earlier head has written "my
previous token was ..." into each position of the stream (a previous-token head), so that the
induction head's *keys* can look for "previous token = my current token": composition of two heads.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.mha_numpy import MultiHead, attention, causal_mask, softmax, split_heads
from lessons_lib.validation import (
    check_array,
    check_instance,
    check_int,
    check_layer_inputs,
    check_rate,
    check_record,
    check_seed,
    head_width,
    layer_mask,
    load_npz,
)

__all__ = [
    "CURVE_PATH",
    "DATA_PATH",
    "EVAL_SEED",
    "ONE_LAYER_PATH",
    "InductionConfig",
    "InductionModel",
    "ablation_losses",
    "composition_scores",
    "copying_scores",
    "even_spread_weights",
    "full_ov_circuit",
    "head_writes",
    "induction_score",
    "induction_targets",
    "load_induction_model",
    "load_training_curve",
    "loss_per_position",
    "measure",
    "offset_score",
    "path_ablation_scores",
    "previous_token_score",
    "repeat_bets",
    "repeat_prediction_stats",
    "repeated_tokens",
    "run",
    "save_weights",
    "unseen_token_loss",
    "weight_composition_scores",
]

Array = NDArray[np.floating[Any]]
Tokens = NDArray[np.int64]
DATA_PATH = Path(__file__).resolve().parent / "data" / "induction_heads.npz"
ONE_LAYER_PATH = DATA_PATH.with_name("induction_one_layer.npz")  # the same training, one layer of heads
CURVE_PATH = DATA_PATH.with_name("induction_heads_curve.json")  # the shipped training, recorded as it went
EVAL_SEED = 1  # the fixed evaluation batch; training batches use other seeds
DRAW_LIMIT = 2**22  # the most random numbers repeated_tokens draws (batch x vocab): 32 MiB, well under a second
CONFIG_FIELDS = ("vocab", "half", "width", "heads", "layers", "steps", "batch", "shortest", "seed")


@dataclass(frozen=True)
class InductionConfig:
    """Sizes and training settings: ``vocab`` = V, ``half`` = L, ``width`` = D, ``heads`` = h.

    Training batches repeat runs of ``shortest .. L`` tokens (see `repeated_tokens`).
    """

    vocab: int = 32
    half: int = 12
    width: int = 32
    heads: int = 4
    layers: int = 2
    steps: int = 3000
    batch: int = 64
    shortest: int = 6
    seed: int = 0
    learning_rate: float = 6e-3

    def __post_init__(self) -> None:
        head_width(self.width, self.heads)
        for name in CONFIG_FIELDS:
            check_int(f"InductionConfig.{name}", getattr(self, name), low=0 if name == "seed" else 1)
        check_rate("InductionConfig.learning_rate", self.learning_rate)
        if self.shortest > self.half:
            raise ValueError(f"shortest={self.shortest} must be <= half L={self.half}")
        if self.half > self.vocab:
            raise ValueError(f"half L={self.half} must be <= vocab V={self.vocab}: the first half has distinct tokens")

    @property
    def context(self) -> int:
        """``2L - 1``: the most tokens the model reads (rows of the position embedding)."""
        return 2 * self.half - 1


def repeated_tokens(batch: int, vocab: int, half: int, seed: int = 0, shortest: int | None = None) -> Tokens:
    """``(B, 2L)`` int64: ``L`` distinct tokens drawn from ``0 .. V-1``, then the same ``L`` again.

    With ``shortest`` (training batches), each sequence repeats a run of its own length ``L_b``,
    drawn from ``shortest .. L``, and random tokens fill the rest: ``A_b A_b filler``. The repeat then
    starts at a different position in each sequence, so no head can find the earlier copy by position
    alone; only reading the tokens (an induction circuit) works.

    Each sequence's distinct tokens come from a random order of the whole vocabulary, so ``B x V``
    random numbers are drawn: ``B * V`` is at most 2**22 (larger requests are refused at once).
    """
    batch, vocab, half = check_int("batch", batch, symbol="B"), check_int("vocab", vocab), check_int("half", half)
    seed = check_seed("seed", seed)
    if half > vocab:
        raise ValueError(f"half L={half} must be <= vocab V={vocab} (the first half has distinct tokens)")
    if batch * vocab > DRAW_LIMIT:
        raise ValueError(
            f"batch * vocab must be at most 2**22 = {DRAW_LIMIT} (one random number per token of the vocabulary "
            f"and sequence), got {batch} * {vocab} = {batch * vocab}; use a smaller vocab or batch"
        )
    rng = np.random.default_rng(seed)
    keys = rng.random((batch, vocab))  # a random order of the vocabulary per sequence: sort by key
    first = np.argpartition(keys, half - 1, axis=1)[:, :half]  # the L smallest keys, unordered
    first = np.take_along_axis(first, np.take_along_axis(keys, first, axis=1).argsort(axis=1), axis=1)  # in order
    tokens = np.concatenate([first, first], axis=1)  # (B, 2L)
    if shortest is not None:
        shortest = check_int("shortest", shortest, high=half)
        runs = rng.integers(shortest, half + 1, size=batch)  # (B,) each sequence's L_b
        filler = rng.integers(0, vocab, size=(batch, 2 * half))
        t = np.arange(2 * half)
        source = np.where(t < runs[:, None], t, t - runs[:, None])  # A_b A_b: position t copies t mod L_b
        tokens = np.where(t < 2 * runs[:, None], np.take_along_axis(first, source % half, axis=1), filler)
    out: Tokens = tokens.astype(np.int64)
    return out


@dataclass(frozen=True)
class InductionModel:
    """The trained model in float64: embeddings ``(V, D)`` and ``(2L - 1, D)``, layers, ``unembedding (D, V)``."""

    config: InductionConfig
    token_embedding: Array
    position_embedding: Array
    layers: tuple[MultiHead, ...]
    unembedding: Array

    def __post_init__(self) -> None:
        check_instance("config", self.config, InductionConfig, "an induction.InductionConfig")
        c = self.config
        if not (isinstance(self.layers, tuple) and self.layers and all(isinstance(m, MultiHead) for m in self.layers)):
            kinds = [type(m).__name__ for m in self.layers] if isinstance(self.layers, (list, tuple)) else ""
            raise TypeError(
                f"layers must be a non-empty tuple of mha_numpy.MultiHead layers, got {type(self.layers).__name__} "
                f"{kinds}".rstrip()
            )
        shapes = {"token_embedding": (c.vocab, c.width), "position_embedding": (c.context, c.width)}
        check_record(self, shapes | {"unembedding": (c.width, c.vocab)})


def _expected_shapes(c: InductionConfig) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {
        "token_embedding": (c.vocab, c.width),
        "position_embedding": (c.context, c.width),
    }
    shapes |= {f"layer{i}_{w}": (c.width, c.width) for i in range(c.layers) for w in ("wq", "wk", "wv", "wo")}
    return shapes | {"unembedding": (c.width, c.vocab)}


CURVE_FIELDS = ("step", "first_half_loss", "repeated_half_loss", "induction_score", "previous_token_score")


def load_training_curve(path: Path | str = CURVE_PATH) -> dict[str, Array]:
    """The shipped training recorded as it went (``scripts/train_induction_heads.py --curve-only``).

    Returns ``"training_loss" (steps,)``, the loss of every training batch, and, every
    ``record_every`` steps and after the last, on the held-out batch: ``"step"``, ``"first_half_loss"``
    and ``"repeated_half_loss"`` (mean over positions ``0 .. L-2`` and ``L .. 2L-2``), the last
    layer's largest ``"induction_score"`` and the first layer's largest ``"previous_token_score"``
    (first half), all ``(records,)``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no training curve at {path}: run `python scripts/train_induction_heads.py --curve-only`"
        )
    record = json.loads(path.read_text())
    missing = [name for name in (*CURVE_FIELDS, "training_loss") if name not in record]
    if missing:
        raise ValueError(f"{path} is not a training curve: it lacks {missing}")
    names = (*CURVE_FIELDS, "training_loss")
    curve: dict[str, Array] = {name: np.asarray(record[name], dtype=np.float64) for name in names}
    if len({curve[name].shape for name in CURVE_FIELDS}) != 1:
        raise ValueError(f"{path}: the recorded series have different lengths")
    return curve


def save_weights(arrays: dict[str, NDArray[Any]], config: InductionConfig, path: Path = DATA_PATH) -> Path:
    """Write the arrays and the config (``config`` ints, ``learning_rate``) to a compressed ``.npz``."""
    check_instance("config", config, InductionConfig, "an induction.InductionConfig, e.g. InductionConfig()")
    if not isinstance(arrays, dict):
        raise TypeError(f"arrays must be a dict of name -> NumPy array, got {type(arrays).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ints = np.array([getattr(config, name) for name in CONFIG_FIELDS], dtype=np.int64)
    contents: dict[str, Any] = {"config": ints, "learning_rate": np.array(config.learning_rate), **arrays}
    np.savez_compressed(path, **contents)
    return path


def load_induction_model(path: Path | str = DATA_PATH) -> InductionModel:
    """Load weights written by ``scripts/train_induction_heads.py``, checking every key and shape."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no induction-heads weights at {path}; run `python scripts/train_induction_heads.py` to create them"
        )
    arrays = load_npz(path, "an induction-heads weights file (a .npz written by induction.save_weights)")
    missing = sorted({"config", "learning_rate"} - set(arrays))
    if missing or np.shape(arrays["config"]) != (len(CONFIG_FIELDS),):
        raise ValueError(f"{path} is not an induction-heads weights file: no valid 'config' and 'learning_rate'")
    sizes = {name: int(n) for name, n in zip(CONFIG_FIELDS, arrays["config"], strict=True)}
    config = InductionConfig(**sizes, learning_rate=float(arrays["learning_rate"]))
    shapes = _expected_shapes(config)
    missing = sorted(set(shapes) - set(arrays))
    if missing:
        raise ValueError(f"{path} lacks the arrays {missing}; rerun `python scripts/train_induction_heads.py`")
    for name, shape in shapes.items():
        if arrays[name].shape != shape:
            raise ValueError(f"{name} in {path} has shape {arrays[name].shape}, expected {shape} for {config}")
    w = {name: arrays[name].astype(np.float64) for name in shapes}
    layers = tuple(
        MultiHead.from_weights(w[f"layer{i}_wq"], w[f"layer{i}_wk"], w[f"layer{i}_wv"], w[f"layer{i}_wo"], config.heads)
        for i in range(config.layers)
    )
    return InductionModel(config, w["token_embedding"], w["position_embedding"], layers, w["unembedding"])


def _check_tokens(model: InductionModel, tokens: Any, most: int) -> None:
    check_array("tokens", tokens, "numpy", "(B, T)", floating=False)
    if tokens.dtype.kind not in "iu" or not 1 <= tokens.shape[1] <= most:
        raise ValueError(f"tokens must be integer ids (B, T) with 1 <= T <= {most}, got {tokens.dtype} {tokens.shape}")
    if tokens.size and not 0 <= tokens.min() <= tokens.max() < model.config.vocab:
        raise ValueError(f"token ids must be in 0 .. {model.config.vocab - 1}, got {tokens.min()} .. {tokens.max()}")


def head_writes(layer: MultiHead, x: Array, allowed: NDArray[np.bool_]) -> tuple[Array, Array]:
    """What each head of ``layer`` adds to the stream ``x (B, T, D)``: ``(writes (B, h, T, D), weights)``.

    Head ``i`` reads all of ``x`` (through its columns of ``wq``, ``wk``, ``wv``) and writes through
    its ``d_h`` rows of ``wo``; the layer's output is the sum of the ``h`` writes.
    """
    check_instance("layer", layer, MultiHead, "a mha_numpy.MultiHead")
    B, T, _ = check_layer_inputs(x, x, layer.width, layer.dtype, "numpy", names=("x", "x"))
    layer_mask(allowed, B, layer.heads, T, T, "numpy")
    return _head_writes(layer, x, allowed)


def _head_writes(layer: MultiHead, x: Array, allowed: NDArray[np.bool_] | None) -> tuple[Array, Array]:
    q = split_heads(x @ layer.wq, layer.heads)  # (B, T, D) -> (B, h, T, d_h)
    k = split_heads(x @ layer.wk, layer.heads)
    v = split_heads(x @ layer.wv, layer.heads)
    heads_out, weights = attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, T)
    wo_rows = layer.wo.reshape(layer.heads, layer.head_width, layer.width)  # (h, d_h, D): head i's rows
    writes: Array = np.einsum("bhtk,hkd->bhtd", heads_out, wo_rows)  # (B, h, T, D)
    return writes, weights


def _check_ablate(model: InductionModel, ablate: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """``ablate`` as a set of ``(layer, head)`` int pairs; any iterable of pairs (tuples, lists) works."""
    example = "e.g. [(0, 1)] for layer 0, head 1, or [] for none"
    if isinstance(ablate, (str, bytes)) or not isinstance(ablate, Iterable):
        raise TypeError(f"ablate must be a list of (layer, head) pairs, {example}; got {type(ablate).__name__}")
    pairs = list(ablate)
    if any(isinstance(item, numbers.Integral) for item in pairs):
        fix = f"for one head, wrap the pair in a list: [{tuple(pairs)!r}]" if len(pairs) == 2 else example
        raise TypeError(
            f"ablate must be a list of (layer, head) pairs, got {type(ablate).__name__} {ablate!r} holding plain "
            f"numbers; {fix}"
        )
    off = set()
    for index, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Iterable):
            raise TypeError(f"ablate[{index}] must be a (layer, head) pair, got {type(pair).__name__} {pair!r}")
        items = tuple(pair)
        if len(items) != 2:
            raise ValueError(f"ablate[{index}] must be a (layer, head) pair of two ints, got {pair!r}")
        at_layer = check_int("ablated layer", items[0], low=0, high=model.config.layers - 1)
        head = check_int("ablated head", items[1], low=0, high=model.config.heads - 1)
        off.add((at_layer, head))
    return off


def run(model: InductionModel, tokens: Tokens, ablate: Iterable[tuple[int, int]] = ()) -> tuple[Array, list[Array]]:
    """Forward pass on ``tokens (B, T)``, ``T <= 2L - 1``, with the heads in ``ablate`` zeroed.

    ``ablate`` lists ``(layer, head)`` pairs; an ablated head writes nothing into the residual
    stream (its weights are still returned).

    Returns ``(logits (B, T, V), weights)``: ``weights[i]`` is layer ``i``'s ``(B, h, T, T)``.
    """
    check_instance("model", model, InductionModel, "the trained model from induction.load_induction_model()")
    _check_tokens(model, tokens, model.config.context)
    off = _check_ablate(model, ablate)
    T = tokens.shape[1]
    allowed = causal_mask(T)
    x = model.token_embedding[tokens] + model.position_embedding[:T]  # (B, T, D): the residual stream
    weights: list[Array] = []
    for i, layer in enumerate(model.layers):
        writes, w = _head_writes(layer, x, allowed)
        kept = [head for head in range(layer.heads) if (i, head) not in off]
        x = x + writes[:, kept].sum(axis=1)  # each kept head adds what it writes
        weights.append(w)
    return x @ model.unembedding, weights  # (B, T, D) @ (D, V) -> (B, T, V)


def path_ablation_scores(model: InductionModel, tokens: Tokens) -> dict[str, Array]:
    """The last layer's induction scores when one first-layer head's write is hidden from one side.

    For each first-layer head ``j``, its write is removed from the stream that the last layer's
    **keys** read (``"keys"``), or from the stream its **queries** read (``"queries"``); the other
    side still sees the whole stream, and values always do. Each entry is ``(h, h)``: row ``j``
    (the hidden head), column ``i`` (the last layer's head). ``tokens (B, 2L - 1)`` as in `run`
    reads them, repeated sequences (`repeated_tokens` without its last token).

    K-composition, measured on activations: an induction head whose score collapses when the
    previous-token head is hidden from its keys, and not from its queries, finds its target through
    the keys. This is a path ablation on data; Elhage et al. (2021) call "composition scores" a
    property of the weights alone, computed by `weight_composition_scores`. (`composition_scores`
    is the old name of this function and still works.)
    """
    check_instance("model", model, InductionModel, "the trained model from induction.load_induction_model()")
    _check_tokens(model, tokens, model.config.context)
    if model.config.layers != 2:
        raise ValueError(f"path_ablation_scores reads a two-layer model, this one has {model.config.layers} layers")
    L, T = model.config.half, tokens.shape[1]
    if T <= L:
        raise ValueError(f"tokens must reach into the repeated half: T > L={L}, got T={T}")
    allowed = causal_mask(T)
    x0 = model.token_embedding[tokens] + model.position_embedding[:T]
    first, last = model.layers
    writes, _ = _head_writes(first, x0, allowed)  # (B, h, T, D)
    x1 = x0 + writes.sum(axis=1)  # what the last layer reads

    def scores(x_query: Array, x_key: Array) -> Array:
        q = split_heads(x_query @ last.wq, last.heads)
        k, v = split_heads(x_key @ last.wk, last.heads), split_heads(x1 @ last.wv, last.heads)
        return induction_score(attention(q, k, v, allowed)[1], L)

    return {
        "keys": np.stack([scores(x1, x1 - writes[:, j]) for j in range(first.heads)]),
        "queries": np.stack([scores(x1 - writes[:, j], x1) for j in range(first.heads)]),
    }


composition_scores = path_ablation_scores  # the old name, kept so that older notebooks still run


def weight_composition_scores(model: InductionModel) -> dict[str, Array]:
    """Elhage et al. (2021)'s composition scores of a two-layer model: from the weights alone, no data.

    With row vectors (``y = x @ w``), head ``i`` of a layer has the ``(D, D)`` matrices
    ``QK_i = Wq_i @ Wk_i.T`` (the score is ``x_query @ QK_i @ x_key.T``) and ``OV_i = Wv_i @ Wo_i``
    (its write is ``weights @ x @ OV_i``). A first-layer head ``j`` composes with a last-layer head
    ``i`` through its keys when ``QK_i @ OV_j.T`` is large, through its queries when
    ``OV_j @ QK_i`` is, through its values when ``OV_j @ OV_i`` is; each score is that product's
    Frobenius norm divided by the two factors' norms (a number in ``[0, 1]``). Entries ``(h, h)``:
    row ``j`` (first layer), column ``i`` (last layer), under ``"keys"``, ``"queries"``, ``"values"``.
    """
    check_instance("model", model, InductionModel, "an induction.InductionModel")
    if model.config.layers != 2:
        layers = model.config.layers
        raise ValueError(f"weight_composition_scores reads a two-layer model, this one has {layers} layer(s)")

    def circuits(layer: MultiHead) -> tuple[list[Array], list[Array]]:
        d = layer.head_width
        cols = [slice(i * d, (i + 1) * d) for i in range(layer.heads)]
        qk: list[Array] = [layer.wq[:, c] @ layer.wk[:, c].T for c in cols]  # (D, D) each
        ov: list[Array] = [layer.wv[:, c] @ layer.wo[c, :] for c in cols]
        return qk, ov

    _, ov_first = circuits(model.layers[0])
    qk_last, ov_last = circuits(model.layers[-1])

    def ratio(product: Array, a: Array, b: Array) -> float:
        return float(np.linalg.norm(product) / (np.linalg.norm(a) * np.linalg.norm(b)))

    h = model.config.heads
    table = {
        "keys": [[ratio(qk_last[i] @ ov_first[j].T, qk_last[i], ov_first[j]) for i in range(h)] for j in range(h)],
        "queries": [[ratio(ov_first[j] @ qk_last[i], qk_last[i], ov_first[j]) for i in range(h)] for j in range(h)],
        "values": [[ratio(ov_first[j] @ ov_last[i], ov_last[i], ov_first[j]) for i in range(h)] for j in range(h)],
    }
    return {name: np.array(rows) for name, rows in table.items()}


def full_ov_circuit(model: InductionModel, layer: int, head: int) -> Array:
    """``(V, V)``: ``W_E @ OV @ W_U`` of head ``head`` of layer ``layer``, ``OV = Wv_head @ Wo_head``.

    Entry ``[a, b]`` is how much the head raises the logit of token ``b`` when it attends (with
    weight 1) to a position holding token ``a``, through the direct path: the token's embedding read
    by the head's value, written through its rows of ``W_o`` and read by the unembedding. (Position
    embeddings and earlier layers' writes are left out: this is the token-to-logit part.)
    """
    check_instance("model", model, InductionModel, "the trained model from induction.load_induction_model()")
    layer = check_int("layer", layer, low=0, high=model.config.layers - 1)
    chosen = model.layers[layer]
    head = check_int("head", head, low=0, high=chosen.heads - 1)
    cols = slice(head * chosen.head_width, (head + 1) * chosen.head_width)
    ov = chosen.wv[:, cols] @ chosen.wo[cols, :]  # (D, D): what the head writes for what it reads
    circuit: Array = model.token_embedding @ ov @ model.unembedding  # (V, D) (D, D) (D, V) -> (V, V)
    return circuit


def copying_scores(model: InductionModel) -> dict[str, Array]:
    """Does each head copy the token it attends to? Two readings of its `full_ov_circuit` ``M (V, V)``,
    each ``(layers, h)``:

    - ``"eigenvalue"``: ``sum(eigenvalues of M) / sum(|eigenvalues of M|)``, the copying score of
      Elhage et al. (2021), used by Olsson et al. (2022). It lies in ``[-1, 1]``: near 1 when ``M``
      maps every direction roughly onto itself with a positive factor (reading token ``a`` raises
      ``a``'s logit: copying), near -1 when it maps them onto their negatives (anti-copying: the
      head lowers the logit of the token it reads).
    - ``"top_token"``: the fraction of tokens ``a`` whose own logit is the largest of row ``a``, i.e.
      attending to ``a`` raises ``a`` more than any other token (a uniform chance is ``1 / V``).
    """
    check_instance("model", model, InductionModel, "the trained model from induction.load_induction_model()")
    c = model.config
    eigen = np.zeros((c.layers, c.heads))
    top = np.zeros((c.layers, c.heads))
    for i in range(c.layers):
        for j in range(c.heads):
            circuit = full_ov_circuit(model, i, j)
            values = np.linalg.eigvals(circuit)  # complex in general; their sum is the (real) trace
            eigen[i, j] = values.sum().real / np.abs(values).sum()
            top[i, j] = np.mean(circuit.argmax(axis=1) == np.arange(c.vocab))
    return {"eigenvalue": eigen, "top_token": top}


def induction_targets(tokens: Any) -> NDArray[np.int64]:
    """For each position ``t`` of ``tokens (T,)``: the position after the latest earlier copy of
    token ``t``, or ``-1`` where token ``t`` has not occurred before.

    That is where an induction head attends. For a repeated sequence ``A A`` it is ``t - L + 1``
    in the second half, which is what `induction_score` averages.
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a 1-D array of integer ids (T,), got {tokens.dtype} {tokens.shape}")
    targets = np.full(tokens.shape, -1, dtype=np.int64)
    last_seen: dict[int, int] = {}
    for t, token in enumerate(tokens.tolist()):
        if token in last_seen:
            targets[t] = last_seen[token] + 1
        last_seen[token] = t
    return targets


def loss_per_position(model: InductionModel, tokens: Tokens, ablate: Iterable[tuple[int, int]] = ()) -> Array:
    """Mean cross-entropy at each position ``t``: ``-log p(token t+1 | tokens 0..t)``, shape ``(T - 1,)``.

    ``tokens (B, T)`` are whole sequences (e.g. ``(B, 2L)`` from `repeated_tokens`); the model reads
    ``tokens[:, :-1]``. For repeated sequences, positions ``0 .. L-2`` predict first-half tokens
    (unpredictable: at best ``ln(V - t - 1)``, see `unseen_token_loss`), position ``L - 1`` the
    repeat's first token, and ``L .. 2L-2`` the rest of the repeat.
    """
    check_instance("model", model, InductionModel, "the trained model from induction.load_induction_model()")
    _check_tokens(model, tokens, model.config.context + 1)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens needs at least 2 positions (an input and its next token), got {tokens.shape}")
    logits, _ = run(model, tokens[:, :-1], ablate)
    log_p = np.log(softmax(logits, axis=-1))  # (B, T - 1, V)
    target = tokens[:, 1:, None]  # (B, T - 1, 1)
    loss: Array = -np.take_along_axis(log_p, target, axis=-1)[..., 0].mean(axis=0)
    return loss


def _check_weights(weights: Any) -> None:
    check_array("weights", weights, "numpy", "(B, h, T, T)")
    if weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must be self-attention weights (B, h, T, T), got shape {weights.shape}")


def previous_token_score(weights: Array, positions: int | None = None, start: int = 1) -> Array:
    """Per head, ``mean over b and t = a .. P-1 of A[b, head, t, t - 1]``: ``(B, h, T, T)`` -> ``(h,)``.

    ``positions`` is ``P``, how many leading query positions to score (default: all ``T``);
    ``start`` is ``a``, the first query scored (default 1, the first with a previous token; ``L``
    scores the repeated half of an ``A A`` sequence).
    """
    _check_weights(weights)
    T = weights.shape[-1]
    if T < 2:
        raise ValueError(
            f"weights cover T={T} position; a previous-token score needs T >= 2, got shape {weights.shape}"
        )
    P = T if positions is None else check_int("positions", positions, low=2, high=T, symbol="P")
    a = check_int("start", start, low=1, high=P - 1, symbol="a")
    t = np.arange(a, P)
    score: Array = weights[..., t, t - 1].mean(axis=(0, 2))  # (B, h, P - a) -> (h,)
    return score


def induction_score(weights: Array, half: int) -> Array:
    """Per head, ``mean over b and t = L .. T-1 of A[b, head, t, t - L + 1]``: ``(B, h, T, T)`` -> ``(h,)``.

    ``half`` is ``L``; the weights must cover at least one repeated position (``T > L``).
    """
    _check_weights(weights)
    T = weights.shape[-1]
    if T < 2:
        raise ValueError(
            f"weights cover T={T} position; an induction score needs T > L >= 1, got shape {weights.shape}"
        )
    half = check_int("half", half, high=T - 1, symbol="L")
    t = np.arange(half, T)
    score: Array = weights[..., t, t - half + 1].mean(axis=(0, 2))  # (B, h, T - L) -> (h,)
    return score


def offset_score(weights: Array, offset: int, queries: Any) -> Array:
    """Per head, ``mean over b and t in queries of A[b, head, t, t - offset]``: ``(B, h, T, T)`` -> ``(h,)``.

    The weight each query ``t`` puts on the key ``offset`` positions back. Both scores above are
    cases of it: `previous_token_score` is offset 1, `induction_score` offset ``L - 1`` over the
    queries ``L .. T-1``; offset ``L`` over those queries is the weight on the earlier copy itself.
    ``queries`` are integer positions with ``offset <= t < T``.
    """
    _check_weights(weights)
    T = weights.shape[-1]
    offset = check_int("offset", offset, low=0, high=T - 1)
    t = np.asarray(queries)
    if t.ndim != 1 or t.size == 0 or t.dtype.kind not in "iu":
        raise TypeError(f"queries must be a non-empty 1-D array of integer positions, got {t.dtype} {t.shape}")
    if t.min() < offset or t.max() >= T:
        raise ValueError(f"queries must lie in offset .. T-1 = {offset} .. {T - 1}, got {t.min()} .. {t.max()}")
    score: Array = weights[..., t, t - offset].mean(axis=(0, 2))  # (B, h, len(queries)) -> (h,)
    return score


def unseen_token_loss(vocab: int, half: int) -> Array:
    """``(L - 1,)``: the best possible loss at positions ``t = 0 .. L-2`` of a first half.

    `repeated_tokens` draws the ``L`` tokens without replacement, so after ``t + 1`` of them the next
    is one of the ``V - t - 1`` not seen yet, each as likely: the best loss is ``ln(V - t - 1)``.
    """
    vocab, half = check_int("vocab", vocab, symbol="V"), check_int("half", half, high=vocab, symbol="L")
    loss: Array = np.log(vocab - np.arange(half - 1) - 1.0)
    return loss


def even_spread_weights(T: int) -> Array:
    """``(1, 1, T, T)`` causal weights of a head that spreads evenly: query ``t`` gives ``1 / (t + 1)``
    to each of keys ``0 .. t``. Its scores are the baselines a head's scores are compared with."""
    T = check_int("T", T)
    allowed = causal_mask(T)
    weights: Array = (allowed / allowed.sum(axis=-1, keepdims=True))[None, None]
    return weights


def repeat_bets(model: InductionModel, tokens: Tokens, ablate: Iterable[tuple[int, int]] = ()) -> dict[str, Array]:
    """Where the model puts its next-token probability at each position of ``tokens (B, T)`` (it reads
    all of them), with the heads in ``ablate`` zeroed: means over the batch, ``(T,)`` each, of the
    probability of the sequence's first token (``"first_token"``: a bet that a repeat starts) and of
    every token among ``0 .. t`` already seen (``"seen"``; in a first half of distinct tokens none of
    them can come next)."""
    logits, _ = run(model, tokens, ablate)
    p = softmax(logits, axis=-1)  # (B, T, V)
    T = tokens.shape[1]
    seen = np.zeros(p.shape, dtype=bool)
    for t in range(T):
        np.put_along_axis(seen[:, t], tokens[:, : t + 1], True, axis=-1)
    first = np.broadcast_to(tokens[:, :1, None], (*tokens.shape, 1))
    return {
        "first_token": np.take_along_axis(p, first, axis=-1)[..., 0].mean(axis=0),
        "seen": np.where(seen, p, 0.0).sum(axis=-1).mean(axis=0),
    }


def repeat_prediction_stats(
    model: InductionModel, tokens: Tokens, ablate: Iterable[tuple[int, int]] = ()
) -> dict[str, float]:
    """How the model predicts the repeated half of ``tokens (B, 2L)`` (positions ``L .. 2L-2``), with the
    heads in ``ablate`` zeroed: means over the batch and those positions of the top token's probability
    (``"top_probability"``), the entropy of the prediction in nats (``"entropy"``, at most ``ln V``),
    the probability of the right next token (``"p_right"``) and of all the first half's tokens, among
    which the right one always is (``"p_first_half"``; a uniform guess gives them ``L / V``)."""
    _check_tokens(model, tokens, model.config.context + 1)
    L = model.config.half
    if tokens.shape[1] <= L + 1:
        raise ValueError(f"tokens must reach into the repeated half: T > L + 1 = {L + 1}, got T={tokens.shape[1]}")
    logits, _ = run(model, tokens[:, :-1], ablate)
    p = softmax(logits, axis=-1)[:, L:]  # (B, T - 1 - L, V): the repeated half's predictions
    right = np.take_along_axis(p, tokens[:, L + 1 :, None], axis=-1)[..., 0]
    entropy = -(p * np.log(np.maximum(p, 1e-300))).sum(axis=-1)
    first_half = np.zeros(p.shape[0::2], dtype=bool)  # (B, V): the tokens of each sequence's first half
    np.put_along_axis(first_half, tokens[:, :L], True, axis=-1)
    return {
        "top_probability": float(p.max(axis=-1).mean()),
        "entropy": float(entropy.mean()),
        "p_right": float(right.mean()),
        "p_first_half": float(np.where(first_half[:, None], p, 0.0).sum(axis=-1).mean()),
    }


def ablation_losses(model: InductionModel, tokens: Tokens) -> Array:
    """``(layers, h)``: the mean repeated-half loss (positions ``L .. 2L-2``) with each head zeroed alone."""
    check_instance("model", model, InductionModel, "the trained model from induction.load_induction_model()")
    L = model.config.half
    table = np.zeros((model.config.layers, model.config.heads))
    for i in range(model.config.layers):
        for j in range(model.config.heads):
            table[i, j] = loss_per_position(model, tokens, ablate=[(i, j)])[L:].mean()
    return table


def measure(path: Path | str = DATA_PATH, batch: int = 256, seed: int = EVAL_SEED) -> dict[str, Any]:
    """Every figure the lesson quotes, on the evaluation batch, as plain (JSON-ready) numbers."""
    model = load_induction_model(path)
    c = model.config
    tokens = repeated_tokens(batch, c.vocab, c.half, seed)
    loss = loss_per_position(model, tokens)
    _, weights = run(model, tokens[:, :-1])
    prev = np.stack([previous_token_score(w) for w in weights])  # (layers, h)
    prev_first = np.stack([previous_token_score(w, c.half) for w in weights])  # queries 1 .. L-1 only
    prev_second = np.stack([previous_token_score(w, start=c.half) for w in weights])  # queries L .. 2L-2
    ind = np.stack([induction_score(w, c.half) for w in weights])
    prev_head, ind_head = int(prev_first[0].argmax()), int(ind[-1].argmax())
    induction_heads = [(c.layers - 1, int(j)) for j in np.flatnonzero(ind[-1] > 0.7)]
    bets = repeat_bets(model, tokens[:, :-1])
    spread = even_spread_weights(c.context)

    def rounded(a: Any) -> Any:
        return np.round(np.asarray(a, dtype=float), 4).tolist()

    figures = {
        "loss_per_position": rounded(loss),
        "first_half_loss": rounded(loss[: c.half - 1].mean()),  # positions 0 .. L-2: the next token is new
        "position_L-1_loss": rounded(loss[c.half - 1]),  # predicts the first token of the repeat
        "repeated_half_loss": rounded(loss[c.half :].mean()),
        "uniform_loss": rounded(np.log(c.vocab)),
        "best_first_half_loss": rounded(unseen_token_loss(c.vocab, c.half).mean()),
        "first_token_probability": rounded(bets["first_token"][: c.half]),
        "seen_token_probability": rounded(bets["seen"][: c.half]),
        "even_spread_previous_token_score": rounded(previous_token_score(spread, c.half)[0]),
        "even_spread_induction_score": rounded(induction_score(spread, c.half)[0]),
        "previous_token_score": rounded(prev),
        "previous_token_score_first_half": rounded(prev_first),
        "previous_token_score_repeated_half": rounded(prev_second),
        "induction_score": rounded(ind),
        "previous_token_head": [0, prev_head],
        "induction_head": [c.layers - 1, ind_head],
        "ablation_repeated_half_loss": rounded(ablation_losses(model, tokens)),
    }
    if c.layers != 2:  # the composition figures read a first and a last layer
        return figures
    # Composition: the last layer's induction scores with each first-layer head zeroed in turn.
    composed = np.stack(
        [induction_score(run(model, tokens[:, :-1], ablate=[(0, j)])[1][-1], c.half) for j in range(c.heads)]
    )
    hidden = path_ablation_scores(model, tokens[:, :-1])  # the first-layer head hidden from keys or queries only
    both = repeat_prediction_stats(model, tokens, induction_heads)
    both_loss = loss_per_position(model, tokens, induction_heads)[c.half :].mean()
    by_weights = weight_composition_scores(model)
    copying = copying_scores(model)
    return figures | {
        "last_layer_induction_score_with_first_layer_head_ablated": rounded(composed),
        "last_layer_induction_score_with_first_layer_head_hidden_from_keys": rounded(hidden["keys"]),
        "last_layer_induction_score_with_first_layer_head_hidden_from_queries": rounded(hidden["queries"]),
        **{f"weight_composition_scores_{name}": rounded(table) for name, table in by_weights.items()},
        **{f"copying_score_{name}": rounded(table) for name, table in copying.items()},
        "induction_heads_zeroed_repeated_half_loss": rounded(both_loss),
        **{f"induction_heads_zeroed_{name}": rounded(value) for name, value in both.items()},
    }
