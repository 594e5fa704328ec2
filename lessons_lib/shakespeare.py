"""Lesson 10: a small GPT trained on Shakespeare's plays, one character at a time, read in NumPy.

The text (``scripts/prepare_shakespeare.py``): 33 plays to train on and 4 unseen plays to validate
on (Hamlet, Macbeth, The Tempest, Twelfth Night), shipped gzipped in ``lessons_lib/data``. The
model (``scripts/train_shakespeare.py``, PyTorch, `lessons_lib.shakespeare_torch`): characters are
the tokens (``V`` of them), ``T_max`` characters of context, learned positions, ``layers`` pre-norm
blocks, each with grouped-query attention (lesson 06; here ``h_kv = h``, multi-head) and a causal
mask (lesson 09), a final LayerNorm and an unembedding::

    x = E[tokens] + P[:T]                               (B, T, D): the residual stream
    for each block l:  x = x + attention_l(LN1_l(x))    the heads read earlier positions
                       x = x + ffn_l(LN2_l(x))          relu(z @ w_in + b_in) @ w_out + b_out
    logits = LN_f(x) @ U                                (B, T, V)

This module runs that model from the shipped weights in NumPy: `load_model`, `run` (logits and every
head's weights, heads or whole layers ablated), `loss`, `decode_step` and `generate` with lesson 06's
`kv_cache.KVCache` (or recomputing the whole prefix every step), and the head scores of lesson 10.
Layers and heads are numbered from 0.
"""

from __future__ import annotations

import gzip
import json
import numbers
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.block_numpy import _layer_norm
from lessons_lib.gqa_numpy import GroupedQueryAttention
from lessons_lib.kv_cache import KVCache
from lessons_lib.mha_numpy import _merge_heads, _softmax, _split_heads, causal_mask
from lessons_lib.validation import check_instance, check_int, check_rate, group_size, head_width, load_npz

__all__ = [
    "DATA",
    "FIGURES_PATH",
    "MODEL_PATH",
    "GPTConfig",
    "ShakespeareBlock",
    "ShakespeareModel",
    "Vocabulary",
    "array_shapes",
    "check_ablate",
    "check_arrays",
    "check_tokens",
    "copying_scores",
    "decode_step",
    "generate",
    "head_scores",
    "last_break",
    "load_arrays",
    "load_model",
    "load_text",
    "loss",
    "model_from_arrays",
    "ov_circuit",
    "random_repeat",
    "repeat_keys",
    "repeat_score",
    "run",
    "save_arrays",
    "target_score",
    "validation_windows",
    "word_targets",
]

Array = NDArray[np.floating[Any]]
DATA = Path(__file__).resolve().parent / "data"
MODEL_PATH = DATA / "shakespeare_gpt.npz"
FIGURES_PATH = DATA / "shakespeare_gpt.json"
TEXT_FILES = {"train": DATA / "shakespeare_train.txt.gz", "valid": DATA / "shakespeare_valid.txt.gz"}
INT_FIELDS = ("vocab", "context", "width", "heads", "kv_heads", "layers", "hidden", "steps", "batch", "warmup", "seed")
FLOAT_FIELDS = ("learning_rate", "weight_decay")


@dataclass(frozen=True)
class GPTConfig:
    """Sizes and training settings: ``vocab`` = V, ``context`` = T_max, ``width`` = D, ``heads`` = h,
    ``kv_heads`` = h_kv, ``hidden`` = F (the feed-forward width)."""

    vocab: int = 83
    context: int = 256
    width: int = 128
    heads: int = 4
    kv_heads: int = 4
    layers: int = 4
    hidden: int = 512
    steps: int = 4500
    batch: int = 16
    warmup: int = 200
    seed: int = 0
    learning_rate: float = 3e-3
    weight_decay: float = 0.1

    def __post_init__(self) -> None:
        for name in INT_FIELDS:
            check_int(f"GPTConfig.{name}", getattr(self, name), low=0 if name in ("seed", "warmup") else 1)
        head_width(self.width, self.heads)
        group_size(self.heads, self.kv_heads)
        check_rate("GPTConfig.learning_rate", self.learning_rate)
        if not 0 <= self.weight_decay < 1:
            raise ValueError(f"GPTConfig.weight_decay must be in [0, 1), got {self.weight_decay}")

    @property
    def head_width(self) -> int:
        """``d_h = D / h``."""
        return self.width // self.heads


