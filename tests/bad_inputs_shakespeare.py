# ruff: noqa: E501
# mypy: disable-error-code="arg-type"
# (the rows pass wrong types on purpose, and quote long messages whole)
"""Bad-input rows for lesson 10's model (`lessons_lib.shakespeare`, `lessons_lib.shakespeare_torch`),
added to the table of `tests/test_bad_inputs.py`, which turns each into a ``Bad`` row. Each row: the
public name, an id, a call, the exception and its exact message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lessons_lib import cache_ladder as cl
from lessons_lib import shakespeare as sh
from lessons_lib import shakespeare_torch as st
from lessons_lib.kv_cache import KVCache

m = sh.load_model()
V = m.vocabulary
ids = m.encode("ab cd")
w = sh.run(m, ids)[1][0]

SHAKESPEARE_ROWS: list[tuple[str, str, Callable[[], Any], type, str]] = [
    (
        "shakespeare.check_arrays",
        "sh_check_arrays_list",
        lambda: sh.check_arrays([], m.config),
        TypeError,
        "arrays must be a dict of name -> NumPy array (load_arrays()[0]), got list",
    ),
    (
        "shakespeare.model_from_arrays",
        "sh_model_from_arrays_empty",
        lambda: sh.model_from_arrays({}, m.config, V),
        ValueError,
        "arrays do not fit the config's sizes (see array_shapes(config)): missing or misshapen ['block0_b_in', 'block0_b_out', 'block0_norm1_bias', 'block0_norm1_gain']",
    ),
    (
        "shakespeare.model_from_arrays",
        "sh_model_from_arrays_other_vocabulary",
        lambda: sh.model_from_arrays(sh.load_arrays()[0], m.config, sh.Vocabulary("ab")),
        ValueError,
        "the vocabulary has 2 characters, the config V = 83",
    ),
    (
        "shakespeare.GPTConfig",
        "sh_config_width_not_divisible",
        lambda: sh.GPTConfig(width=130),
        ValueError,
        "width D=130 is not divisible by heads h=4: every head needs the same width d_h = D / h. Choose heads from the divisors of 130: [1, 2, 5, 10, 13, 26, 65, 130]",
    ),
    (
        "shakespeare.GPTConfig",
        "sh_config_kv_heads_not_dividing",
        lambda: sh.GPTConfig(kv_heads=3),
        ValueError,
        "kv_heads h_kv=3 must be a positive divisor of heads h=4, so that each key/value head serves the same number g = h / h_kv of query heads. Valid choices for h=4: [1, 2, 4]",
    ),
    (
        "shakespeare.GPTConfig",
        "sh_config_weight_decay_one",
        lambda: sh.GPTConfig(weight_decay=1.0),
        ValueError,
        "GPTConfig.weight_decay must be in [0, 1), got 1.0",
    ),
    (
        "shakespeare.Vocabulary",
        "sh_vocabulary_repeated_character",
        lambda: sh.Vocabulary("aab"),
        ValueError,
        "Vocabulary.chars must be a non-empty string of distinct characters",
    ),
    (
        "shakespeare.array_shapes",
        "sh_array_shapes_not_a_config",
        lambda: sh.array_shapes({"width": 128}),
        TypeError,
        "config must be a shakespeare.GPTConfig, e.g. GPTConfig(), got dict",
    ),
    (
        "shakespeare.load_text",
        "sh_load_text_unknown_split",
        lambda: sh.load_text("test"),
        ValueError,
        "split must be 'train' or 'valid', got 'test'",
    ),
    (
        "shakespeare.validation_windows",
        "sh_windows_text_too_short",
        lambda: sh.validation_windows("abc", V, 8),
        ValueError,
        "text must hold at least length + 1 = 9 characters, got 3",
    ),
    (
        "shakespeare.validation_windows",
        "sh_windows_unknown_character",
        lambda: sh.validation_windows("ab\tc", V, 2),
        ValueError,
        "the model has no token for '\\t'; it knows only '\\n !\"&\\'(),-./0123456789:;?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz{}'",
    ),
    (
        "shakespeare.save_arrays",
        "sh_save_arrays_not_a_dict",
        lambda: sh.save_arrays([], sh.GPTConfig(), V, "/tmp/x.npz"),
        TypeError,
        "arrays must be a dict of name -> NumPy array, got list",
    ),
    (
        "shakespeare.load_arrays",
        "sh_load_arrays_missing_file",
        lambda: sh.load_arrays("/nonexistent/gpt.npz"),
        FileNotFoundError,
        "no model weights at /nonexistent/gpt.npz: run `python scripts/train_shakespeare.py`",
    ),
    (
        "shakespeare.load_model",
        "sh_load_model_integer_dtype",
        lambda: sh.load_model(dtype=np.int64),
        TypeError,
        "dtype must be np.float32 or np.float64, got <class 'numpy.int64'>",
    ),
    (
        "shakespeare.check_tokens",
        "sh_check_tokens_floats",
        lambda: sh.check_tokens(np.zeros((1, 3)), m.config),
        TypeError,
        "tokens must be an integer NumPy array (B, T) of character ids, got ndarray float64 (1, 3); use vocabulary.encode(text)[None]",
    ),
    (
        "shakespeare.check_ablate",
        "sh_check_ablate_plain_numbers",
        lambda: sh.check_ablate((0, 1), m.config),
        TypeError,
        "ablate must be a list of (layer, head) pairs, e.g. [(0, 1)] for layer 0, head 1, [(2, None)] for all of layer 2's heads, or [] for none; got (0, 1) (plain numbers)",
    ),
    (
        "shakespeare.run",
        "sh_run_too_long",
        lambda: sh.run(m, np.zeros((1, 257), dtype=np.int64)),
        ValueError,
        "tokens must hold 1 to T_max = 256 characters per row (the model learned 256 positions), got T = 257",
    ),
    (
        "shakespeare.run",
        "sh_run_id_out_of_range",
        lambda: sh.run(m, np.array([[0, 83]])),
        ValueError,
        "token ids must be in 0 .. 82, got 0 .. 83",
    ),
    (
        "shakespeare.run",
        "sh_run_ablate_layer_out_of_range",
        lambda: sh.run(m, ids, [(4, None)]),
        ValueError,
        "ablated layer must be in 0 .. 3, got ablated layer=4",
    ),
    (
        "shakespeare.run",
        "sh_run_text_not_ids",
        lambda: sh.run(m, "ab cd"),
        TypeError,
        "tokens must be an integer NumPy array (B, T) of character ids, got str; use vocabulary.encode(text)[None]",
    ),
    (
        "shakespeare.loss",
        "sh_loss_one_character_windows",
        lambda: sh.loss(m, np.zeros((2, 1), dtype=np.int64)),
        ValueError,
        "windows must be ids (N, T + 1) with T >= 1, got (2, 1)",
    ),
    (
        "shakespeare.decode_step",
        "sh_decode_step_float_token",
        lambda: sh.decode_step(m, 1.0, KVCache(4)),
        TypeError,
        "token must be one character id (an int), got float 1.0",
    ),
    (
        "shakespeare.decode_step",
        "sh_decode_step_cache_of_other_depth",
        lambda: sh.decode_step(m, 1, KVCache(2)),
        ValueError,
        "cache has 2 layers, the model 4",
    ),
    (
        "shakespeare.generate",
        "sh_generate_past_context",
        lambda: sh.generate(m, "a" * 250, 10),
        ValueError,
        "prompt (250) + characters (10) must be at most T_max = 256",
    ),
    (
        "shakespeare.generate",
        "sh_generate_negative_temperature",
        lambda: sh.generate(m, "a", 3, temperature=-0.5),
        ValueError,
        "temperature must be a number >= 0 (0: greedy), got -0.5",
    ),
    (
        "shakespeare.generate",
        "sh_generate_empty_prompt",
        lambda: sh.generate(m, "", 3),
        ValueError,
        "prompt must hold at least one character",
    ),
    (
        "shakespeare.target_score",
        "sh_target_score_wrong_targets_shape",
        lambda: sh.target_score(w, np.zeros((1, 4), dtype=np.int64)),
        ValueError,
        "targets must be (B, T) = (1, 5) key positions (-1: not scored), got (1, 4)",
    ),
    (
        "shakespeare.target_score",
        "sh_target_score_no_target",
        lambda: sh.target_score(w, np.full((1, 5), -1)),
        ValueError,
        "no query has a target (every entry of targets is -1)",
    ),
    (
        "shakespeare.target_score",
        "sh_target_score_three_axes",
        lambda: sh.target_score(w[0], np.zeros((1, 5), dtype=np.int64)),
        ValueError,
        "weights must be one layer's self-attention weights (B, h, T, T), got (4, 5, 5)",
    ),
    (
        "shakespeare.last_break",
        "sh_last_break_float_ids",
        lambda: sh.last_break(np.zeros((1, 5)), V),
        TypeError,
        "ids must be integer character ids (B, T), e.g. model.encode(text), got ndarray float64 (1, 5)",
    ),
    (
        "shakespeare.word_targets",
        "sh_word_targets_vocabulary_string",
        lambda: sh.word_targets(ids, V.chars),
        TypeError,
        "vocabulary must be a shakespeare.Vocabulary, e.g. model.vocabulary, got str",
    ),
    (
        "shakespeare.repeat_keys",
        "sh_repeat_keys_k_zero",
        lambda: sh.repeat_keys(ids, 0),
        ValueError,
        "k must be positive, got k=0",
    ),
    (
        "shakespeare.repeat_score",
        "sh_repeat_score_keys_of_other_shape",
        lambda: sh.repeat_score(w, np.zeros((1, 4, 4), dtype=bool)),
        ValueError,
        "keys must be a bool (B, T, T) = (1, 5, 5) array from repeat_keys(ids), got bool (1, 4, 4)",
    ),
    (
        "shakespeare.repeat_score",
        "sh_repeat_score_no_repeat",
        lambda: sh.repeat_score(w, sh.repeat_keys(ids)),
        ValueError,
        "no query has an earlier copy of its context: use longer or more windows",
    ),
    (
        "shakespeare.random_repeat",
        "sh_random_repeat_half_one",
        lambda: sh.random_repeat(V, 1, 4),
        ValueError,
        "half must be at least 2, got half=1",
    ),
    (
        "shakespeare.ov_circuit",
        "sh_ov_circuit_layer_four",
        lambda: sh.ov_circuit(m, 4, 0),
        ValueError,
        "layer must be in 0 .. 3, got layer=4",
    ),
    (
        "shakespeare.copying_scores",
        "sh_copying_scores_not_a_model",
        lambda: sh.copying_scores(None),
        TypeError,
        "model must be the trained model from shakespeare.load_model(), got NoneType",
    ),
    (
        "shakespeare.head_scores",
        "sh_head_scores_short_windows",
        lambda: sh.head_scores(m, np.zeros((2, 4), dtype=np.int64)),
        ValueError,
        "windows must hold at least 8 characters each (N, T + 1), got (2, 4)",
    ),
    (
        "shakespeare_torch.CharGPT",
        "sh_char_gpt_not_a_config",
        lambda: st.CharGPT({"width": 128}),
        TypeError,
        "config must be a shakespeare.GPTConfig, e.g. GPTConfig(), got dict",
    ),
    (
        "shakespeare_torch.GPTBlock",
        "sh_gpt_block_not_a_config",
        lambda: st.GPTBlock(None, 0),
        TypeError,
        "config must be a shakespeare.GPTConfig, e.g. GPTConfig(), got NoneType",
    ),
    (
        "shakespeare_torch.reference_logits",
        "sh_reference_logits_float_tokens",
        lambda: st.reference_logits(sh.load_arrays()[0], m.config, torch.zeros(1, 3)),
        TypeError,
        "tokens must be an int64 tensor (B, T) of character ids, got Tensor torch.float32 (1, 3)",
    ),
    (
        "shakespeare_torch.reference_logits",
        "sh_reference_logits_missing_arrays",
        lambda: st.reference_logits({}, m.config, torch.zeros(1, 3, dtype=torch.int64)),
        ValueError,
        "arrays do not fit the config's sizes (see array_shapes(config)): missing or misshapen ['block0_b_in', 'block0_b_out', 'block0_norm1_bias', 'block0_norm1_gain']",
    ),
    (
        "shakespeare_torch.validation_loss",
        "sh_validation_loss_numpy_model",
        lambda: st.validation_loss(m, torch.zeros(1, 3, dtype=torch.int64)),
        TypeError,
        "model must be a shakespeare_torch.CharGPT, got ShakespeareModel",
    ),
    (
        "shakespeare_torch.baselines",
        "sh_baselines_string",
        lambda: st.baselines(V.chars),
        TypeError,
        "vocabulary must be a shakespeare.Vocabulary, e.g. load_arrays()[2], got str",
    ),
    (
        "shakespeare_torch.measure",
        "sh_measure_missing_file",
        lambda: st.measure("/nonexistent/gpt.npz"),
        FileNotFoundError,
        "no model weights at /nonexistent/gpt.npz: run `python scripts/train_shakespeare.py`",
    ),
]
# Records that only hold what they are given (no bad input of their own).
LADDER_ARRAYS, LADDER_CONFIG, _ = sh.load_arrays()

CACHE_LADDER_ROWS: list[tuple[str, str, Callable[[], Any], type, str]] = [
    ("cache_ladder.pooled_arrays", "ladder_pooled_three_kv_heads", lambda: cl.pooled_arrays(LADDER_ARRAYS, LADDER_CONFIG, 3), ValueError,
     "kv_heads h_kv=3 must be a positive divisor of heads h=4, so that each key/value head serves the same number g = h / h_kv of query heads. Valid choices for h=4: [1, 2, 4]"),
    ("cache_ladder.pooled_arrays", "ladder_pooled_list", lambda: cl.pooled_arrays([], LADDER_CONFIG, 2), TypeError,
     "arrays must be a dict of name -> NumPy array (load_arrays()[0]), got list"),
    ("cache_ladder.latent_factors", "ladder_factors_two_shapes", lambda: cl.latent_factors(np.zeros((4, 3)), np.zeros((4, 2)), 2), ValueError,
     "wk and wv must have one shape (D, h_kv * d_h), got (4, 3) and (4, 2)"),
    ("cache_ladder.latent_factors", "ladder_factors_rank_too_large", lambda: cl.latent_factors(np.zeros((4, 3)), np.zeros((4, 3)), 5), ValueError,
     "rank (d_c) must be in 1 .. 4, got rank=5"),
    ("cache_ladder.latent_factors", "ladder_factors_list", lambda: cl.latent_factors([[1.0]], np.zeros((1, 1)), 1), TypeError,
     "wk must be an array, got list; make one first, e.g. np.asarray(wk) (or torch.tensor(wk) for a PyTorch function)"),
    ("cache_ladder.latent_arrays", "ladder_latent_rank_zero", lambda: cl.latent_arrays(LADDER_ARRAYS, LADDER_CONFIG, 0), ValueError,
     "rank (d_c) must be in 1 .. 128, got rank=0"),
    ("cache_ladder.cache_numbers", "ladder_cache_numbers_text", lambda: cl.cache_numbers("c"), TypeError,
     "config must be a shakespeare.GPTConfig, e.g. GPTConfig(), got str"),
    ("cache_ladder.cache_numbers", "ladder_cache_numbers_float_rank", lambda: cl.cache_numbers(LADDER_CONFIG, 1.5), TypeError,
     "rank must be an int, got float 1.5"),
    ("cache_ladder.load_ladder", "ladder_missing_file", lambda: cl.load_ladder("/nonexistent/ladder.json"), FileNotFoundError,
     "/nonexistent/ladder.json is missing: run `python scripts/cache_ladder.py --help` to write it"),
    ("shakespeare_torch.latent_kv", "st_latent_kv_not_a_model", lambda: st.latent_kv("m", 4), TypeError,
     "model must be a shakespeare_torch.CharGPT, got str"),
    ("shakespeare_torch.latent_kv", "st_latent_kv_rank_too_large", lambda: st.latent_kv(st.CharGPT(LADDER_CONFIG), 300), ValueError,
     "rank d_c = 300 is larger than [W_k | W_v] (128, 256) can use"),
    ("shakespeare_torch.latent_kv", "st_latent_kv_twice", lambda: st.latent_kv(st.latent_kv(st.CharGPT(LADDER_CONFIG), 4), 4), ValueError,
     "the model already has a latent K/V cache"),
]
SHAKESPEARE_ROWS += CACHE_LADDER_ROWS


SHAKESPEARE_RECORDS = {
    "shakespeare.ShakespeareBlock": "a record built by load_model",
    "shakespeare.ShakespeareModel": "a record built by load_model",
}
