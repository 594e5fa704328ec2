"""Lesson 09 widget and pictures: the functions behind `InductionExplorer`, the widget driven through
``.controls[...].value``, and the lesson's plotting functions (their data and their errors).

The interface the widget shares with every other lesson widget is checked in test_head_widgets.py.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from lessons_lib import induction
from lessons_lib.induction import InductionModel
from lessons_lib.mha_numpy import softmax
from lessons_lib.plotting import induction_maps, residual_stream
from lessons_lib.widgets.base import readout_html
from lessons_lib.widgets.induction_widgets import (
    TYPED,
    InductionExplorer,
    example_sequences,
    next_token_view,
    parse_tokens,
)


@pytest.fixture(scope="module")
def model() -> InductionModel:
    return induction.load_induction_model()


# ----- the plain functions ------------------------------------------------------------------------
def test_parse_tokens() -> None:
    assert parse_tokens("3 14, 15", 32, 23) == [3, 14, 15]
    with pytest.raises(ValueError, match=r"'x' is not a token id: write whole numbers 0 \.\. 31"):
        parse_tokens("3 x", 32, 23)
    with pytest.raises(ValueError, match=r"'-1' is not a token id"):
        parse_tokens("3 -1", 32, 23)
    with pytest.raises(ValueError, match=r"give 2 to 23 tokens .* got 1"):
        parse_tokens("3", 32, 23)
    with pytest.raises(ValueError, match=r"give 2 to 23 tokens .* got 24"):
        parse_tokens(" ".join(["1"] * 24), 32, 23)
    with pytest.raises(ValueError, match=r"token ids go from 0 to 31, got 32"):
        parse_tokens("1 32", 32, 23)


def test_example_sequences(model: InductionModel) -> None:
    examples = example_sequences(model)
    c = model.config
    assert list(examples) == ["repeat", "random", "short", "gap"]
    for label, ids in examples.values():
        assert len(ids) == c.context and all(0 <= i < c.vocab for i in ids) and label
    repeat = examples["repeat"][1]
    assert repeat[: c.half - 1] == repeat[c.half : 2 * c.half - 1]
    assert len(set(examples["random"][1])) == c.context  # nothing repeats
    short = examples["short"][1]
    assert short[:6] == short[6:12] == short[12:18] and len(set(short[:6])) == 6
    gap = examples["gap"][1]
    assert gap[:7] == gap[-7:] and not set(gap[7:-7]) & set(gap[:7])


def test_next_token_view_is_the_model(model: InductionModel) -> None:
    ids = example_sequences(model)["repeat"][1]
    view = next_token_view(model, ids, 1, 2)
    tokens = np.array([ids])
    logits, weights = induction.run(model, tokens)
    ablated, _ = induction.run(model, tokens, ablate=[(1, 2)])
    probs, probs_ablated = softmax(logits[0]), softmax(ablated[0])
    n = len(ids)
    np.testing.assert_array_equal(view["map"], weights[1][0, 2])
    assert view["predicted"] == probs.argmax(axis=-1).tolist()
    assert view["predicted_ablated"] == probs_ablated.argmax(axis=-1).tolist()
    np.testing.assert_allclose(view["p_next"], probs[np.arange(n - 1), ids[1:]])
    np.testing.assert_allclose(view["p_next_ablated"], probs_ablated[np.arange(n - 1), ids[1:]])
    assert view["loss"] == pytest.approx(-np.log(view["p_next"]).mean())
    targets = induction.induction_targets(np.array(ids))
    has = np.flatnonzero(targets >= 0)
    assert view["copies"] == len(has) == c_half_minus_one(model)
    assert view["induction_weight"] == pytest.approx(weights[1][0, 2][has, targets[has]].mean())
    # the shipped model's induction head on the repeat: the lesson's claim, on one sequence
    assert view["induction_weight"] > 0.7 and view["loss_ablated"] > view["loss"]


def c_half_minus_one(model: InductionModel) -> int:
    return model.config.context - model.config.half  # positions L .. 2L-2 have an earlier copy


def test_next_token_view_without_a_repeat(model: InductionModel) -> None:
    view = next_token_view(model, example_sequences(model)["random"][1], 0, 1)
    assert view["copies"] == 0 and np.isnan(view["induction_weight"])


# ----- the widget -----------------------------------------------------------------------------------
def test_explorer_starts_on_the_repeat(model: InductionModel) -> None:
    explorer = InductionExplorer(model, layer=1, head=2)
    d = explorer.data
    assert d["sequence"] == "repeat" and d["ids"] == example_sequences(model)["repeat"][1]
    assert d["tokens"] == " ".join(map(str, d["ids"])) and d["error"] is None
    assert d["labels"] == [str(i) for i in d["ids"]]
    assert "Layer 1, head 2" in d["readout"] and explorer.readout.value == readout_html(d["readout"], None, d["alt"])
    assert repr(explorer).startswith("InductionExplorer(sequence='repeat', tokens='")
    assert InductionExplorer(model).data["layer"] == model.config.layers - 1  # default: the last layer


def test_explorer_follows_every_control(model: InductionModel) -> None:
    explorer = InductionExplorer(model, layer=1, head=2)
    explorer.controls["head"].value = 3
    explorer.controls["layer"].value = 0
    d = explorer.data
    assert (d["layer"], d["head"]) == (0, 3)
    np.testing.assert_array_equal(d["map"], next_token_view(model, d["ids"], 0, 3)["map"])
    explorer.controls["sequence"].value = "gap"
    gap = example_sequences(model)["gap"][1]
    assert explorer.data["ids"] == gap and explorer.controls["tokens"].value == " ".join(map(str, gap))
    explorer.controls["tokens"].value = "5 17 3 28 9 5 17 3"
    d = explorer.data
    assert d["sequence"] == TYPED and explorer.controls["sequence"].value == TYPED
    assert d["ids"] == [5, 17, 3, 28, 9, 5, 17, 3] and d["map"].shape == (8, 8) and d["p_next"].shape == (7,)
    explorer.controls["sequence"].value = "repeat"  # back from typed: the box is filled in again
    assert explorer.data["ids"] == example_sequences(model)["repeat"][1]


def test_explorer_keeps_the_last_good_tokens_and_says_why(model: InductionModel) -> None:
    explorer = InductionExplorer(model)
    explorer.controls["tokens"].value = "1 2 3 1 2"
    explorer.controls["tokens"].value = "1 2 forty"
    d = explorer.data
    assert d["ids"] == [1, 2, 3, 1, 2]
    assert d["error"] is not None and "'forty' is not a token id" in d["error"]
    assert d["error"].startswith("Could not read '1 2 forty': ")
    # The box shows the tokens the chart shows (not the bad entry), and the error is its own marked line.
    assert explorer.controls["tokens"].value == "1 2 3 1 2" and d["tokens"] == "1 2 3 1 2"
    shown = explorer.readout.value
    assert shown.startswith('<p role="alert"') and "&#x27;forty&#x27; is not a token id" in shown
    assert shown.index("</p>") < shown.index("Layer "), "the error comes first, on a line of its own"
    explorer.controls["layer"].value = 0  # another control: the error is gone, the tokens stay
    assert explorer.data["error"] is None and explorer.data["ids"] == [1, 2, 3, 1, 2]
    assert 'role="alert"' not in explorer.readout.value


def test_explorer_controls_fit_their_text(model: InductionModel) -> None:
    """The token box holds a whole sequence and every dropdown its longest option (issue 21)."""
    explorer = InductionExplorer(model)
    longest = max(len(" ".join(map(str, ids))) for _, ids in example_sequences(model).values())
    box_em = float(explorer.controls["tokens"].layout.width.removesuffix("em"))
    description = len(explorer.controls["tokens"].description)
    assert 0.6 * (longest + description) <= box_em, f"{box_em} em for {longest} characters of tokens"
    for control in explorer.controls.values():
        if isinstance(control, widgets.Dropdown):
            width = float(control.layout.width.removesuffix("em"))
            option = max(len(label) for label, _ in control.options)
            assert 0.55 * (option + len(control.description)) + 3 <= width, control.description


def test_explorer_constructor_errors(model: InductionModel) -> None:
    with pytest.raises(ValueError, match=r"layer must be in 0 \.\. 1 and head in 0 \.\. 3, got 2, 0"):
        InductionExplorer(model, layer=2)
    with pytest.raises(ValueError, match=r"got 1, 4"):
        InductionExplorer(model, layer=1, head=4)


def test_explorer_picture_follows_the_sequence(model: InductionModel) -> None:
    explorer = InductionExplorer(model)
    explorer.controls["tokens"].value = "1 2 3 1"
    labels = [t.get_text() for t in explorer._map_ax.get_xticklabels()]
    assert labels == ["1", "2", "3", "1"]
    assert [*explorer._map_ax.get_xlim(), *explorer._map_ax.get_ylim()] == [-0.5, 3.5, 3.5, -0.5]  # the map, 4 x 4
    cells = np.asarray(explorer._map.get_array(), dtype=float)  # a mesh with room for the longest sequence
    np.testing.assert_array_equal(cells[:4, :4], explorer.data["map"])
    assert np.isnan(cells[4:]).all() and np.isnan(cells[:, 4:]).all()  # the rest: empty, out of sight
    x, y = explorer._whole.get_data()
    np.testing.assert_array_equal(np.asarray(y, dtype=float), explorer.data["p_next"])
    assert len(np.asarray(x)) == 3


# ----- the pictures ---------------------------------------------------------------------------------
def box_texts(fig: Figure) -> dict[str, str]:
    return {str(t.get_gid()): t.get_text() for t in fig.axes[0].texts if t.get_gid()}


def test_residual_stream_boxes_come_from_the_sizes() -> None:
    fig = residual_stream.plot_residual_stream(8, 2, 32)
    texts = box_texts(fig)
    assert texts == residual_stream.block_labels(8, 2, 32)
    assert "W_q[:, 4:8],\nW_k[:, 4:8], W_v[:, 4:8]" in texts["head 1"] and "W_o[4:8, :]" in texts["head 1"]
    assert "D=8 -> F=32 -> D" in texts["ffn"] and "x (B, T, D=8)" in texts["embed"]
    assert sum(isinstance(p, FancyBboxPatch) for p in fig.axes[0].patches) == 7  # embed, out, 2 norms, 2 heads, ffn
    plt.close(fig)


def test_residual_stream_with_many_heads_draws_a_gap() -> None:
    assert residual_stream.shown_heads(4) == [0, 1, 2, 3]
    assert residual_stream.shown_heads(16) == [0, 1, 2, None, 15]
    fig = residual_stream.plot_residual_stream(64, 16, 256)
    texts = box_texts(fig)
    assert "head 15" in texts and "head 3" not in texts and "W_o[60:64, :]" in texts["head 15"]
    assert any(t.get_text() == "..." for t in fig.axes[0].texts)
    plt.close(fig)
    with pytest.raises(ValueError, match="not divisible by heads"):
        residual_stream.block_labels(10, 4, 8)


def test_induction_pictures_draw_their_data() -> None:
    loss = np.linspace(3.5, 0.1, 7)
    fig = induction_maps.plot_loss_per_position(loss, 4, np.log(32))
    np.testing.assert_allclose(np.asarray(fig.axes[0].lines[0].get_ydata(), dtype=float), loss)
    plt.close(fig)
    weights = [np.tile(np.eye(5), (3, 1, 1)), np.tile(np.eye(5, k=-1), (3, 1, 1))]
    prev, ind = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]), np.zeros((2, 3))
    fig = induction_maps.plot_head_maps(weights, list("abcde"), prev, ind)
    assert [ax.get_title() for ax in fig.axes[:3]][1] == "layer 0 head 1\nprev 0.20  ind 0.00"
    np.testing.assert_array_equal(fig.axes[4].images[0].get_array(), np.eye(5, k=-1))
    plt.close(fig)
    with pytest.raises(ValueError, match=r"previous must have shape \(layers, h\) = \(2, 3\)"):
        induction_maps.plot_head_maps(weights, list("abcde"), prev[:1], ind)
    table = np.array([[0.1, 2.8], [1.7, 0.1]])
    fig = induction_maps.plot_ablation(table, 0.1)
    assert [t.get_text() for t in fig.axes[0].texts] == ["0.10", "2.80", "1.70", "0.10"]
    plt.close(fig)
    fig = induction_maps.plot_composition({"intact": np.array([0.1, 0.8]), "hidden": np.array([0.0, 0.2])}, [1])
    assert [p.get_height() for p in fig.axes[0].patches if isinstance(p, Rectangle)] == [0.8, 0.2]
    plt.close(fig)
    with pytest.raises(ValueError, match=r"loss must have 1 axis, laid out as \(positions,\)"):
        induction_maps.plot_loss_per_position(np.zeros((2, 2)), 1, 1.0)


# ----- issue 28: immediate repeats, the repeated half's loss, the dropdown after a bad entry ---------
def test_an_immediate_repeat_is_not_an_induction_hit(model: InductionModel) -> None:
    view = next_token_view(model, [7, 7], 1, 2)
    assert view["copies"] == 0 and np.isnan(view["induction_weight"]) and view["self_targets"] == 1
    zeros = next_token_view(model, [0] * 8, 1, 2)
    assert zeros["copies"] == 0 and zeros["self_targets"] == 7
    explorer = InductionExplorer(model, layer=1, head=2)
    explorer.controls["tokens"].value = "7 7"
    readout = explorer.data["readout"]
    assert "1 immediate repeat left out" in readout and "after the earlier copy 0.50" not in readout
    assert "1 known next token:" in readout  # singular, not "1 known next tokens"
    # A repeat after a gap is still counted: position 3 (token 7) looks for position 1 (token 8).
    mixed = next_token_view(model, [7, 8, 9, 7], 1, 2)
    assert mixed["copies"] == 1
    assert mixed["induction_weight"] == pytest.approx(mixed["map"][3, 1])


def test_the_repeated_half_loss_is_shown_beside_the_whole_sequence(model: InductionModel) -> None:
    explorer = InductionExplorer(model, layer=1, head=2)
    d = explorer.data
    ids = d["ids"]
    seen = [k for k in range(len(ids) - 1) if ids[k] in ids[:k]]
    assert seen == list(range(model.config.half, len(ids) - 1))  # the repeated half, L .. 2L-2
    assert d["seen"] == len(seen)
    assert d["loss_seen"] == pytest.approx(-np.log(d["p_next"][seen]).mean())
    assert d["loss_seen"] < 0.2 < 1.5 < d["loss"]  # the repeated half is easy, the whole sequence is not
    assert f"whose token appeared before (a repeat): {d['loss_seen']:.2f}" in d["readout"]
    assert f"whole sequence, 22 known next tokens: {d['loss']:.2f}" in d["readout"]
    explorer.controls["sequence"].value = "random"
    assert np.isnan(explorer.data["loss_seen"]) and "a repeat)" not in explorer.data["readout"]


def test_a_bad_entry_puts_the_dropdown_back(model: InductionModel) -> None:
    explorer = InductionExplorer(model)
    explorer.controls["sequence"].value = "gap"
    explorer.controls["tokens"].value = "xyz"
    d = explorer.data
    assert d["ids"] == example_sequences(model)["gap"][1] and d["error"] is not None
    assert explorer.controls["sequence"].value == "gap" and d["sequence"] == "gap"
    explorer.controls["tokens"].value = "1 2 3 1 2"
    explorer.controls["tokens"].value = "1 2 oops"
    assert explorer.controls["sequence"].value == TYPED and explorer.data["ids"] == [1, 2, 3, 1, 2]


def test_parse_tokens_refuses_non_ascii_digits_and_quotes_briefly() -> None:
    for text in ("\u00b2", "\uff13 4 5"):  # a superscript 2, a full-width 3
        with pytest.raises(ValueError, match="is not a token id"):
            parse_tokens(text, 32, 23)
    with pytest.raises(ValueError) as caught:
        parse_tokens("abcdefghijklmnopqrstuvwxyz 1", 32, 23)
    assert "'abcdefghijkl'" in str(caught.value)