def array_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every array of the model and its NumPy ``(in, out)`` shape."""
    check_instance("config", config, GPTConfig, "a shakespeare.GPTConfig, e.g. GPTConfig()")
    c = config
    kv = c.kv_heads * c.head_width
    shapes: dict[str, tuple[int, ...]] = {
        "token_embedding": (c.vocab, c.width),
        "position_embedding": (c.context, c.width),
    }
    for i in range(c.layers):
        shapes |= {f"block{i}_wq": (c.width, c.width), f"block{i}_wk": (c.width, kv), f"block{i}_wv": (c.width, kv)}
        shapes |= {f"block{i}_wo": (c.width, c.width)}
        shapes |= {f"block{i}_{n}_{p}": (c.width,) for n in ("norm1", "norm2") for p in ("gain", "bias")}
        shapes |= {f"block{i}_w_in": (c.width, c.hidden), f"block{i}_b_in": (c.hidden,)}
        shapes |= {f"block{i}_w_out": (c.hidden, c.width), f"block{i}_b_out": (c.width,)}
    return shapes | {"norm_f_gain": (c.width,), "norm_f_bias": (c.width,), "unembedding": (c.width, c.vocab)}


# ----- the text --------------------------------------------------------------------------------------
def load_text(split: str) -> str:
    """The cleaned plays of ``split``: ``"train"`` (33 plays) or ``"valid"`` (4 unseen plays)."""
    if split not in TEXT_FILES:
        raise ValueError(f"split must be 'train' or 'valid', got {split!r}")
    path = TEXT_FILES[split]
    if not path.is_file():
        raise FileNotFoundError(f"no text at {path}: run `python scripts/prepare_shakespeare.py`")
    with gzip.open(path, "rt", encoding="ascii") as f:
        return f.read()


@dataclass(frozen=True)
class Vocabulary:
    """The model's characters in id order: ``chars[i]`` is token ``i``."""

    chars: str

    def __post_init__(self) -> None:
        if not isinstance(self.chars, str) or len(set(self.chars)) != len(self.chars) or not self.chars:
            raise ValueError("Vocabulary.chars must be a non-empty string of distinct characters")

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> NDArray[np.int64]:
        """``text`` -> ``(len(text),)`` int64 ids; a character the model never saw is refused by name."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)  # code points
        table = np.full(max(ord(max(self.chars)), int(codes.max(initial=0))) + 1, -1, dtype=np.int64)
        table[[ord(ch) for ch in self.chars]] = np.arange(len(self.chars))
        ids: NDArray[np.int64] = table[codes]
        if (ids < 0).any():
            unknown = sorted(set(text) - set(self.chars))
            raise ValueError(f"the model has no token for {''.join(unknown)!r}; it knows only {self.chars!r}")
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; an id outside ``0 .. V-1`` is refused by name."""
        values = [int(i) for i in ids]
        wrong = [i for i in values if not 0 <= i < len(self.chars)]
        if wrong:
            raise ValueError(f"character ids must be in 0 .. {len(self.chars) - 1}, got {wrong[:5]}")
        return "".join(self.chars[i] for i in values)

    @classmethod
    def from_text(cls, *texts: str) -> Vocabulary:
        """Every character that occurs in ``texts``, sorted by code point."""
        return cls("".join(sorted(set().union(*texts))))


def validation_windows(text: str, vocabulary: Vocabulary, length: int, count: int | None = None) -> NDArray[np.int64]:
    """``(N, length + 1)`` ids: consecutive non-overlapping windows of ``text`` (each window's last
    character is the next one's first, so every character but the first is predicted exactly once).
    ``count`` keeps ``N`` windows spread evenly over the text (every k-th one); ``None`` keeps all."""
    _check_vocabulary(vocabulary)
    length = check_int("length", length, low=1)
    ids = vocabulary.encode(text)
    n = (len(ids) - 1) // length
    if n < 1:
        raise ValueError(f"text must hold at least length + 1 = {length + 1} characters, got {len(ids)}")
    starts = np.arange(n) * length
    if count is not None:
        count = check_int("count", count, low=1, high=n)
        starts = starts[np.linspace(0, n - 1, count).round().astype(int)]
    return np.stack([ids[s : s + length + 1] for s in starts])


