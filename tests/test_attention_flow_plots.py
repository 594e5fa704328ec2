"""Lesson 01's figures: the weight heatmap and the data flow of one head draw what they are given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from collections.abc import Iterator

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.plotting import attention_flow


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def causal_weights(T: int, S: int, seed: int = 0) -> tuple[NDArray[np.floating], NDArray[np.bool_]]:
    rng = np.random.default_rng(seed)
    allowed = mha_numpy.causal_mask(T, S)
    _, weights = mha_numpy.attention(rng.normal(size=(T, 4)), rng.normal(size=(S, 4)), rng.normal(size=(S, 2)), allowed)
    return weights, allowed


def the_image(fig: Figure) -> AxesImage:
    images = [image for ax in fig.axes for image in ax.get_images()]
    assert len(images) == 1
    return images[0]


def image_data(fig: Figure) -> NDArray[np.float64]:
    """The heatmap's pixel values, NaN where nothing is coloured."""
    return np.asarray(the_image(fig).get_array(), dtype=np.float64)


def hatched_cells(fig: Figure) -> set[tuple[int, int]]:
    """(t, s) of every hatched rectangle on the heatmap's axes."""
    ax = fig.axes[0]
    return {
        (round(p.get_y() + 0.5), round(p.get_x() + 0.5))
        for p in ax.patches
        if isinstance(p, Rectangle) and p.get_hatch()
    }


@pytest.mark.parametrize(("T", "S"), [(4, 4), (2, 5), (3, 6)])
def test_heatmap_shows_the_weights_and_hatches_the_masked_cells(T: int, S: int) -> None:
    weights, allowed = causal_weights(T, S)
    fig = attention_flow.plot_weights(weights, allowed, title="my title")
    assert isinstance(fig, Figure)
    data = image_data(fig)
    assert np.allclose(data[allowed], weights[allowed])
    assert np.isnan(data[~allowed]).all(), "masked cells must not be coloured like a weight of 0"
    assert hatched_cells(fig) == {(int(t), int(s)) for t, s in np.argwhere(~allowed)}
    ax = fig.axes[0]
    assert ax.get_title() == "my title"
    assert ax.get_xlabel() and ax.get_ylabel()
    assert the_image(fig).colorbar is not None, "colour carries the weight: a colour bar is needed"
    assert ax.get_legend() is not None, "the hatching must be explained"
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == sorted(f"{w:.2f}" for w in weights[allowed])
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(s) for s in range(S)]


def test_heatmap_without_a_mask_has_no_hatching_and_takes_labels() -> None:
    weights = mha_numpy.softmax(np.random.default_rng(1).normal(size=(3, 4)), axis=-1)
    fig = attention_flow.plot_weights(weights, query_labels=["a", "b", "c"], key_labels=["w", "x", "y", "z"])
    assert hatched_cells(fig) == set()
    assert fig.axes[0].get_legend() is None
    assert np.allclose(image_data(fig), weights)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["w", "x", "y", "z"]


def test_heatmap_rejects_bad_arguments() -> None:
    weights, allowed = causal_weights(3, 5)
    with pytest.raises(ValueError, match=r"weights must have 2 axes"):
        attention_flow.plot_weights(weights[0])
    with pytest.raises(ValueError, match=r"allowed must have the shape of weights \(3, 5\), got \(3, 4\)"):
        attention_flow.plot_weights(weights, allowed[:, :4])
    with pytest.raises(ValueError, match=r"key_labels must have one label per position \(5\), got 2"):
        attention_flow.plot_weights(weights, key_labels=["a", "b"])
    with pytest.raises(TypeError, match=r"weights must be a NumPy array"):
        attention_flow.plot_weights(weights.tolist())


@pytest.mark.parametrize(("T", "S", "D", "d", "d_v"), [(3, 5, 4, 4, 4), (1, 7, 6, 2, 3), (4, 4, 8, 5, 1)])
def test_flow_shapes_match_what_one_head_computes(T: int, S: int, D: int, d: int, d_v: int) -> None:
    rng = np.random.default_rng(T + S + D)
    x_q, x_s = rng.normal(size=(T, D)), rng.normal(size=(S, D))
    w_q, w_k, w_v = rng.normal(size=(D, d)), rng.normal(size=(D, d)), rng.normal(size=(D, d_v))
    shapes = attention_flow.flow_shapes(x_q, x_s, w_q, w_k, w_v)
    assert tuple(shapes) == attention_flow.FLOW_STAGES
    q, k, v = x_q @ w_q, x_s @ w_k, x_s @ w_v
    out, weights = mha_numpy.attention(q, k, v)
    computed = {
        "x_query": x_q.shape, "x_source": x_s.shape, "W_q": w_q.shape, "W_k": w_k.shape, "W_v": w_v.shape,
        "Q": q.shape, "K": k.shape, "V": v.shape, "scores": (q @ k.T).shape, "weights": weights.shape,
        "output": out.shape,
    }
    assert shapes == computed


def test_flow_shapes_rejects_arrays_that_do_not_fit_together() -> None:
    rng = np.random.default_rng(0)
    x_q, x_s = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    w = rng.normal(size=(4, 4))
    with pytest.raises(ValueError, match=r"w_q and w_k must give queries and keys the same width d, got 4 and 3"):
        attention_flow.flow_shapes(x_q, x_s, w, w[:, :3], w)
    with pytest.raises(ValueError, match=r"x_source must have D=4"):
        attention_flow.flow_shapes(x_q, rng.normal(size=(5, 6)), w, w, w)
    with pytest.raises(ValueError, match=r"w_v must have D=4"):
        attention_flow.flow_shapes(x_q, x_s, w, w, rng.normal(size=(3, 2)))
    with pytest.raises(ValueError, match=r"x_query must have 2 axes"):
        attention_flow.flow_shapes(x_q[None], x_s, w, w, w)


def test_flow_figure_writes_the_shapes_of_the_arrays_it_is_given() -> None:
    rng = np.random.default_rng(2)
    T, S, D, d, d_v = 3, 7, 6, 2, 5  # all different, so a hard-coded shape would show
    x_q, x_s = rng.normal(size=(T, D)), rng.normal(size=(S, D))
    fig = attention_flow.plot_head_flow(
        x_q, x_s, rng.normal(size=(D, d)), rng.normal(size=(D, d)), rng.normal(size=(D, d_v)), title="flow"
    )
    ax = fig.axes[0]
    text = "\n".join(t.get_text() for t in ax.texts)
    for expected in ["(T, D) = (3, 6)", "(S, D) = (7, 6)", "(T, d) = (3, 2)", "(S, d) = (7, 2)",
                     "(S, d_v) = (7, 5)", "(T, S) = (3, 7)", "(T, d_v) = (3, 5)", "W_v (6, 5)", "W_q (6, 2)"]:
        assert expected in text, expected
    assert ax.get_title() == "flow"
    assert ax.get_xlabel()
    arrows = [child for child in ax.texts if getattr(child, "arrow_patch", None) is not None]
    assert len(arrows) == 8
