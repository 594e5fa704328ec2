"""Lesson 05 widgets: a KV-cache calculator and a picture of which query heads share a K/V head.

Thin wrappers: the numbers come from `lessons_lib.kv_cache` and `lessons_lib.gqa`, the drawing
from `lessons_lib.plotting.kv`. Each widget draws into its own ``ipywidgets.Image`` (a PNG made
without pyplot), so callbacks print nothing and leave no figure behind in the notebook. Each
keeps the data it currently shows in attributes, so a test or a notebook cell can set
``.value`` on a control and read what the widget shows.
"""

from __future__ import annotations

import io

import ipywidgets as widgets
from matplotlib.figure import Figure

from lessons_lib.gqa import kv_head_of_query
from lessons_lib.kv_cache import MODELS, format_bytes, kv_head_options, ladder
from lessons_lib.plotting.kv import plot_cache_ladder, plot_head_sharing

__all__ = ["HeadSharing", "KVCacheCalculator"]

BYTES_PER_ELEMENT = [("float32 (4 bytes)", 4), ("float16 / bfloat16 (2 bytes)", 2), ("8-bit (1 byte)", 1)]


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    return buffer.getvalue()


class KVCacheCalculator:
    """Pick a model, ``h_kv`` (a divisor of its ``h``), context length, batch and element size.

    Shows a bar chart of the cache for MHA / the chosen ``h_kv`` / MQA and a one-line readout.
    Data shown: ``rows`` (``(label, h_kv, bytes)`` per bar) and ``readout.value``.
    """

    def __init__(self, model: str = "Llama 3 8B", tokens: int = 4096, batch: int = 1) -> None:
        if model not in MODELS:
            raise ValueError(f"model must be one of {list(MODELS)}, got {model!r}")
        preset = MODELS[model]
        style = {"description_width": "10em"}
        self.model = widgets.Dropdown(options=list(MODELS), value=model, description="model", style=style)
        self.kv_heads = widgets.Dropdown(
            options=kv_head_options(preset.heads), value=preset.kv_heads, description="h_kv", style=style
        )
        self.tokens = widgets.BoundedIntText(value=tokens, min=1, max=10_000_000, description="context (tokens)", style=style)
        self.batch = widgets.BoundedIntText(value=batch, min=1, max=4096, description="batch", style=style)
        self.bytes_per_element = widgets.Dropdown(options=BYTES_PER_ELEMENT, value=2, description="element", style=style)
        self.readout = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.rows: list[tuple[str, int, int]] = []
        self._swapping = False
        self.model.observe(self._on_model, names="value")
        for control in (self.kv_heads, self.tokens, self.batch, self.bytes_per_element):
            control.observe(self._update, names="value")
        controls = widgets.VBox([self.model, self.kv_heads, self.tokens, self.batch, self.bytes_per_element])
        self.ui = widgets.VBox([widgets.HBox([controls, self.image]), self.readout])
        self._update()

    def _on_model(self, _change: object = None) -> None:
        preset = MODELS[self.model.value]
        self._swapping = True  # the options change fires value events; draw once, at the end
        self.kv_heads.options = kv_head_options(preset.heads)
        self.kv_heads.value = preset.kv_heads  # start from the model's own configuration
        self._swapping = False
        self._update()

    def _update(self, _change: object = None) -> None:
        if self._swapping:
            return
        preset = MODELS[self.model.value]
        tokens, batch, size = self.tokens.value, self.batch.value, self.bytes_per_element.value
        self.rows = ladder(preset, self.kv_heads.value, tokens, batch, size)
        fig = Figure(figsize=(5.5, 3.2))
        plot_cache_ladder(self.rows, f"{preset.name}: {batch} x {tokens} tokens", ax=fig.subplots())
        self.image.value = _png(fig)
        per_token = ladder(preset, self.kv_heads.value, 1, 1, size)[1][2]
        chosen = self.rows[1][2]
        self.readout.value = (
            f"{preset.name}: {preset.layers} layers, h={preset.heads}, h_kv={self.kv_heads.value} "
            f"(g={preset.heads // self.kv_heads.value}), d_h={preset.head_dim}. "
            f"Cache: {format_bytes(per_token)} per token, {format_bytes(chosen)} in total. "
            f"The released model uses h_kv={preset.kv_heads}."
        )

    def _repr_mimebundle_(self, **kwargs: object) -> object:
        return self.ui._repr_mimebundle_(**kwargs)


class HeadSharing:
    """Pick ``h`` and ``h_kv``; see which query heads read which key/value head.

    ``mapping`` toggles between the correct repeat-interleave (``i // g``) and the tiling mistake
    (``i % h_kv``). Data shown: ``assignment`` (K/V head of each query head) and ``readout.value``.
    """

    MAPPINGS = [("repeat-interleave: i // g", "repeat"), ("tile (wrong): i % h_kv", "tile")]

    def __init__(self, heads: int = 8, kv_heads: int = 2) -> None:
        self.heads = widgets.Dropdown(options=list(range(1, 17)), value=heads, description="h")
        self.kv_heads = widgets.Dropdown(options=kv_head_options(heads), value=kv_heads, description="h_kv")
        self.mapping = widgets.ToggleButtons(options=self.MAPPINGS, value="repeat", description="mapping")
        self.readout = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.assignment: list[int] = []
        self._swapping = False
        self.heads.observe(self._on_heads, names="value")
        self.kv_heads.observe(self._update, names="value")
        self.mapping.observe(self._update, names="value")
        self.ui = widgets.VBox([widgets.HBox([self.heads, self.kv_heads]), self.mapping, self.image, self.readout])
        self._update()

    def _on_heads(self, _change: object = None) -> None:
        options = kv_head_options(self.heads.value)
        keep = self.kv_heads.value if self.kv_heads.value in options else options[0]
        self._swapping = True  # the options change fires value events; draw once, at the end
        self.kv_heads.options = options
        self.kv_heads.value = keep
        self._swapping = False
        self._update()

    def _update(self, _change: object = None) -> None:
        if self._swapping:
            return
        h, h_kv = self.heads.value, self.kv_heads.value
        correct = [int(j) for j in kv_head_of_query(h, h_kv)]
        tiled = [i % h_kv for i in range(h)]
        self.assignment = correct if self.mapping.value == "repeat" else tiled
        groups = {j: [i for i, a in enumerate(self.assignment) if a == j] for j in range(h_kv)}
        fig = Figure(figsize=(6.0, 2.6))
        title = f"h={h}, h_kv={h_kv}, g={h // h_kv}: " + ("i // g" if self.mapping.value == "repeat" else "tiled (wrong)")
        plot_head_sharing(self.assignment, h_kv, title, ax=fig.subplots())
        self.image.value = _png(fig)
        verdict = "" if self.assignment == correct else " Not what GQA does: compare with i // g."
        self.readout.value = "; ".join(f"kv{j} serves " + ", ".join(f"q{i}" for i in groups[j]) for j in groups) + "." + verdict

    def _repr_mimebundle_(self, **kwargs: object) -> object:
        return self.ui._repr_mimebundle_(**kwargs)