# ----- weights -----------------------------------------------------------------------------------------
def save_arrays(
    arrays: dict[str, NDArray[Any]], config: GPTConfig, vocabulary: Vocabulary, path: Path = MODEL_PATH
) -> Path:
    """Write the arrays, the config and the vocabulary to a compressed ``.npz``."""
    check_instance("config", config, GPTConfig, "a shakespeare.GPTConfig")
    _check_vocabulary(vocabulary)
    if not isinstance(arrays, dict):
        raise TypeError(f"arrays must be a dict of name -> NumPy array, got {type(arrays).__name__}")
    shapes = array_shapes(config)
    wrong = {n: arrays[n].shape for n in shapes if n in arrays and arrays[n].shape != shapes[n]}
    if set(arrays) != set(shapes) or wrong:
        raise ValueError(
            f"arrays must be exactly array_shapes(config); missing {sorted(set(shapes) - set(arrays))}, wrong {wrong}"
        )
    meta = json.dumps({"config": asdict(config), "vocabulary": vocabulary.chars})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    contents: dict[str, Any] = {"meta": np.array(meta), **arrays}
    np.savez_compressed(path, **contents)
    return path


def load_arrays(path: Path | str = MODEL_PATH) -> tuple[dict[str, NDArray[np.float32]], GPTConfig, Vocabulary]:
    """The arrays, config and vocabulary of a weights file written by `save_arrays`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model weights at {path}: run `python scripts/train_shakespeare.py`")
    stored = load_npz(path, "a Shakespeare model weights file (a .npz written by shakespeare.save_arrays)")
    if "meta" not in stored:
        raise ValueError(f"{path} is not a Shakespeare model weights file: it has no 'meta'")
    meta = json.loads(str(stored["meta"]))
    known = {f.name for f in fields(GPTConfig)}
    config = GPTConfig(**{k: v for k, v in meta["config"].items() if k in known})
    shapes = array_shapes(config)
    for name, shape in shapes.items():
        if name not in stored or stored[name].shape != shape:
            got = stored[name].shape if name in stored else "missing"
            raise ValueError(f"{name} in {path}: expected shape {shape} for {config}, got {got}")
    return {name: stored[name] for name in shapes}, config, Vocabulary(meta["vocabulary"])


# ----- checks shared with the PyTorch model ------------------------------------------------------------
def check_tokens(tokens: Any, config: GPTConfig) -> None:
    """``tokens``: integer ids ``(B, T)`` with ``1 <= T <= T_max`` and every id in ``0 .. V-1``."""
    if not isinstance(tokens, np.ndarray) or tokens.ndim != 2 or tokens.dtype.kind not in "iu":
        got = f"{type(tokens).__name__} {getattr(tokens, 'dtype', '')} {getattr(tokens, 'shape', '')}".rstrip()
        raise TypeError(
            f"tokens must be an integer NumPy array (B, T) of character ids, got {got}; "
            "use vocabulary.encode(text)[None]"
        )
    if not 1 <= tokens.shape[1] <= config.context:
        raise ValueError(
            f"tokens must hold 1 to T_max = {config.context} characters per row (the model learned {config.context} "
            f"positions), got T = {tokens.shape[1]}"
        )
    if tokens.size and not 0 <= tokens.min() <= tokens.max() < config.vocab:
        raise ValueError(f"token ids must be in 0 .. {config.vocab - 1}, got {tokens.min()} .. {tokens.max()}")


def check_ablate(ablate: Any, config: GPTConfig) -> set[tuple[int, int]]:
    """``ablate`` as a set of ``(layer, head)`` int pairs; a pair ``(layer, None)`` stands for every
    head of that layer (the whole attention sub-layer writes nothing)."""
    example = "e.g. [(0, 1)] for layer 0, head 1, [(2, None)] for all of layer 2's heads, or [] for none"
    if isinstance(ablate, (str, bytes)) or not isinstance(ablate, Iterable):
        raise TypeError(f"ablate must be a list of (layer, head) pairs, {example}; got {type(ablate).__name__}")
    pairs = list(ablate)
    if any(isinstance(item, numbers.Integral) for item in pairs):
        raise TypeError(f"ablate must be a list of (layer, head) pairs, {example}; got {ablate!r} (plain numbers)")
    off: set[tuple[int, int]] = set()
    for index, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Iterable) or len(tuple(pair)) != 2:
            raise TypeError(f"ablate[{index}] must be a (layer, head) pair, {example}; got {pair!r}")
        layer, head = tuple(pair)
        layer = check_int("ablated layer", layer, low=0, high=config.layers - 1)
        heads = range(config.heads) if head is None else [check_int("ablated head", head, low=0, high=config.heads - 1)]
        off |= {(layer, h) for h in heads}
    return off


# ----- the model in NumPy ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShakespeareBlock:
    """One pre-norm block: ``attention`` (a `gqa_numpy.GroupedQueryAttention`), LayerNorm gains and
    biases ``(D,)``, and the feed-forward ``w_in (D, F)``, ``b_in (F,)``, ``w_out (F, D)``, ``b_out (D,)``."""

    attention: GroupedQueryAttention
    norm1_gain: Array
    norm1_bias: Array
    norm2_gain: Array
    norm2_bias: Array
    w_in: Array
    b_in: Array
    w_out: Array
    b_out: Array

    def ffn(self, x: Array) -> Array:
        """The feed-forward sub-layer's write, ``(B, T, D)``, for the stream ``x`` (LN2 included)."""
        z = _layer_norm(x, self.norm2_gain, self.norm2_bias, EPS)
        out: Array = np.maximum(z @ self.w_in + self.b_in, 0) @ self.w_out + self.b_out
        return out


