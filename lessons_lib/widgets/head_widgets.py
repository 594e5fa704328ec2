"""Lesson 05 widgets: explore the heads of the trained toy layer, re-slice its weights, split an input.

Thin `LessonWidget` subclasses (see `lessons_lib.widgets.base` for the shared interface:
``.controls``, ``.data``, ``.ui``): the numbers come from `lessons_lib.inspect_heads`, the drawing
from `lessons_lib.plotting.attention_maps`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.text import Text
from numpy.typing import NDArray

from lessons_lib.inspect_heads import (
    EVAL_SEED,
    ToyHeads,
    average_over_heads,
    column_blocks,
    embed,
    features_per_head,
    head_columns,
    head_maps,
    head_options,
    load_toy_heads,
    run_layer,
    split_layout,
    tokens_per_head,
)
from lessons_lib.plotting import MIN_FONT_POINTS
from lessons_lib.plotting.attention_maps import (
    WEIGHT_LABEL,
    add_colorbar,
    draw_columns,
    draw_cut_matrix,
    draw_map,
    draw_split_layout,
    draw_tiled_maps,
    head_ticks,
    label_tokens,
    tile_maps,
)
from lessons_lib.toy_task import make_batch
from lessons_lib.widgets.base import LessonWidget

__all__ = ["HeadExplorer", "HeadReslicer", "SplitExplorer"]

PROJECTIONS = ("wq", "wk", "wv")
TILES_PER_ROW = 4  # HeadReslicer: maps per row (h = 8 and 16 take two and four rows)
NAME_SIZE = MIN_FONT_POINTS  # HeadReslicer: the "head i" over each map, in points


def _named(h: int) -> bool:
    """HeadReslicer names its maps ("head i") for 2 to 8 heads: 16 maps are too small to name, they read in order."""
    return 1 < h <= 2 * TILES_PER_ROW


def _spaced(h: int) -> bool:
    """Named maps in more than one row get a blank row of cells above each map, room for the names between rows."""
    return _named(h) and h > TILES_PER_ROW


class HeadExplorer(LessonWidget):
    """Pick a head and a sequence: its attention map next to its columns of ``wq``, ``wk``, ``wv``.

    Controls: ``head`` (0 .. h-1), ``sequence`` (0 .. B-1), ``average`` (show the mean over heads
    instead of the chosen head's map; the columns still show the chosen head). ``.data`` holds
    those three values and ``labels`` (the sequence's tokens), ``map (T, S)``, ``title`` (the map's),
    ``columns`` (start, stop) and the head's column blocks ``wq, wk, wv (D, d_h)``.
    """

    def __init__(self, model: ToyHeads | None = None, batch_size: int = 4, seed: int = EVAL_SEED) -> None:
        self.model = load_toy_heads() if model is None else model
        self.tokens, _ = make_batch(batch_size, self.model.config, seed=seed)
        _, self.weights = run_layer(self.model, self.tokens)  # (B, h, T, S)
        self.averaged = average_over_heads(self.weights)  # (B, T, S)
        heads = [(f"head {i}", i) for i in range(self.model.layer.heads)]
        controls = {
            "head": widgets.Dropdown(options=heads, value=0, description="head"),
            "sequence": widgets.IntSlider(value=0, min=0, max=batch_size - 1, description="sequence"),
            "average": widgets.Checkbox(value=False, description="average over heads"),
        }
        super().__init__(controls, size=(9.0, 2.8))

    def _compute(self) -> dict[str, Any]:
        head, item = int(self.controls["head"].value), int(self.controls["sequence"].value)
        average = bool(self.controls["average"].value)
        layer = self.model.layer
        shown = "mean of all heads (no head's map)" if average else f"head {head}"
        return {
            "head": head,
            "sequence": item,
            "average": average,
            "labels": self.model.labels(self.tokens[item]),
            "map": self.averaged[item] if average else self.weights[item, head],
            "title": f"seq {item}: {shown}",
            "columns": (head * layer.head_width, (head + 1) * layer.head_width),
            **{name: head_columns(getattr(layer, name), head, layer.heads) for name in PROJECTIONS},
        }

    def _build(self) -> list[Artist]:
        # An empty slot after the map leaves room for its colour bar and the bar's label.
        axes = self.figure.subplots(1, 5, gridspec_kw={"width_ratios": [2.0, 0.4, 1, 1, 1]})
        axes[1].remove()
        self._axes = [axes[0], *axes[2:]]
        # right=0.9 leaves the last colour bar room for its ticks and label inside the picture.
        self.figure.subplots_adjust(left=0.07, right=0.9, bottom=0.17, top=0.87, wspace=0.3)
        labels = self.data["labels"]
        self._map = draw_map(self._axes[0], self.data["map"], labels, labels)
        self._labelled = self.data["sequence"]  # the sequence whose tokens label the map's axes
        layer = self.model.layer
        # One colour scale for all three matrices and every head, so heads and matrices compare.
        limit = max(float(np.abs(getattr(layer, name)).max()) for name in PROJECTIONS)
        self._columns = []
        for ax, name in zip(self._axes[1:], PROJECTIONS, strict=True):
            self._columns.append(draw_columns(ax, self.data[name], name, 0, limit))
            ax.set_xlabel(f"d_h={layer.head_width} columns", fontsize=9)  # as wide as the matrix, no wider
            ax.set_xticks([])
        # Colour bars are drawn once, into the cached background: they cost nothing per update.
        add_colorbar(self._map, self._axes[0], WEIGHT_LABEL)
        add_colorbar(self._columns[-1], self._axes[-1], "weight entry")
        return [self._map, *self._columns, *(ax.title for ax in self._axes)]

    def _background_key(self) -> Hashable:
        sequence: int = self.data["sequence"]
        return sequence  # the token labels are part of the background

    def _draw(self) -> None:
        d = self.data
        self._map.set_data(d["map"])
        if d["sequence"] != self._labelled:
            label_tokens(self._axes[0], d["labels"], d["labels"])
            self._labelled = d["sequence"]
        self._axes[0].set_title(d["title"], fontsize=9)
        start, stop = d["columns"]
        for ax, image, name in zip(self._axes[1:], self._columns, PROJECTIONS, strict=True):
            image.set_data(d[name])
            ax.set_title(f"{name}[:, {start}:{stop}]", fontsize=9)


class HeadReslicer(LessonWidget):
    """Keep ``D`` fixed, choose ``h`` (a divisor of ``D``): the same ``wq, wk`` cut into h heads.

    Controls: ``heads`` (the valid h for D), ``sequence`` (0 .. B-1). ``.data`` holds those two values
    and ``d_h``, ``boundaries`` (each head's column range), ``wq_blocks, wk_blocks (h, D, d_h)``,
    ``maps (h, T, T)`` for the chosen sequence, its token ``labels`` and the maps' ``title``. Only the
    trained ``h`` gives the trained maps; any other cut is the same numbers read as different heads.
    """

    def __init__(self, model: ToyHeads | None = None, batch_size: int = 4, seed: int = EVAL_SEED) -> None:
        self.model = load_toy_heads() if model is None else model
        self.tokens, _ = make_batch(batch_size, self.model.config, seed=seed)
        self.x = embed(self.model, self.tokens)  # (B, T, D)
        layer = self.model.layer
        controls = {
            "heads": widgets.Dropdown(options=head_options(layer.width), value=layer.heads, description="h"),
            "sequence": widgets.IntSlider(value=0, min=0, max=batch_size - 1, description="sequence"),
        }
        super().__init__(controls, size=(9.0, 2.8))

    def _compute(self) -> dict[str, Any]:
        h, item = int(self.controls["heads"].value), int(self.controls["sequence"].value)
        layer = self.model.layer
        d_h = layer.width // h
        labels = self.model.labels(self.tokens[item])
        heads = "the one head's map" if h == 1 else f"maps of heads 0-{h - 1}"
        return {
            "heads": h,
            "sequence": item,
            "d_h": d_h,
            "boundaries": [(i * d_h, (i + 1) * d_h) for i in range(h)],
            "wq_blocks": column_blocks(layer.wq, h),
            "wk_blocks": column_blocks(layer.wk, h),
            "maps": head_maps(self.x[item : item + 1], layer.wq, layer.wk, h)[0],  # (1, h, T, T) -> (h, T, T)
            "labels": labels,
            "title": f"sequence {item} ({' '.join(labels)}): {heads}",
        }

    def _build(self) -> list[Artist]:
        self._wq_ax, self._maps_ax = self.figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 3.3]})
        self.figure.subplots_adjust(left=0.06, right=0.9, bottom=0.17, top=0.84, wspace=0.45)
        self._edges = draw_cut_matrix(self._wq_ax, self.model.layer.wq)
        self._maps_ax.set_anchor("E")  # the maps hug their colour bar, however few they are
        self._tiles = draw_tiled_maps(self._maps_ax, self.data["maps"], slots=self.data["heads"], per_row=TILES_PER_ROW)
        add_colorbar(self._wq_ax.images[0], self._wq_ax, "wq entry")  # drawn once, in the cached background
        add_colorbar(self._tiles, self._maps_ax, WEIGHT_LABEL)
        self._names: list[Text] = []
        self._shown = 0
        self._maps_ax.axis("on")
        for spine in self._maps_ax.spines.values():
            spine.set_visible(False)
        self._maps_ax.tick_params(length=0, labelsize=9)
        # The tokens change with the sequence: the maps' axes (ticks and token labels) are drawn on every
        # update, so a new sequence needs no new background (only a new h does).
        axes = [self._maps_ax.xaxis, self._maps_ax.yaxis]
        return [self._tiles, *self._edges, *axes, self._wq_ax.title, self._maps_ax.title]

    def _background_key(self) -> Hashable:
        heads: int = self.data["heads"]
        return heads  # the grid and the head names are background; the tokens are drawn per update

    def _tiled(self) -> NDArray[np.float64]:
        """The maps of ``.data`` in rows of `TILES_PER_ROW` (see `tile_maps`); with `_spaced` rows, each map
        has a blank row of cells on top, so two rows stand two cells apart and a name at `NAME_SIZE` fits."""
        maps, h = self.data["maps"], self.data["heads"]
        if _spaced(h):
            maps = np.concatenate([np.full((h, 1, maps.shape[2]), np.nan), maps], axis=1)
        return tile_maps(maps, slots=h, per_row=TILES_PER_ROW)

    def _lay_out_maps(self) -> None:
        """Axes, token labels and head names for ``h`` maps in rows of `TILES_PER_ROW`."""
        d = self.data
        h, (T, S) = d["heads"], d["maps"].shape[1:]
        tiled = self._tiled()
        rows, cols = tiled.shape
        ax = self._maps_ax
        self._tiles.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
        ax.set_xlim(-0.5, cols - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)
        for name in self._names:
            name.remove()
        per_row, spaced = min(h, TILES_PER_ROW), _spaced(h)
        top = T + 2 if spaced else T + 1  # rows of cells from one row of maps to the next
        first = 1 if spaced else 0  # the map's first row of cells (below its blank row)
        self._names = [
            ax.text((i % per_row) * (S + 1) + (S - 1) / 2, (i // per_row) * top + first - 0.7, f"head {i}",
                    ha="center", va="bottom", fontsize=NAME_SIZE)
            for i in range(h)
        ] if _named(h) else []
        labelled = h <= TILES_PER_ROW  # one row of maps: tokens along every map and down the first
        ax.xaxis.set_visible(labelled)
        ax.yaxis.set_visible(labelled)
        ax.apply_aspect()  # place the axes for the new grid now: an update may draw the maps without a full draw
        self._shown = h

    def _draw(self) -> None:
        d = self.data
        if d["heads"] != self._shown or self._background_key() not in self._backgrounds:
            self._lay_out_maps()
        h, (T, S) = d["heads"], d["maps"].shape[1:]
        if h <= TILES_PER_ROW:
            self._maps_ax.set_xticks([c * (S + 1) + s for c in range(h) for s in range(S)], list(d["labels"]) * h)
            self._maps_ax.set_yticks(range(T), d["labels"])
        for col, line in enumerate(self._edges, start=1):
            line.set_visible(col % d["d_h"] == 0)  # a line between neighbouring heads
        self._wq_ax.set_title(f"wq cut into h={d['heads']} blocks of d_h={d['d_h']}", fontsize=9)
        self._tiles.set_data(self._tiled())
        self._maps_ax.set_title(d["title"], fontsize=9, pad=18)


def _runs(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``: compact text for a sorted list of indices."""
    parts: list[str] = []
    start = previous = values[0]
    for value in [*values[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if value is not None:
            start = previous = value
    return ", ".join(parts)


class SplitExplorer(LessonWidget):
    """Correct split (reshape then transpose) vs the wrong direct reshape, on a ``(T, D)`` input.

    Controls: ``split`` ("correct" / "wrong"), ``heads`` (the valid h for D, above 1). ``.data``
    holds those two values and ``d_h``, ``layout (T, D)`` head ids, per head the input ``features``
    and token positions (``tokens``) it receives, the ``legend`` text and the ``title``.
    """

    def __init__(self, length: int = 4, width: int = 8, heads: int = 2) -> None:
        self.length, self.width = length, width
        options = [n for n in head_options(width) if n > 1]
        if heads not in options:
            raise ValueError(f"heads must be one of the divisors of width={width} above 1: {options}, got {heads}")
        controls = {
            "split": widgets.ToggleButtons(options=["correct", "wrong"], value="correct", description="split"),
            "heads": widgets.Dropdown(options=options, value=heads, description="h"),
        }
        super().__init__(controls, size=(7.6, 2.6))

    def _compute(self) -> dict[str, Any]:
        mode, h = str(self.controls["split"].value), int(self.controls["heads"].value)
        layout = split_layout(self.length, self.width, h, mode)
        features, tokens = features_per_head(layout, h), tokens_per_head(layout, h)
        how = "reshape then transpose" if mode == "correct" else "direct reshape (wrong)"
        return {
            "split": mode,
            "heads": h,
            "d_h": self.width // h,
            "layout": layout,
            "features": features,
            "tokens": tokens,
            "legend": "\n".join(
                f"head {i}: tokens {_runs(t)}, features {_runs(f)}"
                for i, (f, t) in enumerate(zip(features, tokens, strict=True))
            ),
            "title": f"{how}, h={h}: colour = head",
        }

    def _build(self) -> list[Artist]:
        self._ax = self.figure.add_axes((0.08, 0.18, 0.46, 0.7))
        self._image = draw_split_layout(self._ax, self.data["layout"], self.data["heads"], "")
        most = max(self.controls["heads"].options)  # one static bar for every h offered: head ids 0 .. most-1
        add_colorbar(self._image, self._ax, "head", **head_ticks(most))
        # The longest line ("head 0: tokens 0-3, features 0-3", 33 characters) ends inside the picture.
        self._legend = self.figure.text(0.63, 0.85, "", va="top", fontsize=9, family="monospace")
        return [self._image, self._legend, self._ax.title]

    def _draw(self) -> None:
        self._image.set_data(self.data["layout"])
        self._legend.set_text(self.data["legend"])
        self._ax.set_title(self.data["title"], fontsize=9)
