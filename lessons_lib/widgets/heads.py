"""Lesson 04 widgets: explore the heads of the trained toy layer and re-slice its weights.

Each widget is a thin wrapper: the numbers come from `lessons_lib.heads`, the drawing from
`lessons_lib.plotting.heads`. A widget exposes its controls as attributes (``.head``, ``.batch``,
``.average``, ``.heads``, ``.split_mode``), what it currently shows as ``.current`` (a dict of
plain values and arrays), the Matplotlib ``.figure`` and the displayable ``.widget``.

The picture is rendered to PNG into an ``ipywidgets.Image`` on every change: no custom JavaScript,
no print() in callbacks, and nothing is written to the cell's output (only widget state changes).
"""

from __future__ import annotations

import io
from collections.abc import Hashable
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import NDArray
from PIL import Image as PILImage

from lessons_lib.heads import (
    EVAL_SEED,
    ToyHeads,
    average_over_heads,
    column_blocks,
    divisors,
    embed,
    features_per_head,
    head_columns,
    head_maps,
    load_toy_heads,
    run_layer,
    split_layout,
    tokens_per_head,
)
from lessons_lib.plotting.heads import draw_columns, draw_map, draw_split_layout
from lessons_lib.toy_task import make_batch

__all__ = ["HeadExplorer", "HeadReslicer", "SplitExplorer"]

DPI = 72


class _PictureWidget:
    """Shared plumbing: a Matplotlib figure (not managed by pyplot) shown as a PNG ``Image``.

    Speed: the parts that do not change on an update (axes, tick labels) are drawn once and kept
    as a background; an update restores it and draws only the "dynamic" artists (images, titles,
    lines) on top, then encodes the PNG. Backgrounds are kept per ``key`` (e.g. the sequence shown,
    whose token labels sit on the axes): the first visit of a key draws everything.
    """

    figure: Figure
    image: widgets.Image
    widget: widgets.VBox
    current: dict[str, Any]

    def _start(self, width: float, height: float) -> None:
        self.figure = Figure(figsize=(width, height), dpi=DPI)
        FigureCanvasAgg(self.figure)
        self.image = widgets.Image(format="png")
        self.current = {}
        self._dynamic: list[Artist] = []
        self._backgrounds: dict[Hashable, Any] = {}

    def _set_dynamic(self, artists: list[Artist]) -> None:
        for artist in artists:
            artist.set_animated(True)  # left out of the background, drawn on every update
        self._dynamic = artists

    def _render(self, key: Hashable = None) -> None:
        """Draw the figure and hand the PNG to the Image widget (the browser swaps the picture)."""
        canvas = self.figure.canvas
        assert isinstance(canvas, FigureCanvasAgg)
        if key not in self._backgrounds:
            canvas.draw()  # type: ignore[no-untyped-call]  # everything except the dynamic artists
            self._backgrounds[key] = canvas.copy_from_bbox(self.figure.bbox)  # type: ignore[no-untyped-call]
        else:
            canvas.restore_region(self._backgrounds[key])  # type: ignore[no-untyped-call]
        for artist in self._dynamic:
            self.figure.draw_artist(artist)
        width, height = canvas.get_width_height()
        pixels = canvas.buffer_rgba()  # type: ignore[no-untyped-call]
        picture = PILImage.frombuffer("RGBA", (width, height), pixels, "raw", "RGBA", 0, 1)
        buffer = io.BytesIO()
        picture.save(buffer, format="png", compress_level=1)
        self.image.value = buffer.getvalue()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"{type(self).__name__} widget"  # stable text, whatever the state
        return bundle


def _observe(callback: Any, *controls: widgets.ValueWidget) -> None:
    for control in controls:
        control.observe(lambda change: callback(), names="value")