EPS = 1e-5  # nn.LayerNorm's default, used by every LayerNorm of the model


@dataclass(frozen=True)
class ShakespeareModel:
    """The trained model: ``config``, ``vocabulary``, ``token_embedding (V, D)``,
    ``position_embedding (T_max, D)``, ``blocks``, ``norm_f_gain, norm_f_bias (D,)``, ``unembedding (D, V)``."""

    config: GPTConfig
    vocabulary: Vocabulary
    token_embedding: Array
    position_embedding: Array
    blocks: tuple[ShakespeareBlock, ...]
    norm_f_gain: Array
    norm_f_bias: Array
    unembedding: Array

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.token_embedding.dtype

    def encode(self, text: str) -> NDArray[np.int64]:
        """``text`` -> ``(1, len(text))`` ids, ready for `run`."""
        return self.vocabulary.encode(text)[None]

    def __repr__(self) -> str:
        c = self.config
        n = sum(int(np.prod(s)) for s in array_shapes(c).values())
        return (
            f"ShakespeareModel(V={c.vocab}, T_max={c.context}, D={c.width}, h={c.heads}, h_kv={c.kv_heads}, "
            f"layers={c.layers}, F={c.hidden})  # {n:,} parameters"
        )


def load_model(path: Path | str = MODEL_PATH, dtype: Any = np.float32) -> ShakespeareModel:
    """The shipped model (or the one at ``path``) in ``dtype`` (float32, or float64 for parity checks)."""
    if dtype not in (np.float32, np.float64, "float32", "float64"):
        raise TypeError(f"dtype must be np.float32 or np.float64, got {dtype!r}")
    arrays, config, vocabulary = load_arrays(path)
    return model_from_arrays(arrays, config, vocabulary, dtype)


def check_arrays(arrays: Any, config: Any) -> None:
    """``arrays``: a dict holding every array `array_shapes` ``(config)`` names, with that shape."""
    check_instance("config", config, GPTConfig, "a shakespeare.GPTConfig, e.g. load_arrays()[1]")
    if not isinstance(arrays, dict):
        raise TypeError(f"arrays must be a dict of name -> NumPy array (load_arrays()[0]), got {type(arrays).__name__}")
    wrong = sorted(n for n, shape in array_shapes(config).items() if n not in arrays or np.shape(arrays[n]) != shape)
    if wrong:
        raise ValueError(
            f"arrays do not fit the config's sizes (see array_shapes(config)): missing or misshapen {wrong[:4]}"
        )


