"""lessons_lib.inspect_heads: loading the shipped layer, per-head maps, re-slicing, split layouts, costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle
from numpy.typing import NDArray

from lessons_lib.inspect_heads import (
    EVAL_SEED,
    RELATIONSHIPS,
    ToyHeads,
    argmax_shares,
    attention_cost,
    average_over_heads,
    column_blocks,
    embed,
    features_per_head,
    head_behaviour,
    head_columns,
    head_maps,
    head_options,
    head_parts,
    head_roles,
    load_head_count_comparison,
    load_toy_heads,
    predict,
    run_layer,
    split_layout,
    target_accuracy,
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
    assert [ax.get_title() for ax in grid.axes[:-1]] == ["head 0", "head 1", "head 2", "head 3"]  # then the bar
    contrast = plot_average_contrast(weights[0], labels)
    assert contrast.axes[-2].get_title() == "average of heads"  # the last axes is the colour bar
    assert np.allclose(np.asarray(contrast.axes[-2].images[0].get_array()), weights[0].mean(axis=0))
    split = plot_split_layouts(split_layout(4, 8, 2, "correct"), split_layout(4, 8, 2, "wrong"), 2)
    assert len(split.axes) == 3  # two layouts and their colour bar
    with pytest.raises(ValueError, match="one label per position"):
        plot_head_map(weights[0, 0], labels[:3], labels, "")
    with pytest.raises(ValueError, match="one entry per head"):
        plot_head_grid(weights[0], labels, titles=["a"])
    plt.close("all")


def test_lesson_05_never_imports_torch_or_trains() -> None:
    import json

    path = Path(__file__).resolve().parents[1] / "notebooks" / "05_inspecting_heads.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "torch" not in code and "train(" not in code


def _colorbars(fig: Figure) -> list[tuple[AxesImage, Colorbar]]:
    """Each image of ``fig`` that has a colour bar, with its bar."""
    return [(image, image.colorbar) for ax in fig.axes for image in ax.images if image.colorbar is not None]


def test_every_heatmap_has_a_colour_bar(model) -> None:  # type: ignore[no-untyped-def]
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
    weights = run_layer(model, tokens)[1][0]  # (h, T, S)
    labels = model.labels(tokens[0])
    for fig in (plot_head_map(weights[0], labels, labels), plot_head_grid(weights, labels)):
        ((image, bar),) = _colorbars(fig)
        assert bar.ax.get_ylabel() == "attention weight"
        assert image.get_clim() == (0.0, 1.0)  # one scale, shared by every panel
        assert all(other.get_clim() == (0.0, 1.0) for ax in fig.axes for other in ax.images)
    contrast = plot_average_contrast(weights, labels)
    assert len(_colorbars(contrast)) == 1 and len(contrast.axes) == weights.shape[0] + 2
    split = plot_split_layouts(split_layout(4, 8, 4, "correct"), split_layout(4, 8, 4, "wrong"), 4)
    ((_, bar),) = _colorbars(split)
    assert bar.ax.get_ylabel() == "head"
    assert list(bar.get_ticks()) == [0, 1, 2, 3]  # only the heads that exist
    plt.close("all")


# ----- the shipped one-head-vs-four-heads comparison ------------------------------------------
def test_comparison_loads_with_consistent_shapes() -> None:
    shipped = load_head_count_comparison()
    assert shipped.head_counts == (1, 4) and shipped.targets == ("previous", "next", "marker")
    assert shipped.accuracy.shape == (2, len(shipped.seeds), 3)
    assert shipped.final_loss.shape == (2, len(shipped.seeds))
    for name in shipped.targets:
        assert [len(shipped.weight_on[name][i][0]) for i in range(2)] == [1, 4]  # one number per head
    assert shipped.config["width"] == 16 and shipped.config["optimiser"] == "Adam"


def test_comparison_loader_explains_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"run `python scripts/compare_head_counts.py`"):
        load_head_count_comparison(tmp_path / "absent.json")


def _broken_copies() -> dict[str, tuple[str, str]]:
    import json

    from lessons_lib.toy_task import COMPARISON_PATH

    good = json.loads(COMPARISON_PATH.read_text(encoding="utf-8"))
    no_runs = {key: value for key, value in good.items() if key != "runs"}
    missing_run = {**good, "runs": good["runs"][1:]}
    bad_accuracy = json.loads(json.dumps(good))
    bad_accuracy["runs"][0]["accuracy"]["next"] = 1.5
    no_target = json.loads(json.dumps(good))
    del no_target["runs"][2]["accuracy"]["marker"]
    return {
        "not json": ("{ this is not json", "not a valid head-count comparison"),
        "no runs": (json.dumps(no_runs), r"missing entry 'runs'"),
        "a run missing": (json.dumps(missing_run), r"no run for \(heads, seed\) in \[\(1, 0\)\]"),
        "accuracy above 1": (json.dumps(bad_accuracy), r"accuracies must lie in \[0, 1\]"),
        "a target missing": (json.dumps(no_target), r"missing entry 'marker'"),
        "a list, not a record": ("[1, 2, 3]", "not a valid head-count comparison"),
    }


@pytest.mark.parametrize("case", list(_broken_copies()))
def test_comparison_loader_rejects_a_malformed_file(tmp_path: Path, case: str) -> None:
    text, message = _broken_copies()[case]
    path = tmp_path / "comparison.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as caught:
        load_head_count_comparison(path)
    assert str(path) in str(caught.value)
    if "must lie" not in message:
        assert "re-run `python scripts/compare_head_counts.py`" in str(caught.value)


def test_comparison_plot_shows_the_numbers() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lessons_lib.plotting.attention_maps import plot_head_count_comparison

    shipped = load_head_count_comparison()
    fig = plot_head_count_comparison(shipped.accuracy, shipped.head_counts, 16, shipped.targets, chance=1 / 6)
    ax = fig.axes[0]
    heights = [patch.get_height() for patch in ax.patches if isinstance(patch, Rectangle)]
    assert np.allclose(heights, shipped.accuracy.mean(axis=1).ravel())  # bars: means over seeds, per head count
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(dots) == 2
    for line, per_seed in zip(dots, shipped.accuracy, strict=True):
        assert np.allclose(np.asarray(line.get_ydata()), per_seed.T.ravel())  # one dot per seed and target
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel() == "held-out accuracy"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["previous token", "next token", "marker token"]
    box = ax.get_legend()
    assert box is not None
    legend = [t.get_text() for t in box.get_texts()]
    assert "1 head of width 16 (mean)" in legend and "4 heads of width 4 (mean)" in legend
    with pytest.raises(ValueError, match="len\\(head_counts\\)"):
        plot_head_count_comparison(shipped.accuracy, (1,), 16, shipped.targets)
    with pytest.raises(ValueError, match="3 axes"):
        plot_head_count_comparison(shipped.accuracy[0], (1, 4), 16, shipped.targets)
    plt.close("all")


# ----- issue 28: each head's part of the output, where rows peak, knocking a head out ----------------
def _heads_out(model: ToyHeads, tokens: NDArray[np.int64]) -> NDArray[np.float64]:
    """The trained layer's per-head outputs ``(B, h, T, d_h)``, before ``W_o``."""
    from lessons_lib import mha_numpy

    layer, h = model.layer, model.layer.heads
    x = embed(model, tokens)
    q, k, v = (mha_numpy.split_heads(x @ w, h) for w in (layer.wq, layer.wk, layer.wv))
    out, _ = mha_numpy.attention(q, k, v)
    return np.asarray(out, dtype=np.float64)


