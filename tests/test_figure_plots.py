"""Every lesson figure: drawn at twice its displayed pixel density, with text legible at its displayed size.

* Inside IPython, importing `lessons_lib.plotting` switches the inline backend to retina PNGs: the PNG
  has twice the pixels of the size its output metadata asks the page to show (JupyterLab and myst-nb
  both honour that size).
* Each plotting function's figure, shown at most `PAGE_WIDTH` CSS pixels wide (the website's text
  column on a desktop; a wider figure is shrunk, its text with it), has no text smaller than
  `MIN_FONT_POINTS` at that displayed size.
* The head palette stays distinct for 16 heads, and heatmaps use colour-vision-safe colour maps.
* The stored figures of the notebooks are 2x and at most `PAGE_WIDTH` wide as shown
  (`FIGURE_TEST_NOTEBOOKS=/path` checks other copies).
"""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.text import Text

from lessons_lib import efficient, mha_numpy
from lessons_lib.plotting import (
    DISPLAY_DPI,
    MIN_FONT_POINTS,
    PAGE_WIDTH,
    PIXEL_DENSITY,
    attention_flow,
    attention_maps,
    cache_charts,
    head_merge,
    head_split,
    induction_maps,
    latent_flow,
    mask_conventions,
    palette,
    residual_stream,
    text_maps,
    tiling,
    use_retina_inline,
)

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = Path(os.environ.get("FIGURE_TEST_NOTEBOOKS", REPO / "notebooks"))
rng = np.random.default_rng(0)
LABELS = list("abcdef")


def _maps(h: int, T: int) -> Any:
    scores = rng.normal(size=(h, T, T))
    return mha_numpy.softmax(scores)


def _trace() -> efficient.TiledTrace:
    q, k, v = rng.normal(size=(6, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 4))
    return efficient.tiled_attention_trace(q, k, v, np.tril(np.ones((6, 9), dtype=bool)), block_size=3,
                                           query_block_size=2)