def model_from_arrays(
    arrays: dict[str, NDArray[Any]], config: GPTConfig, vocabulary: Vocabulary, dtype: Any = np.float32
) -> ShakespeareModel:
    """A model holding copies of ``arrays`` (named and shaped as `array_shapes` ``(config)`` lists them)
    in ``dtype``: for weights changed in memory, e.g. a multi-head model converted to fewer K/V heads."""
    if dtype not in (np.float32, np.float64, "float32", "float64"):
        raise TypeError(f"dtype must be np.float32 or np.float64, got {dtype!r}")
    check_arrays(arrays, config)
    _check_vocabulary(vocabulary)
    if len(vocabulary) != config.vocab:
        raise ValueError(f"the vocabulary has {len(vocabulary)} characters, the config V = {config.vocab}")
    c = config
    w = {name: np.asarray(arrays[name]).astype(dtype) for name in array_shapes(config)}
    blocks = tuple(
        ShakespeareBlock(
            GroupedQueryAttention.from_weights(
                w[f"block{i}_wq"], w[f"block{i}_wk"], w[f"block{i}_wv"], w[f"block{i}_wo"], c.heads, c.kv_heads
            ),
            *(
                w[f"block{i}_{name}"]
                for name in ("norm1_gain", "norm1_bias", "norm2_gain", "norm2_bias", "w_in", "b_in", "w_out", "b_out")
            ),
        )
        for i in range(c.layers)
    )
    return ShakespeareModel(
        c,
        vocabulary,
        w["token_embedding"],
        w["position_embedding"],
        blocks,
        w["norm_f_gain"],
        w["norm_f_bias"],
        w["unembedding"],
    )


def _check_model(model: Any) -> None:
    check_instance("model", model, ShakespeareModel, "the trained model from shakespeare.load_model()")


def _attention(
    block: ShakespeareBlock, z: Array, k: Array, v: Array, allowed: Any, off: list[int]
) -> tuple[Array, Array]:
    """Block's attention from normalised ``z (B, T, D)`` to cached-or-fresh ``k, v (B, h_kv, S, d_h)``,
    heads in ``off`` writing nothing: ``(output (B, T, D), weights (B, h, T, S))``."""
    a = block.attention
    q = _split_heads(z @ a.wq, a.heads)  # (B, T, D) -> (B, h, T, d_h)
    k, v = np.repeat(k, a.group_size, axis=1), np.repeat(v, a.group_size, axis=1)  # (B, h, S, d_h)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(a.head_width).astype(z.dtype)  # (B, h, T, S)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    weights = _softmax(scores, axis=-1)
    heads_out = weights @ v  # (B, h, T, d_h)
    if off:
        heads_out = heads_out.copy()
        heads_out[:, off] = 0  # an ablated head writes nothing
    return _merge_heads(heads_out) @ a.wo, weights


def run(model: ShakespeareModel, tokens: NDArray[np.integer[Any]], ablate: Any = ()) -> tuple[Array, list[Array]]:
    """Forward pass on ``tokens (B, T)``, ``T <= T_max``: ``(logits (B, T, V), weights)``, where
    ``weights[l]`` is block ``l``'s ``(B, h, T, T)``. ``ablate`` lists ``(layer, head)`` pairs whose
    heads write nothing; ``(layer, None)`` silences a layer's whole attention."""
    _check_model(model)
    check_tokens(tokens, model.config)
    off = check_ablate(ablate, model.config)
    T = tokens.shape[1]
    allowed = causal_mask(T)
    x = model.token_embedding[tokens] + model.position_embedding[:T]  # (B, T, D)
    weights = []
    for i, block in enumerate(model.blocks):
        z = _layer_norm(x, block.norm1_gain, block.norm1_bias, EPS)
        k, v = block.attention._keys_values(z)  # (B, h_kv, T, d_h)
        out, w = _attention(block, z, k, v, allowed, [h for layer, h in off if layer == i])
        x = x + out
        x = x + block.ffn(x)
        weights.append(w)
    logits: Array = _layer_norm(x, model.norm_f_gain, model.norm_f_bias, EPS) @ model.unembedding
    return logits, weights


def loss(model: ShakespeareModel, windows: NDArray[np.integer[Any]], ablate: Any = ()) -> float:
    """Mean next-character cross-entropy (nats per character) over ``windows (N, T + 1)``: the model
    reads ``windows[:, :-1]`` and is scored on ``windows[:, 1:]``."""
    _check_model(model)
    _check_ids(windows, "windows")
    if windows.shape[1] < 2:
        raise ValueError(
            f"windows must be ids (N, T + 1) with T >= 1, got {getattr(windows, 'shape', type(windows).__name__)}"
        )
    logits, _ = run(model, windows[:, :-1], ablate)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.take_along_axis(log_p, windows[:, 1:, None], axis=-1).mean())


