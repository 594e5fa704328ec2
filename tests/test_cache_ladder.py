"""The cache-versus-quality ladder (``scripts/cache_ladder.py``, ``lessons_lib/data/shakespeare_ladder.json``).

The conversions are checked on the shipped weights (a latent of full rank is the model itself; the
trainable latent writes the same arrays as the NumPy conversion; the fast attention path is the same
function), the stored file is checked for its arithmetic and for the direction of every finding the
lessons quote, and a few steps of each of the script's three commands are rerun to repeat the stored
first training losses.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from lessons_lib import cache_ladder as cl
from lessons_lib import shakespeare as sh

torch = pytest.importorskip("torch")
from lessons_lib.shakespeare_torch import CharGPT, latent_kv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LADDER = cl.load_ladder()
FIGURES = json.loads(sh.FIGURES_PATH.read_text())
PASSAGE = "Ber.\nWho's there?\n\nFran.\nNay, answer me. Stand and unfold yourself.\n"


def load_script() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("cache_ladder_script", ROOT / "scripts" / "cache_ladder.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ids_of(text: str) -> Any:
    _, _, vocabulary = sh.load_arrays()
    return torch.from_numpy(vocabulary.encode(text)[None])


# ----- the conversions -------------------------------------------------------------------------------
def test_the_fast_attention_path_is_the_same_function() -> None:
    arrays, config, _ = sh.load_arrays()
    model = CharGPT.from_arrays(arrays, config, torch.float64)
    ids = ids_of(PASSAGE)
    slow, weights = model(ids)
    fast, none = model(ids, need_weights=False)
    assert len(weights) == config.layers and none == []
    assert torch.max(torch.abs(slow - fast)).item() < 1e-10
    off = [(0, 1), (2, 3), (3, 0)]
    slow_off, _ = model(ids, off)
    fast_off, _ = model(ids, off, need_weights=False)
    assert torch.max(torch.abs(slow_off - fast_off)).item() < 1e-10
    assert torch.max(torch.abs(slow_off - slow)).item() > 1e-3  # the ablation does change the model


def test_latent_factors_are_the_truncated_svd_split_evenly() -> None:
    rng = np.random.default_rng(5)
    wk, wv = rng.normal(size=(12, 6)), rng.normal(size=(12, 6))
    w_dkv, w_uk, w_uv = cl.latent_factors(wk, wv, 4)
    assert (w_dkv.shape, w_uk.shape, w_uv.shape) == ((12, 4), (4, 6), (4, 6))
    stacked = np.concatenate([wk, wv], axis=1)
    s = np.linalg.svd(stacked, compute_uv=False)
    error = np.linalg.norm(stacked - w_dkv @ np.concatenate([w_uk, w_uv], axis=1))
    assert error == pytest.approx(np.sqrt((s[4:] ** 2).sum()))  # Eckart-Young: the best rank-4 error
    up = np.concatenate([w_uk, w_uv], axis=1)
    assert np.linalg.norm(w_dkv, axis=0) == pytest.approx(np.linalg.norm(up, axis=1))  # sqrt(S) on each side


def test_a_latent_of_full_rank_is_the_model_itself() -> None:
    arrays, config, _ = sh.load_arrays()
    ids = ids_of(PASSAGE)
    exact, _ = CharGPT.from_arrays(arrays, config, torch.float64)(ids)
    full = latent_kv(CharGPT.from_arrays(arrays, config, torch.float64), config.width)
    rebuilt, _ = full(ids)
    assert torch.max(torch.abs(rebuilt - exact)).item() < 1e-9


def test_the_trainable_latent_writes_the_numpy_conversion_and_shares_one_down_projection() -> None:
    arrays, config, vocabulary = sh.load_arrays()
    model = latent_kv(CharGPT.from_arrays(arrays, config), 16)
    attention = model.blocks[2].attention
    assert next(attention.wk.children()) is next(attention.wv.children())  # one latent, read by keys and values
    D, kv, d_c = config.width, config.kv_heads * config.head_width, 16
    dense = sum(p.numel() for p in CharGPT.from_arrays(arrays, config).parameters())
    assert sum(p.numel() for p in model.parameters()) == dense - config.layers * (2 * D * kv - D * d_c - 2 * d_c * kv)
    written = model.arrays()
    expected = cl.latent_arrays(arrays, config, 16)
    for name in ("block0_wk", "block3_wv"):
        assert np.abs(written[name] - expected[name]).max() < 1e-5
    ids = vocabulary.encode(PASSAGE)[None]
    numpy_logits, _ = sh.run(sh.model_from_arrays(written, config, vocabulary), ids)
    torch_logits, _ = model(torch.from_numpy(ids))
    assert np.abs(numpy_logits - torch_logits.detach().numpy()).max() < 1e-3  # float32


# ----- the stored ladder ------------------------------------------------------------------------------
def test_the_stored_uptraining_rows_count_their_cache_and_start_from_the_shipped_model() -> None:
    _, config, _ = sh.load_arrays()
    rows = LADDER["uptrained"]["rows"]
    assert sorted(rows) == sorted(["h_kv = 4", "h_kv = 2", "h_kv = 1", "d_c = 64", "d_c = 32", "d_c = 16"])
    assert LADDER["uptrained"]["about"]["steps"] == round(0.05 * FIGURES["config"]["steps"])
    for name, row in rows.items():
        key, value = name.split(" = ")
        numbers = 2 * int(value) * config.head_width if key == "h_kv" else int(value)
        assert row["cached_numbers_per_token_per_layer"] == numbers
        assert row["cache_bytes_per_token"] == numbers * config.layers * 2
        assert [run["learning_rate"] for run in row["uptrained"]] == [1e-3, 3e-3]
    assert rows["h_kv = 4"]["loss_converted"] == pytest.approx(FIGURES["validation_loss"], abs=2e-4)


def test_the_stored_findings_hold_in_the_stored_numbers() -> None:
    """The directions the lessons state: every conversion costs, 225 steps win most of it back, a smaller
    latent costs more, and at 64 numbers a token the latent conversion costs far less than MQA's pooling."""
    rows = LADDER["uptrained"]["rows"]
    mha = rows["h_kv = 4"]["loss_converted"]
    for name, row in rows.items():
        best = min(run["validation_loss"] for run in row["uptrained"])
        if name != "h_kv = 4":
            assert row["loss_converted"] > mha and best < row["loss_converted"], name
    latent = [rows[f"d_c = {n}"]["loss_converted"] for n in (64, 32, 16)]
    assert latent == sorted(latent)
    assert rows["d_c = 64"]["loss_converted"] - mha < 0.1 < rows["h_kv = 1"]["loss_converted"] - mha
    scratch = LADDER["scratch"]["rows"]
    assert sorted(scratch) == sorted(["h_kv = 2", "h_kv = 1", "d_c = 64"])
    for name, row in scratch.items():
        assert row["steps"] == FIGURES["config"]["steps"] + LADDER["uptrained"]["about"]["steps"]
        assert row["cache_bytes_per_token"] == rows[name]["cache_bytes_per_token"]
        assert 1.4 < row["validation_loss"] < FIGURES["baselines"]["bigram"]


