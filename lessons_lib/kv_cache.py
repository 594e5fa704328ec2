"""The KV cache (lesson 06): its size in bytes, real models' sizes, and decoding with a real cache.

Notation (see SYLLABUS.md): ``h`` query heads, ``h_kv`` key/value heads, ``g = h / h_kv`` query
heads per key/value head, ``d_h`` head width, ``B`` batch, ``T`` tokens.

- Byte maths: `kv_cache_bytes`, `cached_tokens`, `attention_kind`, `kv_head_options`, `format_bytes`.
  A **sliding window** of ``W`` tokens bounds the cache: a layer that attends only to the last
  ``W`` tokens needs to keep only those (a rolling buffer), so it caches ``min(T, W)`` tokens.
- Presets: `MODELS` holds the attention sizes of a few released models, each read from the model's
  official ``config.json`` on the Hugging Face hub (the URL is kept in ``source``); `cache_bytes`,
  `cache_per_token` and `ladder` apply the byte maths to them. Only Mistral 7B v0.1 has a window
  (``"sliding_window": 4096``); Mistral 7B v0.2 and v0.3 dropped it (``"sliding_window": null``).
- Decoding: `KVCache` keeps every earlier token's keys and values per layer; `decode_step` and
  `decode_incrementally` run a toy decoder (a stack of `gqa_numpy.GroupedQueryAttention` layers
  with residual connections, ``x <- x + layer(x)``) token by token with the cache, and
  `decode_causal` runs it over the whole sequence at once without one: the outputs agree.
- Cost of one decoding step: `decode_step_cost` counts the bytes a step reads from the cache and the
  multiply-adds of its attention (``StepCost``); `attention_multiply_adds` counts the latter from
  the arrays a layer really multiplies; `time_decode_step` measures one step of a stack, with the
  cache or recomputing every earlier token without it (shortest of several runs, in seconds).
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.gqa_numpy import GroupedQueryAttention
from lessons_lib.mha_numpy import causal_mask
from lessons_lib.validation import (
    check_array,
    check_finite,
    check_instance,
    check_int,
    check_size,
    divisor_options,
    group_size,
    head_width,
)

Array = NDArray[np.floating[Any]]

__all__ = [
    "MODELS",
    "KVCache",
    "ModelPreset",
    "StepCost",
    "attention_kind",
    "attention_multiply_adds",
    "cache_bytes",
    "cache_per_token",
    "cached_tokens",
    "decode_causal",
    "decode_incrementally",
    "decode_step",
    "decode_step_cost",
    "format_bytes",
    "kv_cache_bytes",
    "kv_head_options",
    "ladder",
    "time_decode_step",
]


# ----- byte maths ----------------------------------------------------------------------------
def cached_tokens(tokens: int, window: int | None = None) -> int:
    """Tokens a sequence keeps in the cache after ``tokens`` tokens: ``min(T, W)``, or ``T`` if no window.

    With a sliding window of ``W`` tokens every layer attends to the last ``W`` tokens only, so a
    rolling buffer of ``W`` slots is enough: token ``t`` overwrites token ``t - W``.
    """
    tokens = check_int("tokens", tokens)
    return tokens if window is None else min(tokens, _check_window("window", window))


def _check_window(name: str, window: Any) -> int:
    """A sliding-window length: a positive int (``None``, no window, is handled by the caller)."""
    if isinstance(window, bool) or not isinstance(window, numbers.Integral):
        raise TypeError(
            f"{name} must be a positive int (the window length W in tokens) or None for no window, "
            f"got {type(window).__name__} {window!r}"
        )
    return check_int(name, window, symbol="W")


def kv_cache_bytes(
    layers: int, kv_heads: int, head_dim: int, tokens: int = 1, batch: int = 1, bytes_per_element: int = 2,
    window: int | None = None,
) -> int:
    """Bytes of cached keys and values: ``2 (K and V) x layers x h_kv x d_h x tokens x batch x bytes``.

    ``bytes_per_element`` is 2 for float16/bfloat16, 4 for float32, 1 for an 8-bit cache.
    ``window`` is a sliding-window length ``W`` (a positive int; ``None``: no window): only
    ``min(tokens, W)`` tokens per sequence are kept, see `cached_tokens`. Exact for any integer type
    (NumPy integers are converted to Python ints first, so nothing overflows).
    """
    sizes = dict(layers=layers, kv_heads=kv_heads, head_dim=head_dim, tokens=tokens, batch=batch,
                 bytes_per_element=bytes_per_element)
    checked = {name: check_int(name, value) for name, value in sizes.items()}
    checked["tokens"] = cached_tokens(checked["tokens"], window)
    return 2 * math.prod(checked.values())


def kv_head_options(heads: int) -> list[int]:
    """The valid ``h_kv`` for ``h`` query heads, smallest first: the positive divisors of ``h``.

    A widget's choices, so the list stops after a few: every divisor when there are at most 16 (as
    for every ``h`` in `MODELS`), else the 15 smallest and ``h`` itself. ``h`` is at most 2**40.
    """
    return divisor_options(check_size("heads", heads, symbol="h"))


def attention_kind(heads: int, kv_heads: int) -> str:
    """``"MHA"`` if ``h_kv == h``, ``"MQA"`` if ``h_kv == 1``, otherwise ``"GQA"``."""
    g = group_size(heads, kv_heads)
    return "MHA" if g == 1 else "MQA" if kv_heads == 1 else "GQA"


def format_bytes(n: int) -> str:
    """Binary units with up to three decimals: ``524288 -> '512 KiB'``, ``2**31 -> '2 GiB'``."""
    value = float(check_int("n", n, low=0))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.3f}".rstrip("0").rstrip(".") + f" {unit}"
        value /= 1024
    raise AssertionError("unreachable")


# ----- presets -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelPreset:
    """The attention sizes of one released model, copied from its official ``config.json``.

    ``layers`` = ``num_hidden_layers``, ``hidden_size`` = D, ``heads`` = ``num_attention_heads``
    (h), ``kv_heads`` = ``num_key_value_heads`` (h_kv); ``source`` is the config file's URL;
    ``sliding_window`` = ``sliding_window`` (W, a positive int; ``None`` when the model attends to
    every earlier token, as the config's ``null`` or a missing key says).
    """

    name: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    source: str
    sliding_window: int | None = None

    def __post_init__(self) -> None:
        check_int("layers", self.layers)
        head_width(self.hidden_size, self.heads)
        group_size(self.heads, self.kv_heads)
        if self.sliding_window is not None:
            _check_window("sliding_window", self.sliding_window)

    @property
    def head_dim(self) -> int:
        """``d_h = hidden_size / num_attention_heads``."""
        return self.hidden_size // self.heads

    @property
    def group_size(self) -> int:
        """``g = h / h_kv``: query heads that share one key/value head."""
        return self.heads // self.kv_heads

    @property
    def kind(self) -> str:
        return attention_kind(self.heads, self.kv_heads)


def _hub(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


MODELS: dict[str, ModelPreset] = {
    preset.name: preset
    for preset in (
        ModelPreset("Llama 2 7B", 32, 4096, 32, 32, _hub("meta-llama/Llama-2-7b-hf")),
        ModelPreset("Llama 2 13B", 40, 5120, 40, 40, _hub("meta-llama/Llama-2-13b-hf")),
        ModelPreset("Llama 2 70B", 80, 8192, 64, 8, _hub("meta-llama/Llama-2-70b-hf")),
        ModelPreset("Llama 3 8B", 32, 4096, 32, 8, _hub("meta-llama/Meta-Llama-3-8B")),
        ModelPreset("Llama 3 70B", 80, 8192, 64, 8, _hub("meta-llama/Meta-Llama-3-70B")),
        # v0.1: "sliding_window": 4096 (v0.2 and v0.3 set it to null: full attention, no window)
        ModelPreset("Mistral 7B v0.1", 32, 4096, 32, 8, _hub("mistralai/Mistral-7B-v0.1"), sliding_window=4096),
    )
}


def cache_bytes(
    preset: ModelPreset, tokens: int, batch: int = 1, kv_heads: int | None = None, bytes_per_element: int = 2,
    windowed: bool = True,
) -> int:
    """Bytes of ``preset``'s cache for ``batch`` sequences of ``tokens`` tokens each.

    ``kv_heads`` replaces the model's own ``h_kv`` (``None`` keeps it); ``kv_heads=preset.heads``
    gives the MHA-equivalent: what the cache would take if every query head had its own K and V.
    A preset with a ``sliding_window`` keeps at most that many tokens per sequence;
    ``windowed=False`` counts every token, as if the model had no window.
    """
    check_instance("preset", preset, ModelPreset, "a kv_cache.ModelPreset, e.g. kv_cache.MODELS['Llama 2 7B']")
    kv_heads = preset.kv_heads if kv_heads is None else kv_heads
    group_size(preset.heads, kv_heads)
    if not isinstance(windowed, bool):
        raise TypeError(f"windowed must be True or False, got {type(windowed).__name__} {windowed!r}")
    window = preset.sliding_window if windowed else None
    return kv_cache_bytes(preset.layers, kv_heads, preset.head_dim, tokens, batch, bytes_per_element, window)


def cache_per_token(preset: ModelPreset, kv_heads: int | None = None, bytes_per_element: int = 2) -> int:
    """Bytes one token adds to ``preset``'s cache (all layers, K and V); see `cache_bytes`."""
    return cache_bytes(preset, tokens=1, kv_heads=kv_heads, bytes_per_element=bytes_per_element)


def ladder(
    preset: ModelPreset, kv_heads: int | None = None, tokens: int = 1, batch: int = 1, bytes_per_element: int = 2,
    windowed: bool = True,
) -> list[tuple[str, int, int]]:
    """Three rows ``(label, h_kv, bytes)``: MHA (``h_kv = h``), the chosen ``h_kv``, MQA (``h_kv = 1``).

    ``kv_heads`` defaults to the model's own. The label of the middle row names its kind. Every row
    keeps the preset's sliding window (if any) unless ``windowed=False``; see `cache_bytes`.
    """
    check_instance("preset", preset, ModelPreset, "a kv_cache.ModelPreset, e.g. kv_cache.MODELS['Llama 2 7B']")
    chosen = preset.kv_heads if kv_heads is None else check_int("kv_heads", kv_heads, symbol="h_kv")
    rows = [("MHA", preset.heads), (f"chosen ({attention_kind(preset.heads, chosen)})", chosen), ("MQA", 1)]
    return [(label, n, cache_bytes(preset, tokens, batch, n, bytes_per_element, windowed)) for label, n in rows]


# ----- decoding with a real cache ------------------------------------------------------------
class KVCache:
    """Keys and values of every token seen so far, one pair of arrays per layer.

    ``keys[l]`` and ``values[l]`` are ``(B, h_kv, t, d_h)`` after ``t`` tokens (``None`` before
    the first). `append` adds the new tokens' K and V along the token axis.
    """

    def __init__(self, layers: int) -> None:
        layers = check_int("layers", layers)
        self.keys: list[Array | None] = [None] * layers
        self.values: list[Array | None] = [None] * layers

    @property
    def layers(self) -> int:
        return len(self.keys)

    def __len__(self) -> int:
        """Number of cached tokens ``t`` (taken from layer 0)."""
        first = self.keys[0]
        return 0 if first is None else int(first.shape[2])

    def append(self, layer: int, k: Array, v: Array) -> tuple[Array, Array]:
        """Add ``k, v (B, h_kv, t_new, d_h)`` to layer ``layer``; return the full ``(B, h_kv, t, d_h)``."""
        layer = check_int("layer", layer, low=0, high=self.layers - 1)
        check_array("k", k, "numpy", "(B, h_kv, t_new, d_h)")
        check_array("v", v, "numpy", "(B, h_kv, t_new, d_h)")
        if v.shape != k.shape:
            raise ValueError(f"k and v must have the same shape, got k {k.shape} and v {v.shape}")
        old_k, old_v = self.keys[layer], self.values[layer]
        if old_k is None or old_v is None:
            self.keys[layer], self.values[layer] = k, v
            return k, v
        if old_k.shape[:2] + old_k.shape[3:] != k.shape[:2] + k.shape[3:]:
            raise ValueError(
                f"new k {k.shape} does not fit the cache of layer {layer}, which holds "
                f"(B, h_kv, t, d_h) = {old_k.shape}: B, h_kv and d_h must match"
            )
        full_k = np.concatenate([old_k, k], axis=2)  # (B, h_kv, t + t_new, d_h)
        full_v = np.concatenate([old_v, v], axis=2)  # (B, h_kv, t + t_new, d_h)
        self.keys[layer], self.values[layer] = full_k, full_v
        return full_k, full_v

    @property
    def nbytes(self) -> int:
        """Bytes held: every layer's keys and values."""
        return sum(a.nbytes for a in (*self.keys, *self.values) if a is not None)

    def __repr__(self) -> str:
        return f"KVCache(layers={self.layers}, tokens={len(self)}, nbytes={self.nbytes})"


def _check_stack(layers: Sequence[GroupedQueryAttention], x: Array, name: str = "x") -> None:
    """``layers``: a list (or tuple) of NumPy ``GroupedQueryAttention`` layers; ``x (B, T, D)`` with ``T >= 1``."""
    _check_layers(layers)
    check_array(name, x, "numpy", "(B, T, D)")
    if x.shape[1] == 0:
        raise ValueError(f"{name} has no tokens (T=0, shape {tuple(x.shape)}); give at least one token")
    check_finite(name, x)


def _check_layers(layers: Sequence[GroupedQueryAttention]) -> None:
    """``layers``: a non-empty list (or tuple) of NumPy ``GroupedQueryAttention`` layers."""
    if isinstance(layers, GroupedQueryAttention) or not isinstance(layers, (list, tuple)):
        raise TypeError(
            f"layers must be a list of GroupedQueryAttention layers (the stack, in order), got "
            f"{type(layers).__name__}; for one layer pass [layer]"
        )
    if len(layers) == 0:
        raise ValueError("layers must hold at least one GroupedQueryAttention layer")
    for index, layer in enumerate(layers):
        if not isinstance(layer, GroupedQueryAttention):
            raise TypeError(
                f"layers[{index}] must be a gqa_numpy.GroupedQueryAttention, got {type(layer).__name__}"
            )


def decode_step(layers: Sequence[GroupedQueryAttention], x_new: Array, cache: KVCache) -> Array:
    """Run ``x_new (B, t_new, D)``, the next ``t_new`` tokens, through the stack; fill ``cache``.

    Each layer appends the new tokens' K and V to its cache entry, then the new queries attend to
    all cached tokens under a causal mask (new token ``i`` sees every earlier token and itself).
    ``t_new > 1`` processes a prompt in one go ("prefill"); ``t_new = 1`` is one decoding step.
    Returns the stack's output for the new tokens, ``(B, t_new, D)``.
    """
    _check_stack(layers, x_new, "x_new")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache (make one with KVCache(len(layers))), got {type(cache).__name__}")
    if cache.layers != len(layers):
        raise ValueError(f"cache has {cache.layers} layers but the stack has {len(layers)}")
    t_new = x_new.shape[1]
    for index, layer in enumerate(layers):
        k_new, v_new = layer.keys_values(x_new)  # (B, h_kv, t_new, d_h) each
        k, v = cache.append(index, k_new, v_new)  # (B, h_kv, t, d_h) each
        allowed = causal_mask(t_new, k.shape[2])  # (t_new, t): the new tokens are the last ones
        out, _ = layer.attend(x_new, k, v, allowed)  # (B, t_new, D)
        x_new = x_new + out  # residual connection
    return x_new


def decode_incrementally(layers: Sequence[GroupedQueryAttention], x: Array, prompt: int = 1) -> tuple[Array, KVCache]:
    """Feed ``x (B, T, D)`` through the stack: the first ``prompt`` tokens at once, then one by one.

    Returns ``(output (B, T, D), cache)``; the cache ends up holding all ``T`` tokens.
    """
    _check_stack(layers, x)
    T = x.shape[1]
    prompt = check_int("prompt", prompt, low=1, high=T)
    cache = KVCache(len(layers))
    outputs = [decode_step(layers, x[:, :prompt], cache)]
    for t in range(prompt, T):
        outputs.append(decode_step(layers, x[:, t : t + 1], cache))  # one token: (B, 1, D)
    return np.concatenate(outputs, axis=1), cache  # (B, T, D)


def decode_causal(layers: Sequence[GroupedQueryAttention], x: Array) -> Array:
    """The same stack over the whole sequence at once, with a causal mask and no cache: ``(B, T, D)``."""
    _check_stack(layers, x)
    allowed = causal_mask(x.shape[1])  # (T, T)
    for layer in layers:
        out, _ = layer(x, allowed=allowed)
        x = x + out  # residual connection
    return x


# ----- what one decoding step costs ----------------------------------------------------------
@dataclass(frozen=True)
class StepCost:
    """The attention part of one decoding step over a cache of ``T`` tokens (all layers, whole batch).

    ``bytes_read``: every cached key and value is read once, ``2 x layers x h_kv x d_h x T x B x bytes``.
    ``multiply_adds``: the new query of each of the ``h`` heads meets ``T`` keys (``q . k``, ``d_h``
    multiply-adds each) and mixes ``T`` values (``d_h`` each): ``2 x layers x h x d_h x T x B``.
    """

    bytes_read: int
    multiply_adds: int

    @property
    def multiply_adds_per_byte(self) -> float:
        """Arithmetic intensity: work done per byte fetched from memory (``g / bytes_per_element``)."""
        return self.multiply_adds / self.bytes_read


def decode_step_cost(
    layers: int, heads: int, kv_heads: int, head_dim: int, tokens: int, batch: int = 1, bytes_per_element: int = 2,
) -> StepCost:
    """Bytes read from the cache and multiply-adds of attention for one new token per sequence.

    ``tokens`` is ``T``, the number of cached tokens the new query attends to (itself included).
    The bytes scale with ``h_kv``, the multiply-adds with ``h``: fewer K/V heads read less for the
    same arithmetic. The projections (``x W_q`` ...) are left out: they do not depend on ``T``.
    """
    group_size(heads, kv_heads)
    sizes = dict(layers=layers, head_dim=head_dim, tokens=tokens, batch=batch)
    common = math.prod(check_int(name, value) for name, value in sizes.items())
    bytes_per_element = check_int("bytes_per_element", bytes_per_element)
    return StepCost(bytes_read=2 * common * kv_heads * bytes_per_element, multiply_adds=2 * common * heads)


def attention_multiply_adds(q: Array, k: Array) -> int:
    """Multiply-adds of attention from the arrays themselves: ``q (B, h, T, d_h)`` and ``k (B, h_kv, S, d_h)``.

    ``q k^T`` takes ``B x h x T x S x d_h``, the weighted sum of the values as many again. ``k`` may
    hold fewer heads than ``q`` (each of its heads then serves ``h / h_kv`` query heads).
    """
    check_array("q", q, "numpy", "(B, h, T, d_h)")
    check_array("k", k, "numpy", "(B, h_kv, S, d_h)")
    (B, heads, T, d_h), (B_k, kv_heads, S, d_k) = q.shape, k.shape
    if (B_k, d_k) != (B, d_h):
        raise ValueError(f"q {q.shape} and k {k.shape} must share B and d_h: (B, h, T, d_h) and (B, h_kv, S, d_h)")
    group_size(heads, kv_heads)
    return 2 * B * heads * T * S * d_h


def time_decode_step(
    layers: Sequence[GroupedQueryAttention], tokens: int, cached: bool, batch: int = 1, repeats: int = 5,
    seed: int = 0,
) -> float:
    """Seconds to produce the output of token ``tokens + 1`` after ``tokens`` earlier ones (shortest of ``repeats``).

    ``cached=True``: one `decode_step` of the new token against a cache already holding ``tokens``
    tokens (the cache is restored after each run, so every run does the same work).
    ``cached=False``: no cache, so the whole sequence of ``tokens + 1`` tokens goes through
    `decode_causal` again, as a decoder without a cache must at every step.
    The shortest run is the one least disturbed by other programs on the machine.
    """
    _check_layers(layers)
    tokens = check_int("tokens", tokens)
    batch = check_int("batch", batch)
    repeats = check_int("repeats", repeats)
    if not isinstance(cached, bool):
        raise TypeError(f"cached must be True or False, got {type(cached).__name__} {cached!r}")
    x = np.random.default_rng(seed).normal(size=(batch, tokens + 1, layers[0].width)).astype(layers[0].dtype)
    cache = KVCache(len(layers))
    if cached:
        decode_step(layers, x[:, :tokens], cache)  # prefill: the earlier tokens are cached
    saved = (list(cache.keys), list(cache.values))
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        if cached:
            decode_step(layers, x[:, tokens:], cache)  # one new token: (B, 1, D)
        else:
            decode_causal(layers, x)  # every token again: (B, T + 1, D)
        best = min(best, time.perf_counter() - start)
        cache.keys, cache.values = list(saved[0]), list(saved[1])  # forget the new token again
    return best