def test_head_parts_add_up_to_pytorchs_output_projection() -> None:
    """The parts summed over the heads equal PyTorch's ``out_proj`` applied to the concatenated heads,
    and each part equals the output projection of that head alone (the other heads zeroed)."""
    torch = pytest.importorskip("torch")
    model = load_toy_heads()
    tokens, _ = make_batch(8, model.config, seed=3)
    heads_out = _heads_out(model, tokens)
    parts = head_parts(heads_out, model.layer.wo)
    B, h, T, d_h = heads_out.shape
    assert parts.shape == (B, h, T, h * d_h)
    out_proj = torch.nn.Linear(h * d_h, h * d_h, bias=False, dtype=torch.float64)
    with torch.no_grad():
        out_proj.weight.copy_(torch.from_numpy(model.layer.wo.T))  # (in, out) -> nn.Linear's (out, in)
    merged = torch.from_numpy(heads_out).transpose(1, 2).reshape(B, T, h * d_h)
    with torch.no_grad():
        assert np.allclose(parts.sum(axis=1), out_proj(merged).numpy())
        for i in range(h):
            alone = torch.zeros_like(torch.from_numpy(heads_out))
            alone[:, i] = torch.from_numpy(heads_out[:, i])
            assert np.allclose(parts[:, i], out_proj(alone.transpose(1, 2).reshape(B, T, h * d_h)).numpy())
    assert np.allclose(parts.sum(axis=1), run_layer(model, tokens)[0])


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**16))
def test_head_parts_match_a_loop_over_heads(B: int, h: int, T: int, d_h: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    heads_out, wo = rng.normal(size=(B, h, T, d_h)), rng.normal(size=(h * d_h, 7))
    loop = np.stack([heads_out[:, i] @ wo[i * d_h : (i + 1) * d_h] for i in range(h)], axis=1)
    assert np.allclose(head_parts(heads_out, wo), loop)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(2, 6), st.integers(0, 2**16))
