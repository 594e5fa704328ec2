"""KV-cache sizes (lesson 06): the formula, the model presets, and their official config figures."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from lessons_lib.kv_cache import (
    MODELS,
    ModelPreset,
    attention_kind,
    cache_bytes,
    cache_per_token,
    cached_tokens,
    format_bytes,
    kv_cache_bytes,
    kv_head_options,
    ladder,
)
from lessons_lib.validation import group_size as check_kv_heads

# Copied by hand from each model's config.json (num_hidden_layers, hidden_size,
# num_attention_heads, num_key_value_heads), so a typo in MODELS shows up as a mismatch here.
CONFIGS = {
    "Llama 2 7B": ("meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32),
    "Llama 2 13B": ("meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40),
    "Llama 2 70B": ("meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8),
    "Llama 3 8B": ("meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8),
    "Llama 3 70B": ("meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8),
    "Mistral 7B v0.1": ("mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8),
}


def test_presets_match_the_config_figures() -> None:
    assert set(MODELS) == set(CONFIGS)
    for name, (repo, layers, hidden, heads, kv_heads) in CONFIGS.items():
        preset = MODELS[name]
        assert preset.name == name
        assert (preset.layers, preset.hidden_size, preset.heads, preset.kv_heads) == (layers, hidden, heads, kv_heads)
        assert preset.head_dim == hidden // heads == 128
        assert preset.source == f"https://huggingface.co/{repo}/blob/main/config.json"
        assert cache_per_token(preset) == 2 * layers * kv_heads * (hidden // heads) * 2
        assert cache_per_token(preset, kv_heads=heads) == 2 * layers * heads * (hidden // heads) * 2


def test_known_values() -> None:
    assert cache_per_token(MODELS["Llama 2 7B"]) == 524288 == 512 * 1024  # 0.5 MiB per token
    assert format_bytes(cache_per_token(MODELS["Llama 2 7B"])) == "512 KiB"
    assert cache_per_token(MODELS["Llama 3 8B"]) == 131072  # 2 * 32 * 8 * 128 * 2
    assert cache_per_token(MODELS["Llama 2 70B"]) == 327680  # 2 * 80 * 8 * 128 * 2
    assert cache_per_token(MODELS["Llama 2 70B"], kv_heads=64) == 2621440  # its MHA-equivalent, 8x
    assert cache_bytes(MODELS["Llama 2 7B"], tokens=4096) == 2 * 1024**3  # 2 GiB at 4096 tokens
    assert cache_bytes(MODELS["Llama 3 8B"], tokens=8192, batch=4, bytes_per_element=1) == 4 * 8192 * 65536


def test_kinds_match_the_syllabus() -> None:
    assert [MODELS[n].kind for n in ("Llama 2 7B", "Llama 2 13B")] == ["MHA", "MHA"]
    assert [MODELS[n].kind for n in ("Llama 2 70B", "Llama 3 8B", "Llama 3 70B", "Mistral 7B v0.1")] == ["GQA"] * 4
    assert MODELS["Llama 2 70B"].group_size == 8
    assert attention_kind(8, 1) == "MQA"


def test_presets_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODELS["Llama 3 8B"].kv_heads = 4  # type: ignore[misc]


def test_preset_validation() -> None:
    with pytest.raises(ValueError, match="not divisible"):
        ModelPreset("bad", 2, 100, 3, 1, "x")
    with pytest.raises(ValueError, match="positive divisor"):
        ModelPreset("bad", 2, 96, 12, 5, "x")


def test_kv_head_options_and_check() -> None:
    assert kv_head_options(32) == [1, 2, 4, 8, 16, 32]
    assert kv_head_options(40) == [1, 2, 4, 5, 8, 10, 20, 40]
    assert kv_head_options(1) == [1]
    check_kv_heads(12, 3)
    with pytest.raises(ValueError, match=r"Valid choices for h=12: \[1, 2, 3, 4, 6, 12\]"):
        check_kv_heads(12, 5)
    with pytest.raises(ValueError, match="heads"):
        kv_head_options(0)
    with pytest.raises(TypeError, match="heads must be an int"):
        kv_head_options(2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="kv_heads must be an int"):
        check_kv_heads(4, True)


def test_ladder_rows() -> None:
    rows = ladder(MODELS["Llama 3 70B"], tokens=8192)
    assert [(label, kv) for label, kv, _ in rows] == [("MHA", 64), ("chosen (GQA)", 8), ("MQA", 1)]
    assert rows[0][2] == 8 * rows[1][2] == 64 * rows[2][2]
    assert rows[1][2] == cache_bytes(MODELS["Llama 3 70B"], 8192)
    assert ladder(MODELS["Llama 2 7B"])[1][0] == "chosen (MHA)"
    with pytest.raises(ValueError, match="positive divisor"):
        ladder(MODELS["Llama 2 13B"], kv_heads=3)


def test_cache_bytes_errors() -> None:
    with pytest.raises(ValueError, match="tokens must be positive"):
        cache_bytes(MODELS["Mistral 7B v0.1"], tokens=0)
    with pytest.raises(TypeError, match="batch must be an int"):
        cache_bytes(MODELS["Mistral 7B v0.1"], tokens=1, batch=1.5)  # type: ignore[arg-type]


def test_kv_cache_bytes_unchanged() -> None:
    assert kv_cache_bytes(32, 32, 128) == 524288
    assert kv_cache_bytes(2, 3, 4, tokens=5, batch=6, bytes_per_element=4) == 2 * 2 * 3 * 4 * 5 * 6 * 4
    with pytest.raises(ValueError, match="layers must be positive"):
        kv_cache_bytes(0, 1, 1)
    with pytest.raises(TypeError, match="head_dim must be an int"):
        kv_cache_bytes(1, 1, True)


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (524288, "512 KiB"), (2 * 1024**3, "2 GiB"),
     (5 * 1024**4, "5 TiB")],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


def test_format_bytes_rejects_negative() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        format_bytes(-1)


def test_byte_counts_are_exact_for_numpy_integers() -> None:
    """np.int32 sizes must not overflow: the maths runs on Python ints."""
    sizes: list[Any] = [np.int32(n) for n in (80, 8, 128, 100_000, 64)]  # NumPy ints, as a config might hold
    assert kv_cache_bytes(*sizes) == 2 * 80 * 8 * 128 * 100_000 * 64 * 2 == 2_097_152_000_000
    assert format_bytes(kv_cache_bytes(np.int64(32), 8, 128)) == "128 KiB"  # type: ignore[arg-type]


# ----- sliding windows --------------------------------------------------------------------------
# "sliding_window" from each config.json: 4096 in Mistral-7B-v0.1's; the Llama configs have none.
WINDOWS = {"Mistral 7B v0.1": 4096}


def test_presets_carry_their_sliding_window() -> None:
    for name, preset in MODELS.items():
        assert preset.sliding_window == WINDOWS.get(name), name


def test_cached_tokens_is_min_of_tokens_and_window() -> None:
    assert cached_tokens(100) == 100
    assert cached_tokens(100, window=4096) == 100
    assert cached_tokens(4096, window=4096) == 4096
    assert cached_tokens(32768, window=4096) == 4096
    assert cached_tokens(np.int64(10), window=np.int32(3)) == 3  # type: ignore[arg-type]


def test_kv_cache_bytes_with_a_window() -> None:
    per_token = kv_cache_bytes(32, 8, 128)
    assert kv_cache_bytes(32, 8, 128, tokens=1000, window=4096) == 1000 * per_token
    assert kv_cache_bytes(32, 8, 128, tokens=32768, window=4096) == 4096 * per_token
    assert kv_cache_bytes(32, 8, 128, 32768, 2, 2, 4096) == 2 * 4096 * per_token  # positional, last
    # the cache stops growing at the window: equal for every T >= W
    assert len({kv_cache_bytes(2, 1, 4, tokens=t, window=16) for t in range(16, 100)}) == 1


@pytest.mark.parametrize(("window", "error", "text"), [
    (0, ValueError, r"window \(W\) must be positive, got window=0"),
    (-5, ValueError, "must be positive"),
    (4096.0, TypeError, "window must be a positive int .* or None for no window, got float"),
    (True, TypeError, "got bool True"),
    ("4096", TypeError, "got str"),
])
def test_window_validation(window: Any, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        kv_cache_bytes(1, 1, 1, tokens=10, window=window)
    with pytest.raises(error, match="sliding_window"):  # the preset names its own field
        ModelPreset("bad", 2, 96, 12, 4, "x", sliding_window=window)


def test_mistral_v01_keeps_at_most_4096_tokens() -> None:
    mistral = MODELS["Mistral 7B v0.1"]
    assert cache_bytes(mistral, 4096) == 512 * 1024**2
    assert cache_bytes(mistral, 8192) == cache_bytes(mistral, 32768) == 512 * 1024**2  # not 1 GiB, not 4 GiB
    assert cache_bytes(mistral, 8192, windowed=False) == 1024**3
    assert cache_bytes(mistral, 32768, windowed=False) == 4 * 1024**3
    assert cache_bytes(mistral, 1000) == 1000 * cache_per_token(mistral)  # below the window: every token
    assert cache_bytes(mistral, 32768, batch=4, kv_heads=32) == 4 * 4 * 512 * 1024**2  # MHA-equivalent, windowed
    llama = MODELS["Llama 3 8B"]  # same sizes, no window
    assert cache_bytes(llama, 32768) == cache_bytes(mistral, 32768, windowed=False)
    with pytest.raises(TypeError, match="windowed must be True or False"):
        cache_bytes(mistral, 10, windowed=None)  # type: ignore[arg-type]


def test_ladder_keeps_the_window() -> None:
    mistral = MODELS["Mistral 7B v0.1"]
    rows = ladder(mistral, tokens=32768)
    assert [n for _, _, n in rows] == [cache_bytes(mistral, 4096, kv_heads=k) for k in (32, 8, 1)]
    full = ladder(mistral, tokens=32768, windowed=False)
    assert [n for _, _, n in full] == [8 * n for _, _, n in rows]


def test_presets_built_positionally_still_work() -> None:
    """Lesson 07 and older code build presets without the new field: no window by default."""
    preset = ModelPreset("toy", 2, 64, 8, 2, "x")
    assert preset.sliding_window is None
    assert cache_bytes(preset, 100) == kv_cache_bytes(2, 2, 8, tokens=100)