def decode_step(model: ShakespeareModel, token: int, cache: KVCache) -> Array:
    """One step of cached decoding: the logits ``(V,)`` after ``token``, which sits at position
    ``len(cache)``. Each block computes keys and values for the new position only, appends them to
    ``cache`` (lesson 06's `kv_cache.KVCache`) and attends from the new position to all of them."""
    _check_model(model)
    check_instance("cache", cache, KVCache, f"a kv_cache.KVCache({model.config.layers})")
    if cache.layers != model.config.layers:
        raise ValueError(f"cache has {cache.layers} layers, the model {model.config.layers}")
    t = len(cache)
    if t >= model.config.context:
        raise ValueError(
            f"the cache holds {t} positions: the model has no position {t} (T_max = {model.config.context})"
        )
    if isinstance(token, bool) or not isinstance(token, numbers.Integral):
        raise TypeError(f"token must be one character id (an int), got {type(token).__name__} {token!r}")
    ids = np.array([[int(token)]])
    check_tokens(ids, model.config)
    x = model.token_embedding[ids] + model.position_embedding[t : t + 1]  # (1, 1, D)
    for i, block in enumerate(model.blocks):
        z = _layer_norm(x, block.norm1_gain, block.norm1_bias, EPS)
        k, v = cache.append(i, *block.attention._keys_values(z))  # (1, h_kv, t + 1, d_h): old and new
        out, _ = _attention(block, z, k, v, None, [])  # the new position may see every cached one
        x = x + out
        x = x + block.ffn(x)
    logits: Array = (_layer_norm(x, model.norm_f_gain, model.norm_f_bias, EPS) @ model.unembedding)[0, 0]
    return logits


def generate(
    model: ShakespeareModel, prompt: str, characters: int, temperature: float = 0.0, seed: int = 0, cached: bool = True
) -> str:
    """``prompt`` followed by ``characters`` generated ones (the total at most ``T_max``).

    ``temperature = 0``: greedy (the likeliest character each step); ``> 0``: sampled from
    ``softmax(logits / temperature)`` with a NumPy generator seeded by ``seed``. ``cached=True`` uses
    `decode_step` and a KV cache; ``False`` runs the whole text so far through `run` at every step
    (the same characters, more work)."""
    _check_model(model)
    ids = list(model.vocabulary.encode(prompt))
    characters = check_int("characters", characters, low=0)
    if not ids:
        raise ValueError("prompt must hold at least one character")
    if len(ids) + characters > model.config.context:
        raise ValueError(
            f"prompt ({len(ids)}) + characters ({characters}) must be at most T_max = {model.config.context}"
        )
    if not isinstance(temperature, numbers.Real) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0 (0: greedy), got {temperature!r}")
    rng = np.random.default_rng(seed)
    cache = KVCache(model.config.layers)
    if cached:
        for token in ids[:-1]:  # the prompt fills the cache (one position at a time here)
            decode_step(model, token, cache)
    for _ in range(characters):
        if cached:
            logits = decode_step(model, ids[-1], cache)
        else:
            logits = run(model, np.array([ids]))[0][0, -1]
        ids.append(_pick(logits, float(temperature), rng))
    return model.vocabulary.decode(ids)


def _pick(logits: Array, temperature: float, rng: np.random.Generator) -> int:
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    return int(rng.choice(len(p), p=p / p.sum()))


# ----- what the heads do: scores over real text ---------------------------------------------------------
SEPARATORS = " \n"


def _check_ids(ids: Any, name: str = "ids") -> None:
    if not isinstance(ids, np.ndarray) or ids.ndim != 2 or ids.dtype.kind not in "iu":
        got = f"{type(ids).__name__} {getattr(ids, 'dtype', '')} {getattr(ids, 'shape', '')}".rstrip()
        raise TypeError(f"{name} must be integer character ids (B, T), e.g. model.encode(text), got {got}")


def _check_vocabulary(vocabulary: Any) -> None:
    check_instance("vocabulary", vocabulary, Vocabulary, "a shakespeare.Vocabulary, e.g. model.vocabulary")


def _check_map(weights: Any) -> None:
    if not isinstance(weights, np.ndarray) or weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        got = getattr(weights, "shape", type(weights).__name__)
        raise ValueError(f"weights must be one layer's self-attention weights (B, h, T, T), got {got}")