def test_the_stored_head_count_sweep_has_every_run() -> None:
    sweep = LADDER["head_counts"]
    rows = sweep["rows"]
    assert sorted(rows) == sorted(f"h = {h}, seed {s}" for h in (1, 2, 4, 8, 16) for s in (0, 1, 2))
    for row in rows.values():
        assert np.shape(row["head_costs"]) == (4, row["heads"]) and row["head_width"] * row["heads"] == 128
        assert 1.4 < row["validation_loss"] < FIGURES["baselines"]["bigram"]
    assert sweep["about"]["steps"] == load_script().SWEEP_STEPS  # the file was written by the script as it is


# ----- a few steps of each command again -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "name"), [("uptrain", "h_kv = 1"), ("scratch", "d_c = 64"), ("heads", "h = 16, seed 0")]
)
def test_a_few_steps_of_each_command_repeat_the_stored_first_losses(command: str, name: str) -> None:
    script = load_script()
    _, _, vocabulary = sh.load_arrays()
    steps = 3
    if command == "uptrain":
        model, config = script.converted(name)
        stored = LADDER["uptrained"]["rows"][name]["uptrained"][0]["first_losses"]
    elif command == "scratch":
        model, config = script.from_scratch(name)
        stored = LADDER["scratch"]["rows"][name]["first_losses"]
    else:
        model, config = script.with_heads(16, 0)
        stored = LADDER["head_counts"]["rows"][name]["first_losses"]
    from dataclasses import replace

    # The first steps of the run: all inside its warm-up, whose rates do not depend on the run's length.
    assert steps < config.warmup
    record, _ = script.train(
        replace(config, steps=steps), vocabulary, log_every=0, eval_every=0, threads=1, model=model, fast=True
    )
    assert record["first_losses"] == pytest.approx(stored[:steps], abs=2e-3)


def test_the_head_count_findings_the_lessons_state_hold() -> None:
    """Lesson 10 (and 02, 05) say: the lowest loss is not at the most heads, one head is not best either,
    and most width-8 heads are idle (zeroing one moves the loss by under 0.01 nats), far more than at 32."""
    rows = list(LADDER["head_counts"]["rows"].values())
    counts = (1, 2, 4, 8, 16)
    mean = {h: np.mean([r["validation_loss"] for r in rows if r["heads"] == h]) for h in counts}
    idle = {h: np.mean([(np.array(r["head_costs"]) < 0.01).mean() for r in rows if r["heads"] == h]) for h in counts}
    best = min(mean, key=lambda h: mean[h])
    assert best not in (1, 16) and mean[16] > mean[best] and mean[1] > mean[best]
    assert idle[16] > 0.5 > idle[4] and idle[1] == 0
