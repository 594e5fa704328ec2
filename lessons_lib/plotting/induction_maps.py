"""Lesson 09 pictures: the induction model's loss per position, every head's attention map with its
scores, the ablation table, the composition test, and the panels of the lesson's widget.

``plot_*`` functions create a figure and return it; ``draw_*`` functions draw onto given axes and
return the artists that `lessons_lib.widgets.induction_widgets` updates. The numbers come from
`lessons_lib.induction`; maps use the colour scale of `lessons_lib.plotting.attention_maps`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from numpy.typing import NDArray

from lessons_lib.plotting import MAX_FIGURE_INCHES, MIN_FONT_POINTS
from lessons_lib.plotting.attention_maps import MAP_CMAP, WEIGHT_LABEL, add_colorbar, label_step
from lessons_lib.plotting.palette import HEAD_COLOURS

__all__ = [
    "draw_next_token_panel",
    "plot_ablation",
    "plot_composition",
    "plot_head_maps",
    "plot_loss_per_position",
    "plot_ov_circuits",
    "plot_training_curve",
    "token_labels",
]

Floats = NDArray[np.floating]


def _check_axes(name: str, array: NDArray[np.generic], layout: str) -> None:
    rank = len([axis for axis in layout.strip("()").split(",") if axis.strip()])  # "(h,)" has one axis
    if np.ndim(array) != rank:
        axes = "axis" if rank == 1 else "axes"
        raise ValueError(f"{name} must have {rank} {axes}, laid out as {layout}; got shape {np.shape(array)}")


def token_labels(tokens: Sequence[int] | NDArray[np.integer]) -> list[str]:
    """Axis labels for a sequence of token ids: the ids themselves, as text."""
    return [str(int(token)) for token in tokens]


def plot_loss_per_position(
    loss: Floats, half: int, uniform: float, title: str = "", best: Floats | None = None
) -> Figure:
    """``loss (2L - 1,)``: the mean next-token loss at each position, the two halves shaded.

    ``half`` is ``L``; ``uniform`` (``ln V``, the loss of a uniform guess) is drawn dashed; ``best``
    (optional, ``(L - 1,)``), the best possible loss at positions ``0 .. L-2``, is drawn dotted.
    """
    _check_axes("loss", loss, "(positions,)")
    if best is not None:
        _check_axes("best", best, "(positions,)")
    fig, ax = plt.subplots(figsize=(7.5, 3.0), layout="constrained")
    positions = np.arange(len(loss))
    ax.axvspan(-0.5, half - 0.5, color="#eeeeee",
               label=f"first half: positions 0 .. {half - 1} ({half - 1} predicts the repeat's first token)")
    ax.plot(positions, loss, "o-", color="C0", label="model (mean over the batch)")
    ax.axhline(uniform, color="grey", linestyle="--", linewidth=1, label=f"uniform guess: ln V = {uniform:.2f}")
    if best is not None:
        ax.plot(np.arange(len(best)), best, ":", color="C2", linewidth=1.5, label="best possible: ln(V - t - 1)")
    ax.set_xlim(-0.5, len(loss) - 0.5)
    ax.set_ylim(0, max(float(np.max(loss)), uniform) * 1.1)
    ax.set_xticks(positions)
    ax.tick_params(labelsize=9)
    ax.set_xlabel("position t (the model predicts token t + 1)", fontsize=9)
    ax.set_ylabel("cross-entropy (nats)", fontsize=9)
    ax.set_title(title or "next-token loss at each position", fontsize=10)
    # Below the axes: inside, the legend would cover points the lesson asks about (position L - 1).
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2, frameon=False)
    return fig


# The layout of `plot_head_maps`, in inches: at most HEAD_MAPS_WIDTH wide, so that a lesson page
# (`PAGE_WIDTH`, 7.9 in) shows it at its own size and its 9 pt text stays 9 pt.
HEAD_MAPS_WIDTH = MAX_FIGURE_INCHES
HEADS_PER_ROW = 4  # a layer with more heads takes more rows
HEAD_MAP_LEFT = 0.6  # query positions and their axis title
HEAD_MAP_RIGHT = 0.8  # the colour bar, its ticks and its label
HEAD_MAP_GAP = 0.15  # between two maps of a row (only the first shows its query positions)
HEAD_MAP_ROW_GAP = 0.55  # between rows: a map's two-line title
HEAD_MAP_TOP = 0.9  # the figure's title (two lines) and the first row's map titles
HEAD_MAP_BOTTOM = 0.9  # key positions, their axis title and the position -> token table
LARGEST_HEAD_MAP = 2.2
TICK_FONT = MIN_FONT_POINTS


def _position_step(positions: int, side: float) -> int:
    """Label every second position of a map ``side`` inches wide, or every 4th, 5th, 10th, ... when
    the labels at `TICK_FONT` (about 0.6 em a digit, 5 pt apart) would not fit."""
    room = (len(str(positions - 1)) * 0.6 * TICK_FONT + 5) / 72  # inches from one label's centre to the next
    return label_step(side / positions, room, (2, 4, 5, 10, 20, 50, 100))


def plot_head_maps(
    weights: Sequence[Floats],
    labels: Sequence[str],
    previous: Floats,
    induction: Floats,
    title: str = "",
    half: int | None = None,
) -> Figure:
    """Every head of every layer for one sequence: ``weights[i] (h, T, T)`` is layer ``i``'s maps.

    One row of maps per layer (`HEADS_PER_ROW` at most; a layer with more heads takes more rows), in
    the width of a lesson page, and one colour bar beside them. Each panel's title gives the head's
    scores, ``previous (layers, h)`` and ``induction (layers, h)``. Axes are numbered by position (every
    second one labelled, every fourth or more when the maps are too small for that; every position has
    a tick); ``labels`` (one per position, the tokens) are printed under the maps as a position -> token
    table. With ``half`` (``L``), guides mark where a previous-token head looks (``s = t - 1``, white
    dots) and where an induction head looks in the repeated half (``s = t - L + 1``, orange dashes), so
    that both can be checked by eye.
    """
    layers, h = len(weights), int(np.shape(weights[0])[0])
    for name, scores in (("previous", previous), ("induction", induction)):
        if np.shape(scores) != (layers, h):
            raise ValueError(f"{name} must have shape (layers, h) = ({layers}, {h}), got {np.shape(scores)}")
    T = len(labels)
    columns = min(h, HEADS_PER_ROW)
    layer_rows = -(-h // columns)
    rows = layers * layer_rows
    room = HEAD_MAPS_WIDTH - HEAD_MAP_LEFT - HEAD_MAP_RIGHT - (columns - 1) * HEAD_MAP_GAP
    side = min(LARGEST_HEAD_MAP, room / columns)
    width = HEAD_MAP_LEFT + columns * side + (columns - 1) * HEAD_MAP_GAP + HEAD_MAP_RIGHT
    height = HEAD_MAP_TOP + rows * side + (rows - 1) * HEAD_MAP_ROW_GAP + HEAD_MAP_BOTTOM
    fig = plt.figure(figsize=(width, height))
    step = _position_step(T, side)
    axes: list[list[Axes]] = []
    for i in range(layers):
        _check_axes(f"weights[{i}]", weights[i], "(h, T, T)")
        if np.shape(weights[i])[-2:] != (T, T):
            raise ValueError(f"weights[{i}] must be (h, T, T) with T = len(labels) = {T}, got {np.shape(weights[i])}")
        axes.append([])
        for j in range(h):
            row, column = i * layer_rows + j // columns, j % columns
            left = HEAD_MAP_LEFT + column * (side + HEAD_MAP_GAP)
            top = HEAD_MAP_TOP + row * (side + HEAD_MAP_ROW_GAP)
            ax = fig.add_axes((left / width, 1 - (top + side) / height, side / width, side / height))
            axes[i].append(ax)
            image = ax.imshow(weights[i][j], cmap=MAP_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_title(f"layer {i} head {j}\nprev {previous[i, j]:.2f}  ind {induction[i, j]:.2f}", fontsize=9)
            ax.set_xticks(range(0, T, step))
            ax.set_yticks(range(0, T, step))
            ax.set_xticks(range(T), minor=True)
            ax.set_yticks(range(T), minor=True)
            ax.tick_params(labelsize=TICK_FONT, length=2, labelleft=column == 0, labelbottom=row == rows - 1)
            ax.tick_params(which="minor", length=1)
            if column == 0:
                ax.set_ylabel("query position t", fontsize=9)
            if row == rows - 1:
                ax.set_xlabel("key position s", fontsize=9)
            if half is not None:
                t = np.arange(1, T)
                ax.plot(t - 1, t, ":", color="white", linewidth=1.0, alpha=0.9)
                t = np.arange(half, T)
                ax.plot(t - half + 1, t, "--", color="C1", linewidth=1.0, alpha=0.9)
                ax.set_xlim(-0.5, T - 0.5)
                ax.set_ylim(T - 0.5, -0.5)
    bottom = 1 - (HEAD_MAP_TOP + rows * side + (rows - 1) * HEAD_MAP_ROW_GAP) / height  # the bar spans every row
    add_colorbar(image, axes[0][columns - 1], WEIGHT_LABEL, gap=0.12 / width, width=0.12 / width, bottom=bottom)
    cell = max(2, *(len(label) for label in labels)) + 1
    table = [
        "position " + "".join(f"{t:>{cell}}" for t in range(T)),
        "token    " + "".join(f"{x:>{cell}}" for x in labels),
    ]
    fig.text(0.5, 0.1 / height, "\n".join(table), ha="center", va="bottom", family="monospace", fontsize=9)
    guides = "\nwhite dots: s = t - 1, orange dashes: s = t - L + 1" if half is not None else ""
    default = f"attention of every head (rows: queries; prev / ind: the head's scores){guides}"
    fig.suptitle(title or default, fontsize=10, y=1 - 0.1 / height, va="top")
    return fig


def plot_ablation(table: Floats, base: float, title: str = "") -> Figure:
    """``table (layers, h)``: the repeated-half loss with each head zeroed alone; ``base``: none zeroed."""
    _check_axes("table", table, "(layers, h)")
    layers, h = table.shape
    fig, ax = plt.subplots(figsize=(1.3 * h + 2.2, 0.9 * layers + 1.4), layout="constrained")
    image = ax.imshow(table, cmap="magma_r", vmin=0.0, vmax=max(float(table.max()), base), aspect="auto")
    for i in range(layers):
        for j in range(h):
            dark = table[i, j] > 0.5 * table.max()
            ax.text(j, i, f"{table[i, j]:.2f}", ha="center", va="center", fontsize=9,
                    color="white" if dark else "black")
    ax.set_xticks(range(h), [f"head {j}" for j in range(h)])
    ax.set_yticks(range(layers), [f"layer {i}" for i in range(layers)])
    ax.tick_params(labelsize=9, length=0)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("repeated-half loss (nats)", fontsize=9)
    ax.set_title(title or f"repeated-half loss with one head zeroed (none zeroed: {base:.2f})", fontsize=10)
    return fig


COMPOSITION_HATCHES = ("", "//", "..", "xx", "\\\\", "++")


def plot_composition(scores: Mapping[str, Floats], heads: Sequence[int], title: str = "") -> Figure:
    """Bars: the last layer's induction score of each head in ``heads``, under each condition.

    ``scores`` maps a condition's label (``"intact"``, ``"hidden from keys"``, ...) to ``(h,)`` scores.
    """
    conditions = list(scores)
    fig, ax = plt.subplots(figsize=(7.5, 2.8), layout="constrained")
    bar_width = 0.8 / len(conditions)
    for k, name in enumerate(conditions):
        _check_axes(f"scores[{name!r}]", scores[name], "(h,)")
        x = np.arange(len(heads)) + (k - (len(conditions) - 1) / 2) * bar_width
        # Okabe-Ito colours and a hatch per condition: told apart under colour-vision deficiency and in grey.
        ax.bar(x, [scores[name][j] for j in heads], bar_width * 0.9, color=HEAD_COLOURS[k % len(HEAD_COLOURS)],
               hatch=COMPOSITION_HATCHES[k % len(COMPOSITION_HATCHES)], edgecolor="black", linewidth=0.6, label=name)
    ax.set_xticks(range(len(heads)), [f"last layer, head {j}" for j in heads])
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("induction score", fontsize=9)
    ax.set_title(title or "induction score when the previous-token head's write is hidden", fontsize=10)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_ov_circuits(circuits: Mapping[str, Floats], title: str = "") -> Figure:
    """One map per ``(V, V)`` full OV circuit in ``circuits`` (title -> matrix): row ``a`` is what the
    head adds to every token's logit when it attends to token ``a``. A diverging scale centred on 0, the
    same for every panel: red raises a logit, blue lowers it; a copying head has a red diagonal."""
    names = list(circuits)
    for name in names:
        _check_axes(f"circuits[{name!r}]", circuits[name], "(V, V)")
    limit = max(float(np.abs(circuits[name]).max()) for name in names)
    fig, axes = plt.subplots(1, len(names), figsize=(min(2.6 * len(names) + 1.0, MAX_FIGURE_INCHES), 3.0),
                             layout="constrained", squeeze=False)
    image = None
    for ax, name in zip(axes[0], names, strict=True):
        image = ax.imshow(circuits[name], cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_title(name, fontsize=MIN_FONT_POINTS)
        ax.set_xlabel("logit of token b", fontsize=MIN_FONT_POINTS)
        ax.tick_params(labelsize=MIN_FONT_POINTS)
    axes[0][0].set_ylabel("attended token a", fontsize=MIN_FONT_POINTS)
    assert image is not None
    bar = fig.colorbar(image, ax=list(axes[0]), shrink=0.9)
    bar.set_label("logit change", fontsize=MIN_FONT_POINTS)
    bar.ax.tick_params(labelsize=MIN_FONT_POINTS)
    fig.suptitle(title or "full OV circuits W_E OV W_U: attend to token a, change the logit of token b",
                 fontsize=10)
    return fig


def plot_training_curve(curve: Mapping[str, Floats], title: str = "") -> Figure:
    """Two panels over the training steps, from `induction.load_training_curve`: above, the losses
    (every training batch, thin; the held-out first and repeated halves); below, the largest
    induction score of the last layer and previous-token score of the first."""
    steps = curve["step"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 4.6), sharex=True, layout="constrained")
    top.plot(np.arange(len(curve["training_loss"])), curve["training_loss"], color="#bbbbbb", linewidth=0.6,
             label="training batches (runs of 6 to 12, then filler)")
    top.plot(steps, curve["first_half_loss"], "--", color=HEAD_COLOURS[1], label="held out: first half")
    top.plot(steps, curve["repeated_half_loss"], "-", color=HEAD_COLOURS[0], label="held out: repeated half")
    top.set_ylabel("loss (nats)", fontsize=MIN_FONT_POINTS)
    top.set_ylim(0, 4.5)
    top.legend(fontsize=MIN_FONT_POINTS, loc="center right", bbox_to_anchor=(1.0, 0.42))  # clear of the curves
    bottom.plot(steps, curve["induction_score"], "-", color=HEAD_COLOURS[2],
                label="induction score (best layer 1 head)")
    bottom.plot(steps, curve["previous_token_score"], ":", color=HEAD_COLOURS[3], linewidth=2,
                label="previous-token score (best layer 0 head)")
    bottom.set_ylim(0, 1)
    bottom.set_ylabel("score", fontsize=MIN_FONT_POINTS)
    bottom.set_xlabel("training step", fontsize=MIN_FONT_POINTS)
    bottom.legend(fontsize=MIN_FONT_POINTS, loc="lower right")
    for ax in (top, bottom):
        ax.tick_params(labelsize=MIN_FONT_POINTS)
        ax.grid(alpha=0.3)
    top.set_title(title or "the shipped training, recorded every few steps", fontsize=10)
    return fig


def draw_next_token_panel(ax: Axes, length: int) -> tuple[Line2D, Line2D]:
    """Axes for ``p(actual next token)`` at positions ``0 .. length-2``: the whole model and the model
    with one head zeroed. Returns the two lines; update them with ``set_data``."""
    ax.set_xlim(-0.5, max(length - 1.5, 0.5))
    ax.set_ylim(-0.02, 1.3)  # a band above p = 1 for the legend, which would otherwise cover points near 1
    ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("p(actual next token)", fontsize=9)
    ax.set_xlabel("position t", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)
    whole = ax.plot([], [], "o-", color="C0", markersize=3, label="whole model")[0]
    ablated = ax.plot([], [], "s--", color="C3", markersize=3, label="this head zeroed")[0]
    ax.legend(fontsize=9, loc="upper center", ncol=2, borderpad=0.2)
    return whole, ablated