def target_score(weights: Array, targets: NDArray[np.int64]) -> Array:
    """Per head, the mean weight each query ``t`` puts on the key ``targets[b, t]``, over the queries
    whose target is ``>= 0`` (``-1``: not scored): ``(B, h, T, T)``, ``(B, T)`` -> ``(h,)``."""
    _check_map(weights)
    B, _, T, _ = weights.shape
    if not isinstance(targets, np.ndarray) or targets.shape != (B, T):
        raise ValueError(
            f"targets must be (B, T) = {(B, T)} key positions (-1: not scored), got {getattr(targets, 'shape', None)}"
        )
    b, t = np.nonzero(targets >= 0)
    if len(b) == 0:
        raise ValueError("no query has a target (every entry of targets is -1)")
    score: Array = weights[b, :, t, targets[b, t]].mean(axis=0)  # (n, h) -> (h,)
    return score


def last_break(ids: NDArray[np.integer[Any]], vocabulary: Vocabulary) -> NDArray[np.int64]:
    """``(B, T)``: for each position, the position of the last space or newline at or before it (-1: none)."""
    _check_ids(ids)
    _check_vocabulary(vocabulary)
    breaks = np.isin(ids, vocabulary.encode(SEPARATORS))
    positions = np.where(breaks, np.arange(ids.shape[1]), -1)
    out: NDArray[np.int64] = np.maximum.accumulate(positions, axis=1)
    return out


def word_targets(ids: NDArray[np.integer[Any]], vocabulary: Vocabulary) -> dict[str, NDArray[np.int64]]:
    """Targets (for `target_score`) of the word-reading scores, on queries inside a word:

    - ``"last_break"``: the space or newline just before the query's word, for queries at least 2
      characters past it (so the target is never the previous character);
    - ``"word_start"``: the first character of the query's word, for queries at least 2 characters
      past it;
    - ``"previous"``: the previous character, for every query but the first.
    """
    _check_ids(ids)
    _check_vocabulary(vocabulary)
    B, T = ids.shape
    t = np.broadcast_to(np.arange(T), (B, T))
    sep = last_break(ids, vocabulary)
    inside = ~np.isin(ids, vocabulary.encode(SEPARATORS)) & (sep >= 0)
    return {
        "previous": np.where(t >= 1, t - 1, -1),
        "last_break": np.where(inside & (t - sep >= 2), sep, -1),
        "word_start": np.where(inside & (t - sep >= 3), sep + 1, -1),
    }


def repeat_keys(ids: NDArray[np.integer[Any]], k: int = 3) -> NDArray[np.bool_]:
    """``(B, T, T)``: ``True`` at ``[b, t, s]`` when key ``s`` follows an earlier copy of the ``k``
    characters ending at query ``t`` (``ids[s-k:s] == ids[t-k+1:t+1]``, ``s <= t``): where an
    induction head looks, on real text."""
    _check_ids(ids)
    k = check_int("k", k, low=1)
    B, T = ids.shape
    match = np.ones((B, T, T), dtype=bool)
    for j in range(k):  # query character t - j against key-side character s - 1 - j
        q = np.full((B, T), -1, dtype=np.int64)
        q[:, j:] = ids[:, : T - j] if j else ids
        key = np.full((B, T), -2, dtype=np.int64)
        key[:, 1 + j :] = ids[:, : T - 1 - j]
        match &= q[:, :, None] == key[:, None, :]
    out: NDArray[np.bool_] = match & np.tril(np.ones((T, T), dtype=bool))
    return out


def repeat_score(weights: Array, keys: NDArray[np.bool_]) -> tuple[Array, float]:
    """Per head, the mean total weight on the ``keys (B, T, T)`` of `repeat_keys`, over the queries
    that have at least one, and what a head spreading its weight evenly would get: ``((h,), chance)``."""
    _check_map(weights)
    B, _, T, _ = weights.shape
    if not isinstance(keys, np.ndarray) or keys.dtype != bool or keys.shape != (B, T, T):
        got = f"{getattr(keys, 'dtype', type(keys).__name__)} {getattr(keys, 'shape', '')}".rstrip()
        raise ValueError(f"keys must be a bool (B, T, T) = {(B, T, T)} array from repeat_keys(ids), got {got}")
    has = keys.any(axis=-1)  # (B, T)
    if not has.any():
        raise ValueError("no query has an earlier copy of its context: use longer or more windows")
    total = (weights * keys[:, None]).sum(axis=-1)  # (B, h, T)
    score: Array = total.transpose(0, 2, 1)[has].mean(axis=0)  # (h,)
    chance = float((keys.sum(axis=-1) / (np.arange(T) + 1))[has].mean())
    return score, chance


