"""The first rung of the cache-versus-quality ladder (``scripts/convert_shakespeare.py``): lesson 10's
model with a smaller KV cache and no training, by pooling K/V heads (GQA, MQA) or by a truncated SVD of
the stacked K/V projections (a latent cache). The stored numbers must be the shipped model's, the
arithmetic of the cache sizes right, and two of the stored losses must come out again when recomputed
in NumPy on the lesson's 16 windows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lessons_lib import shakespeare as sh
from lessons_lib.cache_ladder import latent_arrays, pooled_arrays

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((sh.DATA / "shakespeare_conversions.json").read_text())
ROWS = {row["name"]: row for row in STORED["variants"]}


def test_the_stored_ladder_starts_from_the_shipped_model_and_counts_its_cache() -> None:
    figures = json.loads(sh.FIGURES_PATH.read_text())
    arrays, config, _ = sh.load_arrays()
    mha = ROWS["h_kv = 4"]
    assert mha["validation_loss"] == figures["ablation"]["loss"] and STORED["windows"] == figures["ablation"]["windows"]
    assert mha["sample_loss"] == figures["sample"]["loss"]
    assert sorted(ROWS) == sorted([f"h_kv = {n}" for n in (4, 2, 1)] + [f"d_c = {n}" for n in (128, 96, 64, 32, 16)])
    for row in STORED["variants"]:
        per_layer = 2 * row["size"] * config.head_width if row["name"].startswith("h_kv") else row["size"]
        assert row["cached_numbers_per_token_per_layer"] == per_layer
        assert row["cache_bytes_per_token"] == per_layer * config.layers * STORED["bytes_per_number"]
        assert row["loss_added"] == pytest.approx(row["validation_loss"] - mha["validation_loss"], abs=1e-4)
    # [W_k | W_v] is (D, 2 D): rank <= D, so a latent of D numbers loses nothing (to float32 rounding)
    assert ROWS["d_c = 128"]["validation_loss"] == pytest.approx(mha["validation_loss"], abs=2e-4)
    latent_losses = [ROWS[f"d_c = {n}"]["validation_loss"] for n in (128, 96, 64, 32, 16)]
    assert latent_losses == sorted(latent_losses)  # a smaller latent never did better here
    assert ROWS["h_kv = 1"]["validation_loss"] > ROWS["h_kv = 2"]["validation_loss"] > mha["validation_loss"]
    assert arrays["block0_wk"].shape == (config.width, config.kv_heads * config.head_width)


def test_a_full_rank_latent_gives_the_models_own_logits() -> None:
    arrays, config, vocabulary = sh.load_arrays()
    ids = vocabulary.encode("Hor.\nWhat art thou that usurp'st this time of night,\n")[None]
    exact, _ = sh.run(sh.model_from_arrays(arrays, config, vocabulary), ids)
    rebuilt, _ = sh.run(sh.model_from_arrays(latent_arrays(arrays, config, config.width), config, vocabulary), ids)
    assert np.abs(rebuilt - exact).max() < 1e-3
    cut, _ = sh.run(sh.model_from_arrays(latent_arrays(arrays, config, 16), config, vocabulary), ids)
    assert np.abs(cut - exact).max() > 0.1  # a rank-16 latent does change the model


@pytest.mark.parametrize("name", ["h_kv = 1", "d_c = 64"])
def test_two_stored_losses_come_out_again(name: str) -> None:
    arrays, config, vocabulary = sh.load_arrays()
    if name.startswith("h_kv"):
        new, cfg = pooled_arrays(arrays, config, 1)
        assert cfg.kv_heads == 1 and new["block2_wv"].shape == (config.width, config.head_width)
    else:
        new, cfg = latent_arrays(arrays, config, 64), config
    windows = sh.validation_windows(sh.load_text("valid"), vocabulary, config.context, STORED["sample_windows"])
    assert sh.loss(sh.model_from_arrays(new, cfg, vocabulary), windows) == pytest.approx(
        ROWS[name]["sample_loss"], abs=2e-4
    )