def test_argmax_shares_match_a_loop(B: int, h: int, T: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.ones(T), size=(B, h, T))
    marker = rng.integers(0, T, size=B)
    shares = argmax_shares(weights, marker)
    assert shares.shape == (3, h) and RELATIONSHIPS == ("previous", "next", "marker")
    for i in range(h):
        peaks = [(b, t, int(weights[b, i, t].argmax())) for b in range(B) for t in range(T)]
        assert shares[0, i] == pytest.approx(np.mean([p == t - 1 for b, t, p in peaks if t >= 1]))
        assert shares[1, i] == pytest.approx(np.mean([p == t + 1 for b, t, p in peaks if t <= T - 2]))
        assert shares[2, i] == pytest.approx(np.mean([p == marker[b] for b, t, p in peaks]))


def test_what_lesson_05_says_about_peaks_and_knock_outs() -> None:
    """Section 3: by the peak, head 3 is a "next" head (0.65 of its rows), by the mean weight it is mixed;
    knocking out head 0 or 2 loses the previous or next symbol, knocking out head 3 only some markers."""
    model = load_toy_heads()
    tokens, marker = make_batch(256, model.config, seed=EVAL_SEED)
    output, weights = run_layer(model, tokens)
    shares = argmax_shares(weights, marker)
    assert head_roles(dict(zip(RELATIONSHIPS, shares, strict=True))) == ["previous", "marker", "next", "next"]
    assert head_roles(head_behaviour(weights, marker)) == ["previous", "marker", "next", "mixed"]
    assert shares[1, 3] == pytest.approx(0.65, abs=0.005)
    parts = head_parts(_heads_out(model, tokens), model.layer.wo)
    assert np.array_equal(target_accuracy(model, output, tokens, marker), [1.0, 1.0, 1.0])
    assert np.array_equal(target_accuracy(model, output, tokens, marker), (predict(model, tokens) == targets(
        tokens, marker, model.config.symbols))[:, 1:-1].mean(axis=(0, 1)))
    without = np.array([target_accuracy(model, output - parts[:, i], tokens, marker) for i in range(4)])
    assert without.round(3).tolist() == [[0.283, 1, 1], [1, 1, 0.271], [1, 0.19, 1], [1, 1, 0.882]]
