"""lessons_lib.inspect_heads: loading the shipped layer, per-head maps, re-slicing, split layouts, costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessons_lib.inspect_heads import (
    EVAL_SEED,
    attention_cost,
    average_over_heads,
    column_blocks,
    embed,
    features_per_head,
    head_behaviour,
    head_columns,
    head_maps,
    head_options,
    head_roles,
    load_toy_heads,
    predict,
    run_layer,
    split_layout,
    tokens_per_head,
    weight_entries,
)
from lessons_lib.mha_numpy import softmax, split_heads
from lessons_lib.toy_task import make_batch, targets


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return load_toy_heads()


def test_load_shapes(model) -> None:  # type: ignore[no-untyped-def]
    c = model.config
    assert (c.symbols, c.length, c.width, c.heads) == (6, 8, 16, 4)
    assert model.token_embedding.shape == (2 * c.symbols, c.width)
    assert model.position_embedding.shape == (c.length, c.width)
    assert model.readout.shape == (c.width, 3 * c.symbols)
    for name in ("wq", "wk", "wv", "wo"):
        w = getattr(model.layer, name)
        assert w.shape == (c.width, c.width) and w.dtype == np.float64
    assert model.layer.head_width == 4


def test_missing_file_names_the_script(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"scripts/train_toy_heads.py"):
        load_toy_heads(tmp_path / "nothing.npz")


def test_trained_model_solves_the_task(model) -> None:  # type: ignore[no-untyped-def]
    tokens, marker = make_batch(128, model.config, seed=EVAL_SEED)
    goal = targets(tokens, marker, model.config.symbols)
    guess = predict(model, tokens)
    scored = goal >= 0
    assert (guess[scored] == goal[scored]).mean() > 0.99


def test_run_layer_weights(model) -> None:  # type: ignore[no-untyped-def]
    tokens, _ = make_batch(3, model.config, seed=1)
    out, weights = run_layer(model, tokens)
    assert out.shape == (3, 8, 16) and weights.shape == (3, 4, 8, 8)
    assert np.allclose(weights.sum(-1), 1.0)


def test_embed_rejects_wrong_length(model) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="T=8"):
        embed(model, np.zeros((2, 5), dtype=np.int64))


def test_head_maps_match_the_layer_at_trained_h(model) -> None:  # type: ignore[no-untyped-def]
    tokens, _ = make_batch(2, model.config, seed=3)
    _, weights = run_layer(model, tokens)
    assert np.allclose(head_maps(embed(model, tokens), model.layer.wq, model.layer.wk, 4), weights)


@pytest.mark.parametrize("h", [1, 2, 4, 8, 16])
def test_head_maps_equal_a_per_head_loop(model, h: int) -> None:  # type: ignore[no-untyped-def]
    tokens, _ = make_batch(2, model.config, seed=5)
    x = embed(model, tokens)
    d_h = 16 // h
    maps = head_maps(x, model.layer.wq, model.layer.wk, h)
    for i in range(h):
        q = x @ model.layer.wq[:, i * d_h : (i + 1) * d_h]  # (B, T, d_h)
        k = x @ model.layer.wk[:, i * d_h : (i + 1) * d_h]
        expected = softmax(q @ k.transpose(0, 2, 1) / np.sqrt(d_h))
        assert np.allclose(maps[:, i], expected)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(6, 1), (6, 2), (6, 3), (12, 4), (16, 8), (8, 8)]), st.integers(0, 2**31 - 1))
def test_column_blocks_reassemble(sizes: tuple[int, int], seed: int) -> None:
    D, h = sizes
    w = np.random.default_rng(seed).normal(size=(D, D))
    blocks = column_blocks(w, h)
    assert blocks.shape == (h, D, D // h)
    assert np.array_equal(np.concatenate(list(blocks), axis=1), w)
    for i in range(h):
        assert np.array_equal(blocks[i], head_columns(w, i, h))
    # the projection split into heads = each head's own columns applied to x
    x = np.random.default_rng(seed + 1).normal(size=(1, 3, D))
    assert np.allclose(split_heads(x @ w, h)[0], x[0] @ blocks)


def test_head_columns_errors() -> None:
    w = np.zeros((8, 8))
    with pytest.raises(ValueError, match=r"head must be in 0 .. 1"):
        head_columns(w, 2, 2)
    with pytest.raises(ValueError, match="not divisible by heads h=3"):
        column_blocks(w, 3)
    with pytest.raises(TypeError, match="floating-point"):
        column_blocks(np.zeros((8, 8), dtype=np.int64), 2)


def test_head_options() -> None:
    assert head_options(16) == [1, 2, 4, 8, 16]
    assert head_options(12) == [1, 2, 3, 4, 6, 12]
    assert head_options(np.int64(4)) == [1, 2, 4]  # type: ignore[arg-type]  # NumPy ints are accepted
    with pytest.raises(ValueError, match="width"):
        head_options(0)


def test_split_layout_walkthrough() -> None:
    correct = split_layout(4, 8, 2, "correct")
    wrong = split_layout(4, 8, 2, "wrong")
    assert features_per_head(correct, 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert tokens_per_head(correct, 2) == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert features_per_head(wrong, 2) == [list(range(8)), list(range(8))]
    assert tokens_per_head(wrong, 2) == [[0, 1], [2, 3]]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.sampled_from([(4, 1), (4, 2), (6, 3), (8, 4), (12, 6)]))
def test_split_layout_matches_split_heads(T: int, sizes: tuple[int, int]) -> None:
    D, h = sizes
    x = np.arange(T * D, dtype=np.float64).reshape(1, T, D)
    heads = split_heads(x, h)[0]  # (h, T, d_h): entry ids
    layout = split_layout(T, D, h, "correct")
    for i in range(h):
        assert np.all(layout.ravel()[heads[i].astype(int).ravel()] == i)
    assert all(len(f) == D // h for f in features_per_head(layout, h))  # each head: its d_h features


def test_split_layout_errors() -> None:
    with pytest.raises(ValueError, match="mode must be 'correct' or 'wrong'"):
        split_layout(4, 8, 2, "transpose")
    with pytest.raises(ValueError, match="not divisible"):
        split_layout(4, 8, 3, "correct")


def test_head_behaviour_on_known_maps() -> None:
    B, h, T = 3, 3, 5
    weights = np.zeros((B, h, T, T))
    marker = np.array([0, 2, 4])
    t = np.arange(T)
    weights[:, 0, t, np.maximum(t - 1, 0)] = 1.0  # previous token (t=0 reads itself)
    weights[:, 1, t, np.minimum(t + 1, T - 1)] = 1.0  # next token
    weights[np.arange(B), 2, :, marker] = 1.0  # the marker
    b = head_behaviour(weights, marker)
    assert np.allclose(b["previous"], [1.0, 0.0, b["previous"][2]])
    assert np.allclose(b["next"][:2], [0.0, 1.0])
    assert np.allclose(b["marker"][2], 1.0)
    assert head_roles(b) == ["previous", "next", "marker"]


def test_head_behaviour_errors() -> None:
    with pytest.raises(ValueError, match="T == S"):
        head_behaviour(np.zeros((1, 2, 3, 4)), np.zeros(1, dtype=int))
    with pytest.raises(ValueError, match=r"marker must have shape \(B,\)"):
        head_behaviour(np.zeros((2, 2, 3, 3)), np.zeros(3, dtype=int))


def test_average_is_no_head(model) -> None:  # type: ignore[no-untyped-def]
    tokens, _ = make_batch(4, model.config, seed=EVAL_SEED)
    _, weights = run_layer(model, tokens)
    mean = average_over_heads(weights)
    assert mean.shape == (4, 8, 8) and np.allclose(mean.sum(-1), 1.0)
    for i in range(4):
        assert not np.allclose(mean, weights[:, i], atol=0.05)


def test_costs() -> None:
    assert weight_entries(2, 8, 4, 6) == 384
    small, many = attention_cost(2, 4, 6, 16, 2), attention_cost(2, 4, 6, 16, 8)
    assert many["weight_entries"] == 4 * small["weight_entries"]
    assert many["score_multiplies"] == small["score_multiplies"] == 2 * 4 * 6 * 16
    assert (small["d_h"], many["d_h"]) == (8, 2)
    with pytest.raises(ValueError, match="B must be positive"):
        weight_entries(0, 1, 1, 1)
    with pytest.raises(ValueError, match="not divisible"):
        attention_cost(1, 1, 1, 16, 3)


def test_heads_module_does_not_import_torch() -> None:
    code = (
        "import sys, lessons_lib.inspect_heads, lessons_lib.toy_task, lessons_lib.plotting.attention_maps, "
        "lessons_lib.widgets.head_widgets, lessons_lib.checks.inspecting_heads; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plots_return_figures(model) -> None:  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lessons_lib.plotting.attention_maps import (
        plot_average_contrast,
        plot_head_grid,
        plot_head_map,
        plot_split_layouts,
    )

    tokens, _ = make_batch(1, model.config, seed=EVAL_SEED)
    _, weights = run_layer(model, tokens)
    labels = model.labels(tokens[0])
    one = plot_head_map(weights[0, 0], labels, labels, "head 0")
    assert [t.get_text() for t in one.axes[0].get_xticklabels()] == labels
    assert np.allclose(np.asarray(one.axes[0].images[0].get_array()), weights[0, 0])
    grid = plot_head_grid(weights[0], labels)
    assert [ax.get_title() for ax in grid.axes] == ["head 0", "head 1", "head 2", "head 3"]
    contrast = plot_average_contrast(weights[0], labels)
    assert contrast.axes[-1].get_title() == "average of heads"
    assert np.allclose(np.asarray(contrast.axes[-1].images[0].get_array()), weights[0].mean(axis=0))
    split = plot_split_layouts(split_layout(4, 8, 2, "correct"), split_layout(4, 8, 2, "wrong"), 2)
    assert len(split.axes) == 2
    with pytest.raises(ValueError, match="one label per position"):
        plot_head_map(weights[0, 0], labels[:3], labels, "")
    with pytest.raises(ValueError, match="one entry per head"):
        plot_head_grid(weights[0], labels, titles=["a"])
    plt.close("all")


def test_lesson_04_never_imports_torch_or_trains() -> None:
    import json

    path = Path(__file__).resolve().parents[1] / "notebooks" / "04_inspecting_heads.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "torch" not in code and "train(" not in code