def random_repeat(vocabulary: Vocabulary, half: int, batch: int, seed: int = 0) -> NDArray[np.int64]:
    """``(B, 2L)`` ids: ``L`` random lower-case letters and spaces, then the same ``L`` again (text
    no play holds, so only copying from the first half can predict the second)."""
    _check_vocabulary(vocabulary)
    half, batch = check_int("half", half, low=2), check_int("batch", batch)
    alphabet = vocabulary.encode("abcdefghijklmnopqrstuvwxyz ")
    first = np.random.default_rng(seed).choice(alphabet, size=(batch, half))
    return np.concatenate([first, first], axis=1)


def ov_circuit(model: ShakespeareModel, layer: int, head: int) -> Array:
    """``(V, V)``: ``E @ Wv_head @ Wo_head @ U``, the direct path from a character a head attends to
    to the logits it raises (LayerNorms and other layers left out, as in lesson 09)."""
    _check_model(model)
    layer = check_int("layer", layer, low=0, high=model.config.layers - 1)
    head = check_int("head", head, low=0, high=model.config.heads - 1)
    a = model.blocks[layer].attention
    d = a.head_width
    kv = (head // a.group_size) * d  # the key/value head this query head reads
    ov = a.wv[:, kv : kv + d] @ a.wo[head * d : (head + 1) * d]  # (D, D)
    circuit: Array = model.token_embedding @ ov @ model.unembedding
    return circuit


def copying_scores(model: ShakespeareModel) -> dict[str, Array]:
    """Lesson 09's two copying readings of every head's `ov_circuit`, each ``(layers, h)``:
    ``"eigenvalue"`` (sum of eigenvalues / sum of their sizes, in [-1, 1]) and ``"top_token"`` (the
    share of characters whose own logit is the one the head raises most)."""
    _check_model(model)
    c = model.config
    eigen, top = np.zeros((c.layers, c.heads)), np.zeros((c.layers, c.heads))
    for i in range(c.layers):
        for j in range(c.heads):
            m = ov_circuit(model, i, j).astype(np.float64)
            values = np.linalg.eigvals(m)
            eigen[i, j] = values.sum().real / np.abs(values).sum()
            top[i, j] = np.mean(m.argmax(axis=1) == np.arange(c.vocab))
    return {"eigenvalue": eigen, "top_token": top}


def head_scores(
    model: ShakespeareModel, windows: NDArray[np.integer[Any]], half: int = 64, k: int = 3
) -> dict[str, Any]:
    """Every head's scores, each ``(layers, h)``: on ``windows (N, T + 1)`` of real text (the model
    reads ``windows[:, :-1]``) ``"previous"``, ``"last_break"``, ``"word_start"`` (see `word_targets`),
    ``"repeat"`` (see `repeat_score`, with ``k``); on `random_repeat` strings of ``2 * half``
    characters ``"induction"`` (weight on ``t - L + 1`` over the repeated half); and the two copying
    scores. ``"chance"`` holds what an evenly spread head gets on each attention score."""
    _check_model(model)
    _check_ids(windows, "windows")
    if windows.shape[1] < 8:
        raise ValueError(f"windows must hold at least 8 characters each (N, T + 1), got {windows.shape}")
    ids = windows[:, :-1]
    _, weights = run(model, ids)
    targets = word_targets(ids, model.vocabulary)
    keys = repeat_keys(ids, k)
    rand = random_repeat(model.vocabulary, half, 16)[:, :-1]
    _, rand_weights = run(model, rand)
    L, T = half, ids.shape[1]
    even = np.broadcast_to(np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None], (1, 1, T, T))
    out: dict[str, Any] = {name: np.stack([target_score(w, targets[name]) for w in weights]) for name in targets}
    out["repeat"] = np.stack([repeat_score(w, keys)[0] for w in weights])
    t = np.arange(L, 2 * L - 1)
    out["induction"] = np.stack([w[:, :, t, t - L + 1].mean(axis=(0, 2)) for w in rand_weights])
    out |= copying_scores(model)
    chance = {
        name: float(target_score(np.broadcast_to(even, (ids.shape[0], 1, T, T)), targets[name])[0]) for name in targets
    }
    chance["repeat"] = repeat_score(np.broadcast_to(even, (ids.shape[0], 1, T, T)), keys)[1]
    chance["induction"] = float(np.mean(1 / (t + 1)))
    out["chance"] = chance
    return out
