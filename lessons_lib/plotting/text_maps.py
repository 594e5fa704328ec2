"""Lesson 10 pictures: heads of the Shakespeare model on a passage of real text, with its characters
on both axes, and the loss each head's and each layer's ablation adds.

The maps are lesson 05's (`attention_maps.draw_map` and its colour bar), two to a row, so a passage
of up to `MAX_CHARACTERS` characters keeps its labels legible. Spaces and newlines, invisible as
labels, are drawn as visible marks (`char_labels`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from numpy.typing import NDArray

from lessons_lib.plotting.attention_maps import MAP_CMAP, WEIGHT_LABEL, add_colorbar, draw_map

__all__ = ["MAX_CHARACTERS", "char_labels", "plot_ablation", "plot_cache_ladder", "plot_text_maps"]

MAX_CHARACTERS = 20  # at two maps to a row, more characters than this would make their 9-point labels overlap
SHOWN = {" ": "\u2423", "\n": "\u21b5"}  # a space as an open box, a newline as a return arrow
MAP_SIDE = 2.85  # inches per map: two maps and their labels fit the page column
MAP_GAP = 0.7  # inches between the maps of a row (the second map's query labels)


def char_labels(text: str) -> list[str]:
    """One label per character of ``text``: a space shown as an open box, a newline as a return arrow."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return [SHOWN.get(ch, ch) for ch in text]


