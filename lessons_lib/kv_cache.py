"""The KV cache: how many bytes decoding keeps for every earlier token (lesson 05).

Notation (see SYLLABUS.md): ``h`` query heads, ``h_kv`` key/value heads, ``g = h / h_kv`` query
heads per key/value head, ``d_h`` head width.

Pure Python (no NumPy), so a memory calculator never pays for importing an array library.
`MODELS` holds the attention sizes of a few released models, each read from the model's official
``config.json`` on the Hugging Face hub (the URL is kept in ``source``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lessons_lib.validation import check_int, check_positive_int, divisors

__all__ = [
    "MODELS",
    "ModelPreset",
    "attention_kind",
    "cache_bytes",
    "cache_per_token",
    "check_kv_heads",
    "format_bytes",
    "kv_cache_bytes",
    "kv_head_options",
    "ladder",
]


def kv_cache_bytes(
    layers: int,
    kv_heads: int,
    head_dim: int,
    tokens: int = 1,
    batch: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes of cached keys and values: ``2 (K and V) x layers x h_kv x d_h x tokens x batch x bytes``.

    ``bytes_per_element`` is 2 for float16/bfloat16, 4 for float32, 1 for an 8-bit cache.
    """
    sizes = {
        "layers": layers,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "tokens": tokens,
        "batch": batch,
        "bytes_per_element": bytes_per_element,
    }
    for name, value in sizes.items():
        check_positive_int(name, value)
    return 2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_element


def kv_head_options(heads: int) -> list[int]:
    """Every valid ``h_kv`` for ``h`` query heads: the positive divisors of ``h``, smallest first."""
    check_int("heads", heads)
    if heads <= 0:
        raise ValueError(f"heads (h) must be positive, got heads={heads}")
    return divisors(heads)


def check_kv_heads(heads: int, kv_heads: int) -> None:
    """``ValueError`` unless ``kv_heads`` (h_kv) is a positive divisor of ``heads`` (h).

    Every key/value head must serve the same number ``g = h / h_kv`` of query heads.
    """
    options = kv_head_options(heads)
    check_int("kv_heads", kv_heads)
    if kv_heads not in options:
        raise ValueError(
            f"kv_heads h_kv={kv_heads} must be a positive divisor of heads h={heads}, so that each "
            f"key/value head serves the same number g = h / h_kv of query heads. "
            f"Valid choices for h={heads}: {options}"
        )


def attention_kind(heads: int, kv_heads: int) -> str:
    """``"MHA"`` if ``h_kv == h``, ``"MQA"`` if ``h_kv == 1``, otherwise ``"GQA"``."""
    check_kv_heads(heads, kv_heads)
    if kv_heads == heads:
        return "MHA"
    return "MQA" if kv_heads == 1 else "GQA"


@dataclass(frozen=True)
class ModelPreset:
    """The attention sizes of one released model, copied from its official ``config.json``.

    ``layers`` = ``num_hidden_layers``, ``hidden_size`` = D, ``heads`` = ``num_attention_heads``
    (h), ``kv_heads`` = ``num_key_value_heads`` (h_kv); ``source`` is the config file's URL.
    """

    name: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    source: str

    def __post_init__(self) -> None:
        if self.hidden_size % self.heads != 0:
            raise ValueError(
                f"{self.name}: hidden_size {self.hidden_size} is not divisible by heads {self.heads}"
            )
        check_kv_heads(self.heads, self.kv_heads)

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
        ModelPreset("Mistral 7B", 32, 4096, 32, 8, _hub("mistralai/Mistral-7B-v0.1")),
    )
}


def cache_per_token(preset: ModelPreset, kv_heads: int | None = None, bytes_per_element: int = 2) -> int:
    """Bytes one token adds to ``preset``'s cache (all layers, K and V).

    ``kv_heads`` replaces the model's own ``h_kv`` (``None`` keeps it); ``kv_heads=preset.heads``
    gives the MHA-equivalent: what the cache would take if every query head had its own K and V.
    """
    return cache_bytes(preset, tokens=1, kv_heads=kv_heads, bytes_per_element=bytes_per_element)


def cache_bytes(
    preset: ModelPreset,
    tokens: int,
    batch: int = 1,
    kv_heads: int | None = None,
    bytes_per_element: int = 2,
) -> int:
    """Bytes of ``preset``'s cache for ``batch`` sequences of ``tokens`` tokens each."""
    kv_heads = preset.kv_heads if kv_heads is None else kv_heads
    check_kv_heads(preset.heads, kv_heads)
    return kv_cache_bytes(preset.layers, kv_heads, preset.head_dim, tokens, batch, bytes_per_element)


def ladder(
    preset: ModelPreset,
    kv_heads: int | None = None,
    tokens: int = 1,
    batch: int = 1,
    bytes_per_element: int = 2,
) -> list[tuple[str, int, int]]:
    """Three rows ``(label, h_kv, bytes)``: MHA (``h_kv = h``), the chosen ``h_kv``, MQA (``h_kv = 1``).

    ``kv_heads`` defaults to the model's own. The label of the middle row names its kind.
    """
    chosen = preset.kv_heads if kv_heads is None else kv_heads
    check_kv_heads(preset.heads, chosen)
    rows = [("MHA", preset.heads), (f"chosen ({attention_kind(preset.heads, chosen)})", chosen), ("MQA", 1)]
    return [
        (label, n, cache_bytes(preset, tokens, batch, kv_heads=n, bytes_per_element=bytes_per_element))
        for label, n in rows
    ]


def format_bytes(n: int) -> str:
    """Binary units with up to three decimals: ``524288 -> '512 KiB'``, ``2**31 -> '2 GiB'``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int number of bytes, got {n!r}")
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.3f}".rstrip("0").rstrip(".") + f" {unit}"
        value /= 1024
    raise AssertionError("unreachable")