GiB = 1024**3
# One call per plotting function, with inputs of the size its lesson uses.
FIGURES: dict[str, Callable[[], Any]] = {
    "attention_flow.plot_weights": lambda: attention_flow.plot_weights(
        _maps(1, 4)[0], np.tril(np.ones((4, 4), dtype=bool)), title="causal self-attention over 4 positions"),
    "attention_flow.plot_head_flow": lambda: attention_flow.plot_head_flow(
        rng.normal(size=(3, 8)), rng.normal(size=(5, 8)), rng.normal(size=(8, 4)), rng.normal(size=(8, 4)),
        rng.normal(size=(8, 4)), title="one head: target (T=3) reads source (S=5)"),
    "head_split.plot_head_split": lambda: head_split.plot_head_split(
        10 * np.arange(4)[:, None] + np.arange(6), 2, title="splitting (B, T, D) into h = 2 heads"),
    "head_merge.plot_head_merge": lambda: head_merge.plot_head_merge(rng.normal(size=(2, 4, 3)),
                                                                     rng.normal(size=(6, 6))),
    "mask_conventions.plot_mask_conventions": lambda: mask_conventions.plot_mask_conventions(
        np.tril(np.ones((4, 6), dtype=bool), k=2)),
    "attention_maps.plot_head_map": lambda: attention_maps.plot_head_map(_maps(1, 6)[0], LABELS, LABELS, "head 0"),
    "attention_maps.plot_head_grid": lambda: attention_maps.plot_head_grid(_maps(4, 6), LABELS),
    "attention_maps.plot_average_contrast": lambda: attention_maps.plot_average_contrast(_maps(4, 6), LABELS),
    "attention_maps.plot_split_layouts": lambda: attention_maps.plot_split_layouts(
        np.repeat(np.arange(2), 4)[None].repeat(4, 0), np.arange(32).reshape(4, 8) // 16, 2),
    "attention_maps.plot_head_count_comparison": lambda: attention_maps.plot_head_count_comparison(
        rng.uniform(size=(3, 2, 3)), [1, 4, 16], 16, ["previous", "next", "marker"], chance=1 / 6),
    "cache_charts.plot_cache_ladder": lambda: cache_charts.plot_cache_ladder(
        [("MHA", 32, 2 * GiB), ("chosen (GQA)", 8, GiB // 2), ("MQA", 1, GiB // 16)], "Llama 3 8B: 1 x 4096 tokens"),
    "cache_charts.plot_models_cache": lambda: cache_charts.plot_models_cache(
        ["Llama 3 8B", "Mistral 7B", "Qwen2 7B"], [GiB // 2, GiB // 2, GiB // 4], [2 * GiB, 2 * GiB, GiB * 2],
        tokens=4096),
    "cache_charts.plot_head_sharing": lambda: cache_charts.plot_head_sharing(
        [0, 0, 0, 0, 1, 1, 1, 1], 2, "h=8, h_kv=2, g=4: query head i reads K/V head i // g"),
    "cache_charts.plot_head_sharing, h = h_kv = 16": lambda: cache_charts.plot_head_sharing(
        list(range(16)), 16, "h=16, h_kv=16, g=1: every query head has a K/V head of its own"),
    "cache_charts.plot_conversion_error": lambda: cache_charts.plot_conversion_error(
        [1, 2, 4, 8], {"random heads": [0.5, 0.4, 0.3, 0.0], "paired heads": [0.3, 0.2, 0.1, 0.0]}, heads=8),
    "cache_charts.plot_cache_growth": lambda: cache_charts.plot_cache_growth(
        [1, 1024, 4096, 8192, 32768], {"MHA": [GiB * t // 8192 for t in (1, 1024, 4096, 8192, 32768)],
                                       "GQA": [GiB * t // 32768 for t in (1, 1024, 4096, 8192, 32768)]},
        "cache while decoding"),
    "latent_flow.plot_latent_flow": lambda: latent_flow.plot_latent_flow(
        {"D": 16, "h": 4, "d_c": 6, "d_nope": 4, "d_rope": 4, "d_v": 4}),
    "tiling.plot_tiling": lambda: tiling.plot_tiling(_trace(), title="Tiled attention over one head"),
    "tiling.plot_peak_memory": lambda: tiling.plot_peak_memory(
        [256, 512, 1024, 2048], [2**20, 2**22, 2**24, 2**26], [2**18, 2**19, 2**20, 2**21], block_size=32),
    "residual_stream.plot_residual_stream": lambda: residual_stream.plot_residual_stream(8, 2, 32),
    "induction_maps.plot_loss_per_position": lambda: induction_maps.plot_loss_per_position(
        rng.uniform(0, 3, size=23), 12, float(np.log(32))),
    "induction_maps.plot_head_maps": lambda: induction_maps.plot_head_maps(
        [_maps(4, 6), _maps(4, 6)], LABELS, rng.uniform(size=(2, 4)), rng.uniform(size=(2, 4))),
    "induction_maps.plot_ablation": lambda: induction_maps.plot_ablation(rng.uniform(0, 3, size=(2, 4)), 0.4),
    "induction_maps.plot_composition": lambda: induction_maps.plot_composition(
        {"intact": rng.uniform(size=4), "hidden from keys": rng.uniform(size=4)}, [1, 2]),
    "text_maps.plot_text_maps": lambda: text_maps.plot_text_maps(
        _maps(4, 20), "Stay! speak, speak! ", [f"layer {i}, head {i}: best previous" for i in range(4)]),
    "text_maps.plot_ablation": lambda: text_maps.plot_ablation(rng.uniform(-0.01, 0.3, size=(4, 4)),
                                                               rng.uniform(0, 0.6, size=4)),
    "text_maps.plot_cache_ladder": lambda: text_maps.plot_cache_ladder(
        [{"label": label, "family": family, "bytes": size, "stage": stage, "loss": loss}
         for label, family, size in (("MHA", "GQA", 2048), ("MQA", "GQA", 512), ("latent, d_c = 64", "latent", 512))
         for stage, loss in (("converted", 1.55 + size / 500), ("uptrained", 1.6), ("scratch", 1.62))], 1.55),
}
def displayed_scale(fig: Figure) -> tuple[float, float]:
    """(width in CSS pixels as the inline backend crops it, the factor the page column shrinks it by)."""
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())  # type: ignore[attr-defined]
    # The inline backend saves the tight box plus `savefig.pad_inches` on each side.
    width = (box.width + 2 * float(matplotlib.rcParams["savefig.pad_inches"])) * DISPLAY_DPI
    return width, min(1.0, PAGE_WIDTH / width)


def too_small(fig: Figure) -> list[str]:
    width, scale = displayed_scale(fig)
    small = []
    for text in fig.findobj(Text):
        assert isinstance(text, Text)
        if text.get_visible() and text.get_text().strip() and text.get_figure() is not None:
            shown = float(text.get_fontsize()) * scale
            if shown < MIN_FONT_POINTS - 1e-6:
                small.append(f"{text.get_text()[:30]!r} {shown:.1f} pt")
    return [f"{width:.0f} px wide (x{scale:.2f}): " + ", ".join(sorted(set(small)))] if small else []


@pytest.mark.parametrize("name", list(FIGURES))
def test_text_is_legible_at_the_displayed_size(name: str) -> None:
    fig = FIGURES[name]()
    try:
        problems = too_small(fig)
    finally:
        plt.close("all")
    assert not problems, f"{name}: text under {MIN_FONT_POINTS} pt as shown: {problems}"


def png_size(data: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def is_2x(pixels: tuple[int, int], shown: dict[str, int]) -> bool:
    """``PIXEL_DENSITY`` PNG pixels per displayed pixel (IPython rounds an odd size down when it halves it)."""
    return all(0 <= n - PIXEL_DENSITY * shown.get(side, 0) < PIXEL_DENSITY
               for n, side in zip(pixels, ("width", "height"), strict=True))


def test_retina_inline_figures_in_ipython() -> None:
    """In an IPython shell, a figure displays as a PNG with twice the pixels of its displayed size."""
    from IPython.core.interactiveshell import InteractiveShell
    from matplotlib_inline.config import InlineBackend

    shell = InteractiveShell.instance()
    backend = matplotlib.get_backend()
    try:
        matplotlib.use("module://matplotlib_inline.backend_inline")  # as in a notebook: pyplot's inline backend first
        assert use_retina_inline(), "lessons_lib.plotting did not see the IPython shell"
        assert InlineBackend.instance().figure_formats == {"retina"}
        fig = attention_maps.plot_head_map(_maps(1, 6)[0], LABELS, LABELS, "head 0")
        assert shell.display_formatter is not None
        data, metadata = shell.display_formatter.format(fig)  # type: ignore[no-untyped-call]
        shown = metadata["image/png"]
        png = data["image/png"]
        width, height = png_size(base64.b64decode(png) if isinstance(png, str) else png)
        assert is_2x((width, height), shown)
    finally:
        plt.close("all")
        InteractiveShell.clear_instance()
        matplotlib.use(backend)


def stored_figures() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                if "image/png" in output.get("data", {}):
                    found.append((f"{path.stem} cell {cell.get('id')}", output))
    return found


def test_every_stored_figure_is_2x() -> None:
    figures = stored_figures()
    assert figures, f"no stored figures in {NOTEBOOKS}"
    wrong = []
    for where, output in figures:
        size = output.get("metadata", {}).get("image/png", {})
        width, height = png_size(base64.b64decode(output["data"]["image/png"]))
        if not is_2x((width, height), size):
            wrong.append(f"{where}: {width}x{height} px shown at {size or 'its own size'}")
    assert not wrong, "figures not stored at 2x (run scripts/regenerate_notebooks.py):\n" + "\n".join(wrong)


def test_every_stored_figure_fits_the_page_column() -> None:
    """As each lesson draws it (its own sizes, not only the calls above), no figure is wider than the
    page's text column, so none is shrunk there and its text keeps the size the calls above measure."""
    wide = [
        f"{where}: shown {size['width']} px wide"
        for where, output in stored_figures()
        if (size := output.get("metadata", {}).get("image/png", {})).get("width", 0) > PAGE_WIDTH
    ]
    assert not wide, f"figures wider than the {PAGE_WIDTH} px page column:\n" + "\n".join(wide)


@pytest.mark.parametrize(("heads", "kv_heads"), [(8, 2), (8, 8), (12, 12), (16, 8), (16, 16)])
def test_head_sharing_labels_fit_inside_their_markers(heads: int, kv_heads: int) -> None:
    """White or black labels on coloured squares and circles: a label wider than its marker spills onto the
    white background, where white text vanishes."""
    fig = cache_charts.plot_head_sharing([i // (heads // kv_heads) for i in range(heads)], kv_heads, "sharing")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        ax = fig.axes[0]
        markers = [c for c in ax.collections if isinstance(c, PathCollection)]  # the squares, then the circles
        assert len(markers) == 2
        pixels_per_point = fig.dpi / 72
        narrowest = min(float(np.sqrt(c.get_sizes().min())) for c in markers) * pixels_per_point
        labels = [t for t in ax.texts if t.get_text()]
        assert len(labels) == heads + kv_heads
        wide = [t.get_text() for t in labels if t.get_window_extent(renderer).width > 0.95 * narrowest]
        assert not wide, f"h={heads}, h_kv={kv_heads}: labels wider than their markers: {wide}"
    finally:
        plt.close("all")


def lab(colour: str) -> Any:
    """CIE L*a*b* (D65) of a Matplotlib colour."""
    rgb = np.array(to_rgb(colour))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = np.cbrt(np.maximum(xyz / np.array([0.95047, 1.0, 1.08883]), 0.008856))
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_head_palette_is_distinct_for_16_heads() -> None:
    colours = [palette.head_colour(i) for i in range(16)]
    assert len(set(colours)) == 16
    points = [lab(c) for c in colours]
    closest = min(np.linalg.norm(points[i] - points[j]) for i in range(16) for j in range(i))
    assert closest > 15, f"two head colours differ by only Delta E {closest:.1f}"
    for colour in colours:  # every head's label is readable on its colour
        ink = palette.relative_luminance(palette.text_colour(colour))
        fill = palette.relative_luminance(colour)
        ratio = (max(ink, fill) + 0.05) / (min(ink, fill) + 0.05)
        assert ratio >= 4.5, f"label on {colour}: contrast {ratio:.2f}"


SAFE_MAPS = {"viridis", "cividis", "magma", "magma_r", "RdBu_r", "Blues", "Greys"}


@pytest.mark.parametrize("name", list(FIGURES))
def test_heatmaps_use_colour_vision_safe_maps(name: str) -> None:
    fig = FIGURES[name]()
    try:
        # Continuous maps only: a ListedColormap is a list of categories (heads, allowed / blocked) whose
        # colours come from the palette and whose cells are labelled.
        maps = {image.get_cmap().name for image in fig.findobj(AxesImage)
                if isinstance(image, AxesImage) and not isinstance(image.get_cmap(), ListedColormap)}
    finally:
        plt.close("all")
    assert not (maps - SAFE_MAPS), f"{name} uses {sorted(maps - SAFE_MAPS)}"