class HeadExplorer(_PictureWidget):
    """Pick a head and a sequence: its attention map next to its columns of ``wq``, ``wk``, ``wv``.

    Controls: ``.head`` (0 .. h-1), ``.batch`` (0 .. B-1), ``.average`` (show the mean over heads
    instead of the chosen head's map). ``.current`` holds ``head, batch, average, labels,
    map (T, S), columns (start, stop), wq, wk, wv (D, d_h)``.
    """

    def __init__(self, model: ToyHeads | None = None, batch_size: int = 4, seed: int = EVAL_SEED) -> None:
        self.model = load_toy_heads() if model is None else model
        self.tokens, self.marker = make_batch(batch_size, self.model.config, seed=seed)
        _, self.weights = run_layer(self.model, self.tokens)  # (B, h, T, S)
        self.averaged = average_over_heads(self.weights)  # (B, T, S)
        h = self.model.config.heads
        self.head = widgets.Dropdown(options=[(f"head {i}", i) for i in range(h)], value=0, description="head")
        self.batch = widgets.IntSlider(value=0, min=0, max=batch_size - 1, description="sequence")
        self.average = widgets.Checkbox(value=False, description="average over heads")

        self._start(9.0, 2.8)
        axes = self.figure.subplots(1, 4, gridspec_kw={"width_ratios": [2.0, 1, 1, 1]})
        self.figure.subplots_adjust(left=0.07, right=0.98, bottom=0.17, top=0.87, wspace=0.35)
        self._axes = axes
        self._update_data()
        labels = self.current["labels"]
        self._map = draw_map(axes[0], self.current["map"], labels, labels, "")
        self._labelled = self.current["batch"]
        layer = self.model.layer
        self._columns = []
        for ax, name, full in zip(axes[1:], ("wq", "wk", "wv"), (layer.wq, layer.wk, layer.wv)):
            limit = float(np.abs(full).max())  # one colour scale per matrix, so heads compare
            self._columns.append(draw_columns(ax, self.current[name], name, 0, limit))
            ax.set_xlabel(f"its d_h={layer.head_width} columns", fontsize=8)
            ax.set_xticks([])
        self._set_dynamic([self._map, *self._columns, *(ax.title for ax in axes)])
        self._draw()
        _observe(self._changed, self.head, self.batch, self.average)
        self.widget = widgets.VBox([widgets.HBox([self.head, self.batch, self.average]), self.image])

    def _update_data(self) -> None:
        head, item, average = int(self.head.value), int(self.batch.value), bool(self.average.value)
        layer = self.model.layer
        d_h = layer.head_width
        self.current = {
            "head": head,
            "batch": item,
            "average": average,
            "labels": self.model.labels(self.tokens[item]),
            "map": self.averaged[item] if average else self.weights[item, head],
            "columns": (head * d_h, (head + 1) * d_h),
            "wq": head_columns(layer.wq, head, layer.heads),
            "wk": head_columns(layer.wk, head, layer.heads),
            "wv": head_columns(layer.wv, head, layer.heads),
        }

    def _draw(self) -> None:
        c = self.current
        self._map.set_data(c["map"])
        ax = self._axes[0]
        if c["batch"] != self._labelled:  # token labels belong to the background of this sequence
            ax.set_xticks(range(len(c["labels"])), c["labels"])
            ax.set_yticks(range(len(c["labels"])), c["labels"])
            self._labelled = c["batch"]
        what = "mean of all heads (no head's map)" if c["average"] else f"head {c['head']}"
        ax.set_title(f"seq {c['batch']}: {what}", fontsize=9)
        start, stop = c["columns"]
        for ax, image, name in zip(self._axes[1:], self._columns, ("wq", "wk", "wv")):
            image.set_data(c[name])
            ax.set_title(f"{name}[:, {start}:{stop}]", fontsize=9)
        self._render(key=c["batch"])

    def _changed(self) -> None:
        self._update_data()
        self._draw()


