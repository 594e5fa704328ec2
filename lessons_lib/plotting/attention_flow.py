"""Lesson 01 pictures: one head's attention weights as a heatmap, and its data flow with shapes.

`plot_weights` draws a ``(T, S)`` weight matrix with the masked cells hatched; `flow_shapes` reads
the shape of every stage of one head from the lesson's arrays and `plot_head_flow` draws those
stages as boxes and arrows, naming the two streams as the lesson does: the ``target`` gives the
queries, the ``source`` the keys and values (for self-attention both are the same array). Each
``plot_*`` function returns the figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch, Rectangle
from numpy.typing import NDArray

__all__ = ["FLOW_STAGES", "flow_shapes", "plot_head_flow", "plot_weights"]

WEIGHT_CMAP = "viridis"
MASKED_COLOUR = "#d9d9d9"

# Stage names of one head, in the order data flows through it (the keys of `flow_shapes`).
FLOW_STAGES = (
    "x_query", "x_source", "W_q", "W_k", "W_v", "Q", "K", "V", "scores", "weights", "output"
)


def _check_matrix(name: str, array: NDArray[np.generic], layout: str) -> None:
    """``TypeError`` unless ``array`` is a NumPy array, ``ValueError`` unless it has two axes."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array {layout}, got {type(array).__name__}")
    if array.ndim != 2:
        raise ValueError(f"{name} must have 2 axes, laid out as {layout}; got shape {array.shape}")


def _position_labels(labels: Sequence[str] | None, size: int, name: str) -> list[str]:
    if labels is None:
        return [str(i) for i in range(size)]
    if len(labels) != size:
        raise ValueError(f"{name} must have one label per position ({size}), got {len(labels)}")
    return [str(label) for label in labels]


def plot_weights(
    weights: NDArray[np.floating],
    allowed: NDArray[np.bool_] | None = None,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str = "attention weights",
) -> Figure:
    """Heatmap of ``weights (T, S)``: row ``t`` is query ``t``'s distribution over the sources.

    Cells where ``allowed (T, S)`` is False are drawn grey and hatched instead of coloured, so a
    masked 0 cannot be mistaken for a weight that merely came out small. Every cell shows its
    weight to two decimals. Labels default to the positions ``0 .. T-1`` and ``0 .. S-1``.
    """
    _check_matrix("weights", weights, "(T, S)")
    T, S = weights.shape
    if allowed is not None:
        _check_matrix("allowed", allowed, "(T, S)")
        if allowed.shape != weights.shape:
            raise ValueError(f"allowed must have the shape of weights {weights.shape}, got {allowed.shape}")
    rows = _position_labels(query_labels, T, "query_labels")
    cols = _position_labels(key_labels, S, "key_labels")
    mask = np.zeros((T, S), dtype=bool) if allowed is None else ~allowed.astype(bool)

    fig, ax = plt.subplots(figsize=(1.2 + 0.75 * S, 1.0 + 0.65 * T), layout="constrained")
    shown = np.where(mask, np.nan, weights)  # NaN cells are left blank by imshow, then hatched
    image = ax.imshow(shown, cmap=WEIGHT_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest")
    for t, s in zip(*np.nonzero(mask), strict=True):
        ax.add_patch(
            Rectangle((s - 0.5, t - 0.5), 1, 1, facecolor=MASKED_COLOUR, edgecolor="grey", hatch="//", lw=0)
        )
    for t in range(T):
        for s in range(S):
            if not mask[t, s]:
                colour = "black" if weights[t, s] > 0.6 else "white"
                ax.text(s, t, f"{weights[t, s]:.2f}", ha="center", va="center", fontsize=9, color=colour)
    ax.set_xticks(range(S), cols)
    ax.set_yticks(range(T), rows)
    ax.set_xlabel("source position s (key)")
    ax.set_ylabel("query t")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="weight (each row sums to 1)", shrink=0.9)
    if mask.any():
        masked = Patch(facecolor=MASKED_COLOUR, edgecolor="grey", hatch="//", label="masked: weight exactly 0")
        ax.legend(handles=[masked], loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False, fontsize=9)
    return fig


def flow_shapes(
    x_query: NDArray[np.floating],
    x_source: NDArray[np.floating],
    w_q: NDArray[np.floating],
    w_k: NDArray[np.floating],
    w_v: NDArray[np.floating],
) -> dict[str, tuple[int, ...]]:
    """The shape of every stage of one head, read from its inputs (keys: `FLOW_STAGES`).

    ``x_query (T, D)`` gives the queries, ``x_source (S, D)`` the keys and values (pass the same
    array twice for self-attention); ``w_q (D, d)``, ``w_k (D, d)``, ``w_v (D, d_v)``.
    """
    for name, array, layout in [
        ("x_query", x_query, "(T, D)"), ("x_source", x_source, "(S, D)"),
        ("w_q", w_q, "(D, d)"), ("w_k", w_k, "(D, d)"), ("w_v", w_v, "(D, d_v)"),
    ]:
        _check_matrix(name, array, layout)
    (T, D), S = x_query.shape, x_source.shape[0]
    for name, array in [("x_source", x_source), ("w_q", w_q), ("w_k", w_k), ("w_v", w_v)]:
        width = array.shape[1] if name == "x_source" else array.shape[0]
        if width != D:
            raise ValueError(f"{name} must have D={D} (the width of x_query) on its input axis, got {array.shape}")
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            f"w_q and w_k must give queries and keys the same width d, got {w_q.shape[1]} and {w_k.shape[1]}"
        )
    d, d_v = w_q.shape[1], w_v.shape[1]
    return {
        "x_query": (T, D), "x_source": (S, D), "W_q": (D, d), "W_k": (D, d), "W_v": (D, d_v),
        "Q": (T, d), "K": (S, d), "V": (S, d_v), "scores": (T, S), "weights": (T, S), "output": (T, d_v),
    }