def plot_text_maps(maps: NDArray[np.floating], text: str, titles: Sequence[str]) -> Figure:
    """Attention maps ``maps (n, T, T)`` (1 to 4 heads, self-attention over the ``T`` characters of
    ``text``), two to a row, each titled, with one colour bar."""
    if not isinstance(maps, np.ndarray) or maps.ndim != 3 or maps.shape[1] != maps.shape[2]:
        raise ValueError(f"maps must be (n, T, T) attention maps, got {getattr(maps, 'shape', type(maps).__name__)}")
    n, T, _ = maps.shape
    if not 1 <= n <= 4:
        raise ValueError(f"plot_text_maps draws 1 to 4 maps, got n={n}")
    labels = char_labels(text)
    if len(labels) != T or not 1 <= T <= MAX_CHARACTERS:
        raise ValueError(f"text must have one character per map row, T={T} (at most {MAX_CHARACTERS}), "
                         f"got {len(labels)} characters")
    if len(titles) != n:
        raise ValueError(f"titles must hold one title per map ({n}), got {len(titles)}")
    columns = min(n, 2)
    rows = -(-n // columns)
    left, right, top, bottom, row_gap = 0.6, 0.9, 0.35, 0.55, 0.75
    width = left + columns * MAP_SIDE + (columns - 1) * MAP_GAP + right
    height = top + rows * MAP_SIDE + (rows - 1) * row_gap + bottom
    fig = plt.figure(figsize=(width, height))
    images = []
    for k in range(n):
        row, column = divmod(k, columns)
        x0 = left + column * (MAP_SIDE + MAP_GAP)
        y0 = height - top - (row + 1) * MAP_SIDE - row * row_gap
        ax = fig.add_axes((x0 / width, y0 / height, MAP_SIDE / width, MAP_SIDE / height))
        images.append(draw_map(ax, maps[k], labels, labels, titles[k]))
        ax.tick_params(labelsize=9)
        if row < rows - 1:
            ax.set_xlabel("")
    add_colorbar(images[0], fig.axes[columns - 1], WEIGHT_LABEL, gap=0.12 / width, width=0.12 / width,
                 bottom=fig.axes[(rows - 1) * columns].get_position().y0)
    return fig


def plot_ablation(heads: NDArray[np.floating], layers: NDArray[np.floating]) -> Figure:
    """The validation loss added by zeroing each head, ``heads (layers, h)``, as a grid with its values
    written in, and by zeroing each layer's whole attention, ``layers (layers,)``, as bars."""
    heads, layers = np.asarray(heads, dtype=np.float64), np.asarray(layers, dtype=np.float64)
    if heads.ndim != 2 or layers.shape != heads.shape[:1]:
        raise ValueError(f"heads must be (layers, h) and layers (layers,), got {heads.shape} and {layers.shape}")
    L, h = heads.shape
    fig, (grid, bars) = plt.subplots(1, 2, figsize=(7.6, 0.5 + 0.55 * L + 0.9), width_ratios=[h, 3.2])
    fig.subplots_adjust(left=0.09, right=0.97, bottom=0.22, top=0.86, wspace=0.45)
    top = max(float(heads.max()), 1e-9)
    grid.imshow(heads, cmap=MAP_CMAP, vmin=0.0, vmax=top, aspect="auto", interpolation="nearest")
    for (i, j), value in np.ndenumerate(heads):
        grid.text(j, i, f"{value:+.3f}", ha="center", va="center", fontsize=9,
                  color="black" if value > 0.6 * top else "white")
    grid.set_xticks(range(h), [f"head {j}" for j in range(h)])
    grid.set_yticks(range(L), [f"layer {i}" for i in range(L)])
    grid.tick_params(length=0, labelsize=9)
    grid.set_title("one head zeroed: loss added (nats)", fontsize=9)
    bars.barh(range(L), layers, color="#0072B2")
    for i, value in enumerate(layers):
        bars.text(value, i, f" {value:+.3f}", va="center", fontsize=9)
    bars.set_yticks(range(L), [f"layer {i}" for i in range(L)])
    bars.invert_yaxis()
    bars.set_xlim(min(0.0, float(layers.min())), float(layers.max()) * 1.45 + 1e-9)
    bars.tick_params(labelsize=9)
    bars.set_xlabel("loss added (nats)", fontsize=9)
    bars.set_title("a layer's attention zeroed", fontsize=9)
    return fig


LADDER_COLOURS = {"converted": "#888888", "uptrained": "#0072B2", "scratch": "#D55E00"}


def plot_cache_ladder(points: Sequence[dict[str, Any]], reference: float) -> Figure:
    """The cache-versus-quality ladder: validation loss against cache bytes per token, one marker per
    model. ``points``: dicts with ``label`` (the variant), ``family`` (``"GQA"`` or ``"latent"``),
    ``bytes`` (cache bytes per token) and ``stage`` (``"converted"``, ``"uptrained"`` or
    ``"scratch"``) and ``loss`` (nats). ``reference``: the shipped model's loss (a dashed line).

    Left: every point, with the conversions' full range (labels on the points far above the reference);
    right: the same points from the reference up to the worst trained point, where uptrained and
    from-scratch models are told apart, labelled at the uptrained marker (to its right; the largest
    cache's to its left). GQA/MQA points are circles (drawn a little left of their size), latent ones
    diamonds (a little right). Short labels fit best."""
    if not points:
        raise ValueError("points must hold at least one model")
    needed = {"label", "family", "bytes", "stage", "loss"}
    for point in points:
        if not isinstance(point, dict) or not needed <= set(point):
            raise ValueError(f"every point needs the keys {sorted(needed)}, got {point!r}")
        if point["stage"] not in LADDER_COLOURS or point["family"] not in ("GQA", "latent"):
            raise ValueError(
                f"stage must be one of {sorted(LADDER_COLOURS)} and family 'GQA' or 'latent', got {point!r}"
            )
    fig, axes = plt.subplots(1, 2, figsize=(7.6, 3.9))
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.27, top=0.9, wspace=0.28)
    trained = [float(p["loss"]) for p in points if p["stage"] != "converted"]
    top = max(trained) if trained else max(float(p["loss"]) for p in points)
    largest = max(float(p["bytes"]) for p in points)
    for ax, zoom in zip(axes, (False, True), strict=True):
        for point in points:
            x = float(point["bytes"]) * (0.93 if point["family"] == "GQA" else 1.07)
            y = float(point["loss"])
            if zoom and point["stage"] == "converted" and y > top + 0.02:
                continue
            ax.plot(x, y, "o" if point["family"] == "GQA" else "D", color=LADDER_COLOURS[str(point["stage"])],
                    markersize=6, markerfacecolor="white" if point["stage"] == "converted" else None)
            crowded = not zoom and y < reference + 0.15  # near the trained ones: named in the zoomed panel
            if point["stage"] == ("uptrained" if zoom else "converted") and not crowded:
                rightmost = float(point["bytes"]) == largest  # its label goes left, inside the axes
                ax.annotate(str(point["label"]), (x, y), xytext=(-4 if rightmost else 4, 5),
                            textcoords="offset points", ha="right" if rightmost else "left", fontsize=9)
        ax.axhline(reference, color="black", linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        sizes = sorted({int(p["bytes"]) for p in points})
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("cache bytes per token (4 layers)", fontsize=9)
        ax.tick_params(labelsize=9)
        if zoom:
            ax.set_ylim(reference - 0.02, top + 0.03)
            ax.set_title("trained: zoomed in", fontsize=9)
        else:
            highest = max(float(p["loss"]) for p in points)
            ax.set_ylim(reference - 0.1, highest + 0.12 * (highest - reference) + 0.02)
            ax.set_ylabel("validation loss (nats)", fontsize=9)
            ax.set_title("all models", fontsize=9)
    handles = [
        Line2D([], [], marker="o", linestyle="", color=LADDER_COLOURS["converted"], markerfacecolor="white",
                   label="converted, no training"),
        Line2D([], [], marker="o", linestyle="", color=LADDER_COLOURS["uptrained"], label="converted + 5 % steps"),
        Line2D([], [], marker="o", linestyle="", color=LADDER_COLOURS["scratch"], label="trained from scratch"),
        Line2D([], [], color="black", linestyle="--", linewidth=0.8, label="the shipped model"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=9, frameon=False)
    return fig