def _tile(maps: NDArray[np.floating], slots: int, per_row: int = 8) -> NDArray[np.float64]:
    """Place ``(h, T, S)`` maps in a fixed grid of ``slots`` cells, NaN (blank) between and after.

    The picture keeps one size whatever ``h`` is, so only the image data changes on an update.
    """
    h, T, S = maps.shape
    if h > slots:
        raise ValueError(f"cannot place h={h} maps in {slots} slots")
    cols = min(slots, per_row)
    rows = -(-slots // cols)
    tiled = np.full((rows * (T + 1) - 1, cols * (S + 1) - 1), np.nan)
    for i in range(h):
        r, c = divmod(i, cols)
        tiled[r * (T + 1) : r * (T + 1) + T, c * (S + 1) : c * (S + 1) + S] = maps[i]
    return tiled


class HeadReslicer(_PictureWidget):
    """Keep ``D`` fixed, choose ``h`` (a divisor of ``D``): the same ``wq, wk`` cut into h heads.

    Controls: ``.heads`` (divisors of D), ``.batch`` (0 .. B-1). ``.current`` holds ``heads, d_h,
    boundaries`` (each head's column range), ``wq_blocks, wk_blocks (h, D, d_h)`` and
    ``maps (h, T, T)`` for the chosen sequence. Only the trained ``h`` gives the trained maps; any
    other cut is the same numbers read as different heads.
    """

    def __init__(self, model: ToyHeads | None = None, batch_size: int = 4, seed: int = EVAL_SEED) -> None:
        self.model = load_toy_heads() if model is None else model
        self.tokens, _ = make_batch(batch_size, self.model.config, seed=seed)
        self.x = embed(self.model, self.tokens)  # (B, T, D)
        D = self.model.config.width
        self.heads = widgets.Dropdown(options=divisors(D), value=self.model.config.heads, description="h")
        self.batch = widgets.IntSlider(value=0, min=0, max=batch_size - 1, description="sequence")

        self._start(9.0, 2.8)
        self._wq_ax, self._maps_ax = self.figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 2.6]})
        self.figure.subplots_adjust(left=0.05, right=0.99, bottom=0.14, top=0.86, wspace=0.12)
        wq = self.model.layer.wq
        limit = float(np.abs(wq).max())
        self._wq_ax.imshow(wq, cmap="RdBu_r", vmin=-limit, vmax=limit)
        self._wq_ax.set_xlabel("column (output feature)", fontsize=8)
        self._wq_ax.set_ylabel("input feature", fontsize=8)
        self._wq_ax.tick_params(labelsize=7)
        self._update_data()
        self._tiles = self._maps_ax.imshow(
            _tile(self.current["maps"], slots=D), cmap="viridis", vmin=0, vmax=1, aspect="equal"
        )
        self._maps_ax.axis("off")
        # One line per possible boundary; an update only shows the ones the chosen h needs.
        self._edges = [
            self._wq_ax.axvline(col - 0.5, color="black", linewidth=1.5) for col in range(1, D)
        ]
        self._set_dynamic([self._tiles, *self._edges, self._wq_ax.title, self._maps_ax.title])
        self._draw()
        _observe(self._changed, self.heads, self.batch)
        self.widget = widgets.VBox([widgets.HBox([self.heads, self.batch]), self.image])

    def _update_data(self) -> None:
        h, item = int(self.heads.value), int(self.batch.value)
        layer = self.model.layer
        D = layer.width
        d_h = D // h
        self.current = {
            "heads": h,
            "batch": item,
            "d_h": d_h,
            "boundaries": [(i * d_h, (i + 1) * d_h) for i in range(h)],
            "wq_blocks": column_blocks(layer.wq, h),
            "wk_blocks": column_blocks(layer.wk, h),
            "maps": head_maps(self.x[item : item + 1], layer.wq, layer.wk, h)[0],  # (h, T, T)
            "labels": self.model.labels(self.tokens[item]),
        }

    def _draw(self) -> None:
        c = self.current
        for col, line in enumerate(self._edges, start=1):
            line.set_visible(col % c["d_h"] == 0)
        self._wq_ax.set_title(f"wq cut into h={c['heads']} blocks of d_h={c['d_h']}", fontsize=9)
        self._tiles.set_data(_tile(c["maps"], slots=self.model.layer.width))
        self._maps_ax.set_title(
            f"sequence {c['batch']} ({' '.join(c['labels'])}): maps of heads 0..{c['heads'] - 1}",
            fontsize=9,
        )
        self._render()

    def _changed(self) -> None:
        self._update_data()
        self._draw()


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


class SplitExplorer(_PictureWidget):
    """Correct split (reshape then transpose) vs the wrong direct reshape, on a ``(T, D)`` input.

    Controls: ``.split_mode`` ("correct" / "wrong"), ``.heads`` (divisors of D above 1).
    ``.current`` holds ``mode, heads, d_h, layout (T, D)`` head ids, and per head the input
    ``features`` and token positions (``tokens``) it receives.
    """

    def __init__(self, length: int = 4, width: int = 8, heads: int = 2) -> None:
        self.length, self.width = length, width
        options = [n for n in divisors(width) if n > 1]
        if heads not in options:
            raise ValueError(f"heads must be one of the divisors of width={width} above 1: {options}, got {heads}")
        self.split_mode = widgets.ToggleButtons(options=["correct", "wrong"], value="correct", description="split")
        self.heads = widgets.Dropdown(options=options, value=heads, description="h")

        self._start(7.6, 2.6)
        self._ax = self.figure.add_axes((0.08, 0.18, 0.5, 0.7))
        self._update_data()
        self._image = draw_split_layout(self._ax, self.current["layout"], heads, "")
        self._legend = self.figure.text(0.62, 0.85, "", va="top", fontsize=8, family="monospace")
        self._set_dynamic([self._image, self._legend, self._ax.title])
        self._draw()
        _observe(self._changed, self.split_mode, self.heads)
        self.widget = widgets.VBox([widgets.HBox([self.split_mode, self.heads]), self.image])

    def _update_data(self) -> None:
        mode, h = str(self.split_mode.value), int(self.heads.value)
        layout = split_layout(self.length, self.width, h, mode)
        self.current = {
            "mode": mode,
            "heads": h,
            "d_h": self.width // h,
            "layout": layout,
            "features": features_per_head(layout, h),
            "tokens": tokens_per_head(layout, h),
        }

    def _draw(self) -> None:
        c = self.current
        self._image.set_data(c["layout"])
        lines = [
            f"head {i}: tokens {_runs(t)}, features {_runs(f)}"
            for i, (f, t) in enumerate(zip(c["features"], c["tokens"]))
        ]
        self._legend.set_text("\n".join(lines))
        how = "reshape then transpose" if c["mode"] == "correct" else "direct reshape (wrong)"
        self._ax.set_title(f"{how}, h={c['heads']}: colour = head", fontsize=9)
        self._render()

    def _changed(self) -> None:
        self._update_data()
        self._draw()
