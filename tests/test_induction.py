"""`lessons_lib.induction` (lesson 09): the scores on hand-built patterns, the forward pass and ablation,
the loader's errors, and what the shipped weights show (the claims the lesson makes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from numpy.typing import NDArray

from lessons_lib import induction
from lessons_lib.induction import InductionConfig, InductionModel
from lessons_lib.mha_numpy import MultiHead, causal_mask, softmax, split_heads

# The lesson's thresholds. Attention spread evenly over the causal past gives a previous-token or
# induction score of about 1/(t+1) averaged over t: below 0.15 at these lengths.
PREVIOUS_TOKEN_THRESHOLD = 0.8  # first-half score (queries 1 .. L-1) of the identified layer-0 head
INDUCTION_THRESHOLD = 0.7  # induction score of each identified layer-1 head


# ----- scores on hand-built attention patterns ---------------------------------------------------
def hand_built_weights() -> NDArray[np.float64]:
    """``(1, 3, 5, 5)``: head 0 looks at t - 1 (t = 0 at itself), head 1 spreads evenly over
    0 .. t, head 2 is an exact induction head for L = 2 past the first half (row t: key t - 1)
    and looks at itself before."""
    T = 5
    previous = np.eye(T, k=-1)
    previous[0, 0] = 1.0
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    own = np.eye(T)
    return np.stack([previous, uniform, own])[None]


def test_previous_token_score_is_the_formula() -> None:
    weights = hand_built_weights()
    score = induction.previous_token_score(weights)
    # head 0: 1 at every t >= 1; head 1: mean of 1/(t+1) for t = 1..4; head 2: 0.
    np.testing.assert_allclose(score, np.array([1.0, np.mean([1 / 2, 1 / 3, 1 / 4, 1 / 5]), 0.0]), atol=1e-15)
    np.testing.assert_allclose(induction.previous_token_score(weights, positions=3)[1], np.mean([1 / 2, 1 / 3]))


def test_induction_score_is_the_formula() -> None:
    weights = hand_built_weights()
    # L = 3, T = 5: queries t = 3, 4 and keys t - 2 = 1, 2.
    score = induction.induction_score(weights, half=3)
    np.testing.assert_allclose(score, np.array([0.0, np.mean([1 / 4, 1 / 5]), 0.0]), atol=1e-15)
    # L = 2: key t - 1, so the previous-token head scores 1 over queries 2, 3, 4; L = 1: key t (itself).
    np.testing.assert_allclose(
        induction.induction_score(weights, half=2), np.array([1.0, np.mean([1 / 3, 1 / 4, 1 / 5]), 0.0])
    )
    np.testing.assert_allclose(induction.induction_score(weights, half=1)[2], 1.0)
    # averaged over the batch: a second sequence with zero weight there halves the score
    twice = np.concatenate([weights, np.zeros_like(weights)])
    np.testing.assert_allclose(induction.induction_score(twice, half=2)[0], 0.5)


def test_score_errors() -> None:
    with pytest.raises(ValueError, match=r"\(B, h, T, T\)"):
        induction.previous_token_score(np.zeros((1, 2, 4, 5)))
    with pytest.raises(ValueError, match=r"half \(L\) must be in 1 .. 4"):
        induction.induction_score(np.zeros((1, 2, 5, 5)), half=5)
    with pytest.raises(ValueError, match="exactly 4 axes"):
        induction.induction_score(np.zeros((2, 5, 5)), half=2)


# ----- data ---------------------------------------------------------------------------------------
def test_repeated_tokens() -> None:
    tokens = induction.repeated_tokens(50, 10, 6, seed=3)
    assert tokens.shape == (50, 12) and tokens.dtype == np.int64
    np.testing.assert_array_equal(tokens[:, :6], tokens[:, 6:])
    assert all(len(set(row[:6])) == 6 for row in tokens.tolist())  # distinct within the first half
    np.testing.assert_array_equal(tokens, induction.repeated_tokens(50, 10, 6, seed=3))
    varied = induction.repeated_tokens(200, 10, 6, seed=3, shortest=2)
    for row in varied.tolist():
        run = next(n for n in range(2, 7) if row[:n] == row[n : 2 * n] and len(set(row[:n])) == n)
        assert 2 <= run <= 6
    with pytest.raises(ValueError, match="must be <= vocab"):
        induction.repeated_tokens(1, 4, 5)
    with pytest.raises(ValueError, match=r"shortest must be in 1 .. 6"):
        induction.repeated_tokens(1, 10, 6, shortest=7)


# ----- forward pass and ablation on a tiny random model ------------------------------------------
def tiny_model(seed: int = 0) -> InductionModel:
    config = InductionConfig(vocab=7, half=3, width=8, heads=2, shortest=2)
    rng = np.random.default_rng(seed)
    layers = tuple(MultiHead(8, 2, seed=seed + i) for i in range(2))
    return InductionModel(config, rng.normal(size=(7, 8)), rng.normal(size=(5, 8)), layers, rng.normal(size=(8, 7)))


def test_run_is_two_residual_attention_layers() -> None:
    model = tiny_model()
    tokens = np.array([[0, 3, 5, 0, 3], [6, 1, 2, 6, 1]])
    logits, weights = induction.run(model, tokens)
    x = model.token_embedding[tokens] + model.position_embedding
    for layer, w in zip(model.layers, weights, strict=True):
        out, expected = layer(x, allowed=causal_mask(5))
        np.testing.assert_allclose(w, expected, atol=1e-14)
        x = x + out
    np.testing.assert_allclose(logits, x @ model.unembedding, atol=1e-12)


def test_ablation_zeroes_a_heads_output() -> None:
    model = tiny_model()
    tokens = np.array([[0, 3, 5, 0]])
    whole_layer_off, _ = induction.run(model, tokens, ablate=[(1, 0), (1, 1)])
    c, tok, pos, unembed = model.config, model.token_embedding, model.position_embedding, model.unembedding
    first_only, _ = induction.run(InductionModel(c, tok, pos, model.layers[:1], unembed), tokens)
    np.testing.assert_allclose(whole_layer_off, first_only, atol=1e-12)
    # zeroing head 0 of layer 0 = zeroing its rows of wo (the head writes through those rows only)
    wo = model.layers[0].wo.copy()
    wo[:4] = 0.0
    edited = MultiHead.from_weights(model.layers[0].wq, model.layers[0].wk, model.layers[0].wv, wo, heads=2)
    edited_model = InductionModel(
        model.config, model.token_embedding, model.position_embedding, (edited, model.layers[1]), model.unembedding
    )
    np.testing.assert_allclose(induction.run(model, tokens, ablate=[(0, 0)])[0], induction.run(edited_model, tokens)[0])
    with pytest.raises(ValueError, match=r"ablated head must be in 0 .. 1"):
        induction.run(model, tokens, ablate=[(0, 2)])


def test_head_writes_add_up_to_the_layer_output() -> None:
    model = tiny_model()
    x = model.token_embedding[np.array([[0, 3, 5, 0, 3]])] + model.position_embedding
    layer = model.layers[0]
    writes, weights = induction.head_writes(layer, x, causal_mask(5))
    out, expected = layer(x, allowed=causal_mask(5))
    assert writes.shape == (1, 2, 5, 8)
    np.testing.assert_allclose(writes.sum(axis=1), out, atol=1e-12)
    np.testing.assert_allclose(weights, expected, atol=1e-14)
    # head 1 writes only through rows 4..7 of wo: with those rows zeroed, its write vanishes
    wo = layer.wo.copy()
    wo[4:] = 0.0
    silent = MultiHead.from_weights(layer.wq, layer.wk, layer.wv, wo, heads=2)
    np.testing.assert_allclose(induction.head_writes(silent, x, causal_mask(5))[0][:, 1], 0.0)


def test_composition_scores_hide_one_head_from_one_side() -> None:
    model = tiny_model()
    tokens = induction.repeated_tokens(4, 7, 3, seed=0)[:, :-1]  # (4, 5): L = 3
    scores = induction.composition_scores(model, tokens)
    assert scores["keys"].shape == scores["queries"].shape == (2, 2)
    # hiding a head from both sides at once is ablating it
    _, ablated = induction.run(model, tokens, ablate=[(0, 1)])
    x0 = model.token_embedding[tokens] + model.position_embedding
    writes, _ = induction.head_writes(model.layers[0], x0, causal_mask(5))
    x1 = x0 + writes.sum(axis=1)
    last = model.layers[1]
    hidden = x1 - writes[:, 1]
    q = split_heads(hidden @ last.wq, 2)
    k = split_heads(hidden @ last.wk, 2)
    keys_only_q = split_heads(x1 @ last.wq, 2)
    w_keys = softmax(np.where(causal_mask(5), keys_only_q @ np.swapaxes(k, -1, -2) / 2.0, -np.inf))
    np.testing.assert_allclose(scores["keys"][1], induction.induction_score(w_keys, 3), atol=1e-12)
    w_both = softmax(np.where(causal_mask(5), q @ np.swapaxes(k, -1, -2) / 2.0, -np.inf))
    both_hidden, ablated_score = induction.induction_score(w_both, 3), induction.induction_score(ablated[1], 3)
    np.testing.assert_allclose(both_hidden, ablated_score, atol=1e-12)
    with pytest.raises(ValueError, match=r"T > L=3"):
        induction.composition_scores(model, tokens[:, :3])


def test_induction_targets() -> None:
    assert induction.induction_targets([4, 1, 2, 4, 1, 2]).tolist() == [-1, -1, -1, 1, 2, 3]
    assert induction.induction_targets(np.array([5, 5, 5])).tolist() == [-1, 1, 2]  # the latest earlier copy
    assert induction.induction_targets(np.array([0, 1, 2])).tolist() == [-1, -1, -1]
    with pytest.raises(ValueError, match="integer ids"):
        induction.induction_targets(np.array([[0, 1]]))
    # on a repeated sequence they are t - L + 1, the keys `induction_score` reads
    tokens = induction.repeated_tokens(1, 10, 4, seed=2)[0]
    targets = induction.induction_targets(tokens)
    np.testing.assert_array_equal(targets[4:], np.arange(4, 8) - 4 + 1)


def test_loss_per_position_is_cross_entropy() -> None:
    model = tiny_model()
    tokens = np.array([[0, 3, 5, 0, 3, 5], [6, 1, 2, 6, 1, 2]])
    loss = induction.loss_per_position(model, tokens)
    logits, _ = induction.run(model, tokens[:, :-1])
    p = softmax(logits)
    expected = -np.log([[p[b, t, tokens[b, t + 1]] for t in range(5)] for b in range(2)]).mean(axis=0)
    np.testing.assert_allclose(loss, expected, atol=1e-12)
    table = induction.ablation_losses(model, tokens)
    assert table.shape == (2, 2)
    np.testing.assert_allclose(table[1, 0], induction.loss_per_position(model, tokens, [(1, 0)])[3:].mean())


def test_token_errors() -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match=r"1 <= T <= 5"):
        induction.run(model, np.zeros((1, 6), dtype=np.int64))
    with pytest.raises(ValueError, match=r"token ids must be in 0 .. 6"):
        induction.run(model, np.array([[1, 7]]))
    with pytest.raises(ValueError, match="integer ids"):
        induction.run(model, np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="at least 2 positions"):
        induction.loss_per_position(model, np.array([[1]]))


# ----- the loader ---------------------------------------------------------------------------------
def saved_tiny(tmp_path: Path, **changes: NDArray[np.float64] | None) -> Path:
    model = tiny_model()
    arrays: dict[str, NDArray[np.floating[Any]]] = {
        "token_embedding": model.token_embedding,
        "position_embedding": model.position_embedding,
        "unembedding": model.unembedding,
    }
    for i, layer in enumerate(model.layers):
        arrays |= {f"layer{i}_{name}": getattr(layer, name) for name in ("wq", "wk", "wv", "wo")}
    for name, value in changes.items():
        if value is None:
            del arrays[name]
        else:
            arrays[name] = value
    return induction.save_weights(arrays, model.config, tmp_path / "weights.npz")


def test_loader_round_trip(tmp_path: Path) -> None:
    loaded = induction.load_induction_model(saved_tiny(tmp_path))
    model = tiny_model()
    assert loaded.config == model.config
    tokens = np.array([[0, 3, 5, 0, 3]])
    np.testing.assert_array_equal(induction.run(loaded, tokens)[0], induction.run(model, tokens)[0])


def test_loader_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"run `python scripts/train_induction_heads\.py`"):
        induction.load_induction_model(tmp_path / "nowhere.npz")
    with pytest.raises(ValueError, match=r"lacks the arrays \['layer1_wv'\]"):
        induction.load_induction_model(saved_tiny(tmp_path, layer1_wv=None))
    with pytest.raises(ValueError, match=r"unembedding .* has shape \(8, 6\), expected \(8, 7\)"):
        induction.load_induction_model(saved_tiny(tmp_path, unembedding=np.zeros((8, 6))))
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    with pytest.raises(ValueError, match="not an induction-heads weights file"):
        induction.load_induction_model(tmp_path / "other.npz")


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="not divisible by heads"):
        InductionConfig(width=10, heads=4)
    with pytest.raises(ValueError, match="shortest=13 must be <= half"):
        InductionConfig(shortest=13)
    with pytest.raises(ValueError, match=r"InductionConfig.steps must be positive"):
        InductionConfig(steps=0)


# ----- the shipped weights: the lesson's claims ---------------------------------------------------
def check_claims(figures: dict[str, Any], vocab: int) -> None:
    """What lesson 09 says about the trained model, checked on `induction.measure`'s figures (also used
    by tests/test_induction_training.py on a fresh retraining)."""
    base = figures["repeated_half_loss"]
    assert base < 0.1 * figures["first_half_loss"]  # in-context learning: the repeat is predictable
    assert abs(figures["first_half_loss"] - np.log(vocab)) < 0.5  # the first half is guesswork
    prev_first = np.array(figures["previous_token_score_first_half"])
    prev, ind = np.array(figures["previous_token_score"]), np.array(figures["induction_score"])
    layer, prev_head = figures["previous_token_head"]
    assert layer == 0 and prev_first[0, prev_head] > PREVIOUS_TOKEN_THRESHOLD
    assert prev[0, prev_head] == prev[0].max()  # over all positions too, it is the previous-token head
    induction_heads = np.flatnonzero(ind[1] > INDUCTION_THRESHOLD)
    assert figures["induction_head"] == [1, int(ind[1].argmax())] and len(induction_heads) >= 1
    assert ind[0].max() < 0.2  # no first-layer head finds the earlier copy by position alone
    ablation = np.array(figures["ablation_repeated_half_loss"])
    assert ablation.max() == ablation[0, prev_head]  # the previous-token head matters most
    assert np.all(ablation[1, induction_heads] > 10 * base)
    composed = np.array(figures["last_layer_induction_score_with_first_layer_head_ablated"])  # (h, h)
    assert np.all(composed[prev_head, induction_heads] < 0.5 * ind[1, induction_heads])  # composition
    others = [j for j in range(len(composed)) if j != prev_head]
    assert np.all(composed[others][:, induction_heads] > 0.8 * ind[1, induction_heads])  # only that head
    # K-composition: hidden from the induction heads' keys alone, the previous-token head's write is
    # missed as much as when it is ablated; hidden from their queries alone, it is hardly missed.
    keys = np.array(figures["last_layer_induction_score_with_first_layer_head_hidden_from_keys"])
    queries = np.array(figures["last_layer_induction_score_with_first_layer_head_hidden_from_queries"])
    assert np.all(keys[prev_head, induction_heads] < 0.5 * ind[1, induction_heads])
    assert np.all(queries[prev_head, induction_heads] > 0.9 * ind[1, induction_heads])
    # The previous-token head is one on the first half; on the repeated half it splits its weight.
    second = np.array(figures["previous_token_score_repeated_half"])
    assert second[0, prev_head] < 0.5 * prev_first[0, prev_head]
    # Copying (Olsson et al.'s second half): the induction heads copy, the other last-layer heads anti-copy.
    copying = np.array(figures["copying_score_eigenvalue"])
    assert np.all(copying[1, induction_heads] > 0.9)
    assert np.all(copying[1, [j for j in range(copying.shape[1]) if j not in induction_heads]] < -0.9)
    assert np.all(np.array(figures["copying_score_top_token"])[1, induction_heads] > 0.5)


def test_shipped_weights_show_the_induction_circuit() -> None:
    model = induction.load_induction_model()
    assert induction.DATA_PATH.stat().st_size < 100_000
    figures = induction.measure()
    check_claims(figures, model.config.vocab)
    shipped = json.loads(induction.DATA_PATH.with_suffix(".json").read_text())
    for name, value in figures.items():  # the figures file beside the weights says the same
        np.testing.assert_allclose(shipped[name], value, atol=1e-4, err_msg=name)


# ----- copying: the full OV circuit ----------------------------------------------------------------
def test_full_ov_circuit_matches_a_pytorch_route() -> None:
    model = induction.load_induction_model()
    c = model.config
    for layer, head in [(0, 1), (1, 2), (1, 0)]:
        torch_layer = model.layers[layer]
        # PyTorch route: the head's value and output as nn.Linear maps applied to every token's embedding.
        cols = slice(head * torch_layer.head_width, (head + 1) * torch_layer.head_width)
        value = torch.nn.Linear(c.width, torch_layer.head_width, bias=False).double()
        out = torch.nn.Linear(torch_layer.head_width, c.width, bias=False).double()
        unembed = torch.nn.Linear(c.width, c.vocab, bias=False).double()
        with torch.no_grad():
            value.weight.copy_(torch.from_numpy(torch_layer.wv[:, cols].T.copy()))
            out.weight.copy_(torch.from_numpy(torch_layer.wo[cols, :].T.copy()))
            unembed.weight.copy_(torch.from_numpy(model.unembedding.T.copy()))
            theirs = unembed(out(value(torch.from_numpy(model.token_embedding)))).numpy()
        np.testing.assert_allclose(induction.full_ov_circuit(model, layer, head), theirs, rtol=1e-10, atol=1e-10)


def test_copying_scores_match_torch_eigenvalues() -> None:
    model = induction.load_induction_model()
    scores = induction.copying_scores(model)
    assert set(scores) == {"eigenvalue", "top_token"}
    for layer in range(model.config.layers):
        for head in range(model.config.heads):
            circuit = torch.from_numpy(induction.full_ov_circuit(model, layer, head))
            values = torch.linalg.eigvals(circuit)
            expected = (values.sum().real / values.abs().sum()).item()
            assert abs(scores["eigenvalue"][layer, head] - expected) < 1e-9
            top = (circuit.argmax(dim=1) == torch.arange(model.config.vocab)).double().mean().item()
            assert scores["top_token"][layer, head] == top


def test_copying_score_of_known_circuits() -> None:
    model = tiny_model()
    scores = induction.copying_scores(model)
    assert scores["eigenvalue"].shape == scores["top_token"].shape == (model.config.layers, model.config.heads)
    assert np.all(np.abs(scores["eigenvalue"]) <= 1 + 1e-12)
    assert np.all((scores["top_token"] >= 0) & (scores["top_token"] <= 1))
    # A head whose OV circuit is the identity on a square embedding copies perfectly; its negative anti-copies.
    V, D = 8, 8
    config = InductionConfig(vocab=V, half=4, width=D, heads=1, layers=1, shortest=2)
    for sign in (1.0, -1.0):
        start = MultiHead(D, 1, seed=0)
        layer = MultiHead.from_weights(start.wq, start.wk, sign * np.eye(D), np.eye(D), heads=1)
        toy = induction.InductionModel(config, np.eye(V), np.zeros((config.context, D)), (layer,), np.eye(D))
        copying = induction.copying_scores(toy)
        assert copying["eigenvalue"][0, 0] == pytest.approx(sign)
        assert copying["top_token"][0, 0] == (1.0 if sign > 0 else 0.0)


def test_copying_bad_inputs() -> None:
    model = induction.load_induction_model()
    with pytest.raises(TypeError, match="model"):
        induction.copying_scores("model")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="layer"):
        induction.full_ov_circuit(model, 2, 0)
    with pytest.raises(ValueError, match="head"):
        induction.full_ov_circuit(model, 0, 4)


def test_previous_token_score_on_either_half() -> None:
    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 7, 7))
    t = np.arange(4, 7)
    expected = weights[..., t, t - 1].mean(axis=(0, 2))
    np.testing.assert_allclose(induction.previous_token_score(weights, start=4), expected)
    first, second = induction.previous_token_score(weights, 4), induction.previous_token_score(weights, start=4)
    whole = induction.previous_token_score(weights)
    np.testing.assert_allclose(whole, (3 * first + 3 * second) / 6)  # 3 queries in each part
    with pytest.raises(ValueError, match="start"):
        induction.previous_token_score(weights, start=7)
    with pytest.raises(ValueError, match="start"):
        induction.previous_token_score(weights, 4, start=4)


def test_anti_copying_heads_push_seen_tokens_down() -> None:
    # Lesson 09's claim: zeroing layer 1's anti-copying heads (0 and 1) moves first-half probability onto
    # tokens already seen, which never come next there (positions 1 .. L-2; at L-1 a repeat may start).
    model = induction.load_induction_model()
    tokens = induction.repeated_tokens(64, model.config.vocab, model.config.half, seed=induction.EVAL_SEED)[:, :-1]
    L = model.config.half
    intact = induction.repeat_bets(model, tokens)["seen"][1 : L - 1]
    zeroed = induction.repeat_bets(model, tokens, ablate=[(1, 0), (1, 1)])["seen"][1 : L - 1]
    assert np.all(zeroed > intact + 0.3)
