"""Lesson 10's model: the text it was trained on, the model it claims to be, and the numbers it ships.

- The text: the shipped plays are the ones the manifest names, hash for hash, and no validation play
  is in the training text; the cleaning rule does what its docstring says.
- The model: the PyTorch model equals a second implementation written with
  ``F.scaled_dot_product_attention`` and ``nn.LayerNorm`` only (1e-6, float64, shipped weights); the
  NumPy twin the lesson runs equals the PyTorch model (ablations included); cached decoding gives the
  same logits as running the whole prefix, and cached generation the same characters as uncached.
- The numbers: the stored validation-loss sample equals the shipped weights' loss on it; the stored
  figures beat the baselines they are compared with; a short rerun of the training script repeats
  the shipped run's first training losses (the run itself, 4,500 steps, is too long for a test).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from lessons_lib import shakespeare as sh
from lessons_lib.kv_cache import KVCache

ROOT = Path(__file__).resolve().parents[1]
FIGURES = json.loads(sh.FIGURES_PATH.read_text())
PASSAGE = "HAMLET.\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def model() -> sh.ShakespeareModel:
    return sh.load_model()


@pytest.fixture(scope="module")
def model64() -> sh.ShakespeareModel:
    return sh.load_model(dtype=np.float64)


# ----- the text ----------------------------------------------------------------------------------------
def test_the_shipped_text_is_the_manifests_and_validation_plays_are_unseen() -> None:
    manifest = json.loads((sh.DATA / "shakespeare_text.json").read_text())
    splits = manifest["splits"]
    for split in ("train", "valid"):
        text = sh.load_text(split)
        assert len(text) == splits[split]["characters"]
        assert hashlib.sha256(text.encode("ascii")).hexdigest() == splits[split]["sha256"]
    assert sorted(splits["valid"]["plays"]) == ["hamlet", "macbeth", "tempest", "twelfth_night"]
    assert not set(splits["train"]["plays"]) & set(splits["valid"]["plays"])
    assert len(splits["train"]["plays"]) + len(splits["valid"]["plays"]) == 37
    share = splits["valid"]["characters"] / (splits["valid"]["characters"] + splits["train"]["characters"])
    assert 0.09 < share < 0.11
    # a line of Hamlet is in the validation text and not in the training text
    line = "To be, or not to be,--that is the question:--"
    assert line in sh.load_text("valid") and line not in sh.load_text("train")


def test_cleaning_drops_front_matter_and_cuts_blank_runs() -> None:
    prepare = load_script("prepare_shakespeare")
    raw = "A PLAY\n\nby William Shakespeare\n\n\n\nPERSONS.\nKing.  \n\n\n\nACT I.\n\nScene I.\n\n\n\nKing.\nHo!\n\n\n"
    assert prepare.clean(raw, "a_play") == "ACT I.\n\nScene I.\n\nKing.\nHo!\n\n"
    assert prepare.clean("TITLE\n\nPROLOGUE\nO for a muse\n", "x").startswith("PROLOGUE\n")
    with pytest.raises(SystemExit, match="no line opens the play"):
        prepare.clean("TITLE\nno act here\n", "x")


# ----- the model ---------------------------------------------------------------------------------------
def test_the_torch_model_equals_a_reference_written_with_sdpa_and_layernorm() -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib.shakespeare_torch import CharGPT, reference_logits

    arrays, config, vocabulary = sh.load_arrays()
    wide = {name: a.astype(np.float64) for name, a in arrays.items()}
    ids = torch.from_numpy(np.stack([vocabulary.encode(PASSAGE[:64]), vocabulary.encode(PASSAGE[20:84])]))
    ours, _ = CharGPT.from_arrays(arrays, config, torch.float64)(ids)
    reference = reference_logits(wide, config, ids)
    assert ours.shape == (2, 64, config.vocab)
    assert torch.max(torch.abs(ours - reference)).item() < 1e-6
    narrow, _ = CharGPT.from_arrays(arrays, config)(ids)  # float32, as trained
    assert torch.max(torch.abs(narrow.double() - reference)).item() < 1e-3


def test_the_numpy_twin_equals_the_torch_model_with_and_without_ablation(model64: sh.ShakespeareModel) -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib.shakespeare_torch import CharGPT

    arrays, config, _ = sh.load_arrays()
    twin = CharGPT.from_arrays(arrays, config, torch.float64)
    ids = model64.encode(PASSAGE[:48])
    for ablate in ([], [(0, 1)], [(2, None)], [(1, 0), (3, 3)]):
        logits, weights = sh.run(model64, ids, ablate)
        expected, expected_weights = twin(torch.from_numpy(ids), ablate)
        assert np.abs(logits - expected.detach().numpy()).max() < 1e-10, ablate
        for w, e in zip(weights, expected_weights, strict=True):
            assert np.abs(w - e.detach().numpy()).max() < 1e-12
    assert sh.check_ablate([(2, None)], config) == {(2, 0), (2, 1), (2, 2), (2, 3)}


def test_an_ablated_head_changes_only_what_it_writes(model64: sh.ShakespeareModel) -> None:
    ids = model64.encode(PASSAGE[:40])
    base, base_weights = sh.run(model64, ids)
    ablated, ablated_weights = sh.run(model64, ids, [(3, 2)])
    assert np.abs(ablated - base).max() > 1e-3  # the logits move
    for w, v in zip(base_weights, ablated_weights, strict=True):  # the last layer's maps do not
        assert np.array_equal(w, v)


def test_cached_decoding_equals_running_the_whole_prefix(model64: sh.ShakespeareModel) -> None:
    ids = model64.vocabulary.encode(PASSAGE[:50])
    full, _ = sh.run(model64, ids[None])
    cache = KVCache(model64.config.layers)
    steps = np.stack([sh.decode_step(model64, int(token), cache) for token in ids])
    assert len(cache) == 50 and cache.keys[0] is not None and cache.keys[0].shape == (1, 4, 50, 32)
    assert np.abs(steps - full[0]).max() < 1e-10


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_cached_generation_gives_the_same_characters_as_uncached(
    model: sh.ShakespeareModel, temperature: float
) -> None:
    prompt = "HAMLET.\n"
    cached = sh.generate(model, prompt, 40, temperature, seed=3)
    uncached = sh.generate(model, prompt, 40, temperature, seed=3, cached=False)
    assert cached == uncached and cached.startswith(prompt) and len(cached) == len(prompt) + 40


# ----- the numbers -------------------------------------------------------------------------------------
def test_the_stored_sample_loss_is_the_shipped_weights_loss(model: sh.ShakespeareModel) -> None:
    sample = FIGURES["sample"]
    windows = sh.validation_windows(sh.load_text("valid"), model.vocabulary, model.config.context, sample["windows"])
    assert windows.shape == (sample["windows"], model.config.context + 1)
    assert sh.loss(model, windows) == pytest.approx(sample["loss"], abs=2e-4)


def test_the_stored_figures_beat_their_baselines_and_are_consistent() -> None:
    base = FIGURES["baselines"]
    assert base["uniform"] == pytest.approx(math.log(83), abs=1e-4)
    assert FIGURES["validation_loss"] < base["nanogpt_baby_published"] < base["bigram"] < base["unigram"]
    assert abs(FIGURES["sample"]["loss"] - FIGURES["validation_loss"]) < 0.15  # a sample, not the whole
    ablation = FIGURES["ablation"]
    assert np.shape(ablation["heads"]) == (4, 4) and np.shape(ablation["layers"]) == (4,)
    assert min(ablation["layers"]) > 0  # silencing a whole layer's attention always hurts
    assert FIGURES["seconds"] > 0 and FIGURES["config"] == sh.load_arrays()[1].__dict__


def test_the_baselines_are_recomputed_from_the_text() -> None:
    pytest.importorskip("torch")
    from lessons_lib.shakespeare_torch import baselines

    _, _, vocabulary = sh.load_arrays()
    assert baselines(vocabulary) == FIGURES["baselines"]


def test_a_short_rerun_of_the_training_script_repeats_the_first_losses() -> None:
    pytest.importorskip("torch")
    script = load_script("train_shakespeare")
    _, shipped, vocabulary = sh.load_arrays()
    assert vocabulary == sh.Vocabulary.from_text(sh.load_text("train"), sh.load_text("valid"))
    steps = 6
    from dataclasses import replace

    # one thread (the shipped run used 2): the test command runs a worker per core and one more
    record, _ = script.train(replace(shipped, steps=steps), vocabulary, log_every=0, eval_every=0, threads=1)
    stored = FIGURES["first_losses"][:steps]
    assert record["first_losses"] == pytest.approx(stored, abs=2e-3)
    assert record["first_losses"][-1] < record["first_losses"][0] - 0.2  # the loss falls from ln V


# ----- scores on hand-made inputs ----------------------------------------------------------------------
def test_word_targets_and_repeat_keys_on_a_hand_made_text() -> None:
    vocabulary = sh.Vocabulary(" \nabcd")
    ids = vocabulary.encode("ab abc\nab")[None]  # positions 0..8
    targets = sh.word_targets(ids, vocabulary)
    assert targets["previous"][0].tolist() == [-1, 0, 1, 2, 3, 4, 5, 6, 7]
    assert targets["last_break"][0].tolist() == [-1, -1, -1, -1, 2, 2, -1, -1, 6]
    assert targets["word_start"][0].tolist() == [-1, -1, -1, -1, -1, 3, -1, -1, -1]
    keys = sh.repeat_keys(ids, k=2)  # query 4 ("ab" ends at 4) -> key 2 follows the first "ab"; query 8 -> keys 2 and 5
    assert np.argwhere(keys[0]).tolist() == [[4, 2], [8, 2], [8, 5]]


def test_even_weights_score_the_chance_level() -> None:
    T = 6
    even = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    targets = np.array([[-1, 0, 1, 2, 3, 4]])
    score = sh.target_score(np.broadcast_to(even, (1, 2, T, T)), targets)
    assert score == pytest.approx([np.mean(1 / np.arange(2, T + 1))] * 2)


# ----- bad input ---------------------------------------------------------------------------------------
def test_bad_input_is_refused_in_words(model: sh.ShakespeareModel) -> None:
    with pytest.raises(ValueError, match="no token for 'é'"):
        model.encode("café")
    with pytest.raises(ValueError, match="T_max = 256"):
        sh.run(model, np.zeros((1, 257), dtype=np.int64))
    with pytest.raises(TypeError, match="integer NumPy array"):
        sh.run(model, np.zeros((1, 4)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"ids must be in 0 \.\. 82"):
        sh.run(model, np.array([[83]]))
    with pytest.raises(TypeError, match="pairs"):
        sh.run(model, model.encode("ab"), ablate=(0, 1))
    with pytest.raises(ValueError, match="ablated head"):
        sh.run(model, model.encode("ab"), ablate=[(0, 4)])
    with pytest.raises(ValueError, match="at most T_max"):
        sh.generate(model, "a" * 250, 10)
    with pytest.raises(ValueError, match="temperature"):
        sh.generate(model, "a", 3, temperature=-1)
    with pytest.raises(ValueError, match="at least one character"):
        sh.generate(model, "", 3)
    with pytest.raises(TypeError, match="KVCache"):
        sh.decode_step(model, 0, cache=[])  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="train_shakespeare"):
        sh.load_model("/nonexistent/weights.npz")
    with pytest.raises(ValueError, match="split"):
        sh.load_text("test")
    with pytest.raises(ValueError, match=r"ids must be in 0 \.\. 82, got \[99\]"):
        model.vocabulary.decode([3, 99])
