"""Lesson 06 widgets: a KV-cache calculator and a picture of which query heads share a K/V head.

Thin `LessonWidget` subclasses (see `lessons_lib.widgets.base` for the shared interface:
``.controls``, ``.data``, ``.ui``): the numbers come from `lessons_lib.kv_cache` and
`lessons_lib.gqa_numpy`, the drawing from `lessons_lib.plotting.cache_charts`. Both pictures change
as a whole on every update (bar heights, axis scale, lines), so each update redraws its figure.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
from matplotlib.artist import Artist

from lessons_lib.gqa_numpy import kv_head_of_query
from lessons_lib.kv_cache import MODELS, cached_tokens, format_bytes, kv_head_options, ladder
from lessons_lib.plotting.cache_charts import clear_drawing, plot_cache_ladder, plot_head_sharing
from lessons_lib.widgets.base import LessonWidget

__all__ = ["HeadSharing", "KVCacheCalculator"]

BYTES_PER_ELEMENT = [("float32 (4 bytes)", 4), ("16-bit (2 bytes)", 2), ("8-bit (1 byte)", 1)]
MAPPINGS = [("repeat-interleave: i // g", "repeat"), ("tile (wrong): i % h_kv", "tile")]
# HeadSharing's picture, in inches: `plot_head_sharing` sizes its markers to the axes' width and labels them
# at 9 pt only when they are at least 17 pt wide; axes of 6.35 in give 16 query heads 20 pt markers (its largest),
# wide enough for "kv15" at 9 pt.
SHARING_SIZE = (7.5, 2.6)
SHARING_LEFT = 1.0  # the row names ("query heads", "K/V heads") at 9 pt


MAX_TOKENS = 10_000_000  # the longest context the calculator counts
MAX_BATCH = 4096


class KVCacheCalculator(LessonWidget):
    """Pick a model, ``h_kv`` (a divisor of its ``h``), context length, batch and element size.

    Shows a bar chart of the cache for MHA / the chosen ``h_kv`` / MQA and a one-line readout.
    Controls: ``model`` (a name in `kv_cache.MODELS`; choosing one resets ``kv_heads`` to the
    model's own), ``kv_heads``, ``tokens``, ``batch``, ``bytes_per_element``. ``.data`` holds those
    values and ``rows`` (``(label, h_kv, bytes)`` per bar, from `kv_cache.ladder`), ``per_token``
    and ``total`` (bytes for the chosen ``h_kv``), ``window`` (the model's sliding window or
    ``None``), ``cached`` (tokens kept per sequence: ``min(tokens, window)``), the chart's ``title``
    and the ``readout`` text. A model with a sliding window keeps only the last ``window`` tokens,
    so every bar counts ``cached`` tokens and the readout says so. A context or batch it cannot use (below
    1, above `MAX_TOKENS` / `MAX_BATCH`) is counted as the nearest usable value, and the readout starts by
    saying so.
    """

    def __init__(self, model: str = "Llama 3 8B", tokens: int = 4096, batch: int = 1) -> None:
        if model not in MODELS:
            raise ValueError(f"model must be one of {list(MODELS)}, got {model!r}")
        preset = MODELS[model]
        controls = {
            "model": widgets.Dropdown(options=list(MODELS), value=model, description="model"),
            "kv_heads": widgets.Dropdown(
                options=kv_head_options(preset.heads), value=preset.kv_heads, description="h_kv"
            ),
            # Plain IntText: a bounded box would change an entry it cannot use (0) without a word;
            # `_compute` counts the nearest usable value and the readout says so.
            "tokens": widgets.IntText(value=tokens, description="context (tokens)"),
            "batch": widgets.IntText(value=batch, description="batch"),
            "bytes_per_element": widgets.Dropdown(options=BYTES_PER_ELEMENT, value=2, description="element"),
        }
        super().__init__(
            controls, size=(6.5, 3.2), rows=[["model", "kv_heads", "bytes_per_element"], ["tokens", "batch"]]
        )

    def _changed(self, name: str) -> None:
        if name == "model":  # start from the new model's own configuration
            preset = MODELS[self.controls["model"].value]
            self._replace_options("kv_heads", kv_head_options(preset.heads), preset.kv_heads)
        self.refresh()

    def _compute(self) -> dict[str, Any]:
        values = {name: control.value for name, control in self.controls.items()}
        notes = []
        for name, what, high in (("tokens", "context", MAX_TOKENS), ("batch", "batch", MAX_BATCH)):
            entered = values[name]
            values[name] = min(max(int(entered), 1), high)
            if values[name] != entered:
                unit = " tokens" if name == "tokens" else ""
                reason = "holds no cache" if entered < 1 else f"is more than this calculator counts ({high:,})"
                notes.append(f"A {what} of {entered:,}{unit} {reason}: counted as {values[name]:,}.")
        preset, kv_heads = MODELS[values["model"]], values["kv_heads"]
        rows = ladder(preset, kv_heads, values["tokens"], values["batch"], values["bytes_per_element"])
        per_token = ladder(preset, kv_heads, 1, 1, values["bytes_per_element"])[1][2]
        total = rows[1][2]
        window, cached = preset.sliding_window, cached_tokens(values["tokens"], preset.sliding_window)
        tokens = values["tokens"]
        if window is None:
            kept = ""
        elif cached < tokens:
            kept = (f" Sliding window of {window:,} tokens: each sequence keeps its last {cached:,} of "
                    f"{tokens:,} tokens.")
        else:
            kept = f" Sliding window of {window:,} tokens, no shorter than the sequence: nothing is dropped."
        readout = (
            f"{preset.name}: {preset.layers} layers, h={preset.heads}, h_kv={kv_heads} "
            f"(g={preset.heads // kv_heads}), d_h={preset.head_dim}. "
            f"Cache: {format_bytes(per_token)} per cached token, {format_bytes(total)} in total for "
            f"{values['batch']:,} x {cached:,} cached tokens.{kept} "
            f"The released model uses h_kv={preset.kv_heads}."
        )
        if notes:
            readout = " ".join(notes) + " " + readout
        title = f"{preset.name}: {values['batch']:,} x {tokens:,} tokens"
        if window is not None:
            title += f" (window {window:,}: {cached:,} kept)"
        return {
            **values, "rows": rows, "per_token": per_token, "total": total, "window": window, "cached": cached,
            "title": title, "readout": readout,
        }

    def _alt_text(self) -> str:
        bars = ", ".join(f"{label} {format_bytes(size)}" for label, _, size in self.data["rows"])
        return f"Bar chart of the KV cache, {self.data['title']}: {bars}."

    def _build(self) -> list[Artist]:
        self._ax = self.figure.subplots()
        self.figure.subplots_adjust(left=0.12, right=0.98, bottom=0.16, top=0.9)
        return []

    def _draw(self) -> None:
        clear_drawing(self._ax)
        plot_cache_ladder(self.data["rows"], self.data["title"], ax=self._ax)


class HeadSharing(LessonWidget):
    """Pick ``h`` and ``h_kv``; see which query heads read which key/value head.

    Controls: ``heads`` (1 .. 16), ``kv_heads`` (the divisors of ``h``; kept when ``h`` changes if it
    still divides, else 1), ``mapping``: "repeat" (the correct repeat-interleave, ``i // g``) or
    "tile" (the tiling mistake, ``i % h_kv``). ``.data`` holds those values and ``group_size`` (g),
    ``assignment`` (the K/V head of each query head), the picture's ``title`` and the ``readout``.
    """

    def __init__(self, heads: int = 8, kv_heads: int = 2) -> None:
        if heads not in range(1, 17) or kv_heads not in kv_head_options(heads):
            raise ValueError(
                f"heads must be in 1 .. 16 and kv_heads one of its divisors {kv_head_options(heads)}; "
                f"got heads={heads}, kv_heads={kv_heads}"
            )
        controls = {
            "heads": widgets.Dropdown(options=list(range(1, 17)), value=heads, description="h"),
            "kv_heads": widgets.Dropdown(options=kv_head_options(heads), value=kv_heads, description="h_kv"),
            "mapping": widgets.ToggleButtons(options=MAPPINGS, value="repeat", description="mapping"),
        }
        super().__init__(controls, size=SHARING_SIZE, rows=[["heads", "kv_heads"], ["mapping"]])

    def _changed(self, name: str) -> None:
        if name == "heads":
            options = kv_head_options(self.controls["heads"].value)
            kept = self.controls["kv_heads"].value
            self._replace_options("kv_heads", options, kept if kept in options else options[0])
        self.refresh()

    def _compute(self) -> dict[str, Any]:
        h, h_kv, mapping = (self.controls[name].value for name in ("heads", "kv_heads", "mapping"))
        correct = [int(j) for j in kv_head_of_query(h, h_kv)]
        assignment = correct if mapping == "repeat" else [i % h_kv for i in range(h)]
        groups = [[i for i, a in enumerate(assignment) if a == j] for j in range(h_kv)]
        served = "; ".join(f"kv{j} serves " + ", ".join(f"q{i}" for i in group) for j, group in enumerate(groups))
        verdict = ""
        if assignment != correct:
            verdict = " Not what GQA does: compare with i // g."
        elif mapping == "tile":
            verdict = f" With h_kv={h_kv} tiling happens to give the right order; with any other divisor it does not."
        if mapping == "repeat":
            order = "i // g"
        elif assignment == correct:  # h_kv = 1 or h_kv = h: tiling and repeating give the same order
            order = "tiled: i % h_kv, here the same as i // g"
        else:
            order = "tiled (wrong)"
        return {
            "heads": h,
            "kv_heads": h_kv,
            "mapping": mapping,
            "group_size": h // h_kv,
            "assignment": assignment,
            "title": f"h={h}, h_kv={h_kv}, g={h // h_kv}: {order}",
            "readout": served + "." + verdict,
        }

    def _alt_text(self) -> str:
        d = self.data
        return (f"Query heads q0 to q{d['heads'] - 1} in the top row, each joined by a line to the key/value head "
                f"it reads in the bottom row ({d['title']}): {d['readout']}")

    def _build(self) -> list[Artist]:
        self._ax = self.figure.subplots()
        self.figure.subplots_adjust(left=SHARING_LEFT / SHARING_SIZE[0], right=0.98, bottom=0.04, top=0.88)
        return []

    def _draw(self) -> None:
        clear_drawing(self._ax)
        plot_head_sharing(self.data["assignment"], self.data["kv_heads"], self.data["title"], ax=self._ax)