# Where each stage's box sits (centre x, centre y in inches on the diagram's axes) and the arrows
# between stages (from a side of one box to a side of another). Three columns: the inputs; Q, K and V;
# then scores, weights and output stacked in the rows of Q, K and V, so the figure is 7.6 inches wide.
_BOXES: dict[str, tuple[float, float, str]] = {
    "x_query": (0.85, 2.85, "target"),
    "x_source": (0.85, 1.2, "source"),
    "Q": (3.75, 2.85, "Q = target W_q"),
    "K": (3.75, 1.75, "K = source W_k"),
    "V": (3.75, 0.55, "V = source W_v"),
    "scores": (6.7, 2.85, "scores\nQ K^T / sqrt(d)"),
    "weights": (6.7, 1.75, "weights\nsoftmax over S"),
    "output": (6.7, 0.55, "output\nweights @ V"),
}
_HALF_WIDTH, _HALF_HEIGHT = 0.8, 0.31
_DIAGRAM_SIZE = (7.6, 3.4)  # the axes, in inches; the figure adds room for the title and the caption
_ARROWS = [
    ("x_query", "right", "Q", "left", "W_q"), ("x_source", "right", "K", "left", "W_k"),
    ("x_source", "right", "V", "left", "W_v"), ("Q", "right", "scores", "left", ""),
    ("K", "right", "scores", "left", ""), ("scores", "bottom", "weights", "top", ""),
    ("weights", "bottom", "output", "top", ""), ("V", "right", "output", "left", ""),
]
_BOX_COLOURS = {"x_query": "#e8e8e8", "x_source": "#e8e8e8", "Q": "#cfe2f3", "K": "#d9ead3", "V": "#fce5cd",
                "scores": "#ead1dc", "weights": "#ead1dc", "output": "#fff2cc"}
_FONT = 10.0


def _side(name: str, side: str) -> tuple[float, float]:
    """The middle of one side of a stage's box, just outside its rounded edge."""
    x, y, _ = _BOXES[name]
    gap = 0.06
    return {"left": (x - _HALF_WIDTH - gap, y), "right": (x + _HALF_WIDTH + gap, y),
            "top": (x, y + _HALF_HEIGHT + gap), "bottom": (x, y - _HALF_HEIGHT - gap)}[side]


def _shape_text(shape: tuple[int, ...], names: str) -> str:
    return f"{names} = ({', '.join(str(n) for n in shape)})"


def _draw_box(ax: Axes, x: float, y: float, text: str, colour: str) -> None:
    ax.add_patch(FancyBboxPatch((x - _HALF_WIDTH, y - _HALF_HEIGHT), 2 * _HALF_WIDTH, 2 * _HALF_HEIGHT,
                                boxstyle="round,pad=0.03", facecolor=colour, edgecolor="black"))
    ax.text(x, y, text, ha="center", va="center", fontsize=_FONT)


def plot_head_flow(
    x_query: NDArray[np.floating],
    x_source: NDArray[np.floating],
    w_q: NDArray[np.floating],
    w_k: NDArray[np.floating],
    w_v: NDArray[np.floating],
    title: str = "one attention head: data flow and shapes",
) -> Figure:
    """Boxes and arrows ``x -> (W_q, W_k, W_v) -> Q, K, V -> scores -> softmax -> weights @ V``.

    Three columns: the inputs, then Q, K and V, then scores, weights and output from top to bottom
    (the output in V's row). Every box states the shape of its array as `flow_shapes` reads it from the given arrays.
    """
    shapes = flow_shapes(x_query, x_source, w_q, w_k, w_v)
    symbols = {"x_query": "(T, D)", "x_source": "(S, D)", "Q": "(T, d)", "K": "(S, d)", "V": "(S, d_v)",
               "scores": "(T, S)", "weights": "(T, S)", "output": "(T, d_v)"}
    width, height = _DIAGRAM_SIZE
    fig = plt.figure(figsize=(width, height + 1.0))
    ax = fig.add_axes((0.0, 0.45 / (height + 1.0), 1.0, height / (height + 1.0)))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    for name, (x, y, label) in _BOXES.items():
        text = f"{label}\n{_shape_text(shapes[name], symbols[name])}"
        _draw_box(ax, x, y, text, _BOX_COLOURS[name])
    for start, start_side, end, end_side, weight_name in _ARROWS:
        (x0, y0), (x1, y1) = _side(start, start_side), _side(end, end_side)
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops={"arrowstyle": "->", "color": "black", "lw": 1.2})
        if weight_name:  # the projection's name and shape, on a white patch in the middle of its arrow
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{weight_name} {shapes[weight_name]}", ha="center",
                    va="center", fontsize=_FONT, bbox={"facecolor": "white", "lw": 0, "pad": 1})
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("data flows left to right, then down; T queries, S source positions, D input width", fontsize=_FONT)
    return fig
