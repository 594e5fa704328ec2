"""Lesson 06 widgets: build them, drive them through ``.controls[...].value``, check ``.data``.

The interface they share with lesson 05's widgets (controls, data, ui, repr, crisp picture) is
checked on all five widgets in test_head_widgets.py.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle

from lessons_lib.kv_cache import MODELS, cache_bytes, cache_per_token, format_bytes, kv_head_options
from lessons_lib.plotting.cache_charts import (
    clear_drawing,
    plot_cache_growth,
    plot_cache_ladder,
    plot_conversion_error,
    plot_head_sharing,
    plot_models_cache,
    plot_step_times,
)
from lessons_lib.plotting.palette import head_colour, text_colour
from lessons_lib.widgets.base import readout_html
from lessons_lib.widgets.cache_widgets import HeadSharing, KVCacheCalculator

LADDER = [("MHA", 4, 100), ("chosen (GQA)", 2, 50), ("MQA", 1, 25)]  # rows (label, h_kv, bytes)


def test_calculator_starts_from_the_model_config() -> None:
    calc = KVCacheCalculator()
    preset = MODELS["Llama 3 8B"]
    assert calc.controls["kv_heads"].value == preset.kv_heads
    assert list(calc.controls["kv_heads"].options) == kv_head_options(preset.heads)
    assert calc.data["rows"] == [
        ("MHA", 32, cache_bytes(preset, 4096, kv_heads=32)),
        ("chosen (GQA)", 8, cache_bytes(preset, 4096)),
        ("MQA", 1, cache_bytes(preset, 4096, kv_heads=1)),
    ]
    assert calc.data["per_token"] == cache_per_token(preset)
    assert "128 KiB per cached token" in calc.data["readout"]
    assert calc.readout.value == readout_html(calc.data["readout"], None, calc.data["alt"])  # the text in .data
    assert repr(calc) == "KVCacheCalculator(model='Llama 3 8B', kv_heads=8, tokens=4096, batch=1, bytes_per_element=2)"


def test_calculator_follows_every_control() -> None:
    calc = KVCacheCalculator()
    calc.controls["model"].value = "Llama 2 70B"
    assert list(calc.controls["kv_heads"].options) == [1, 2, 4, 8, 16, 32, 64]
    assert calc.data["kv_heads"] == calc.controls["kv_heads"].value == 8  # reset to the model's own
    calc.controls["kv_heads"].value = 16
    calc.controls["tokens"].value = 8192
    calc.controls["batch"].value = 2
    calc.controls["bytes_per_element"].value = 4
    preset = MODELS["Llama 2 70B"]
    total = cache_bytes(preset, 8192, 2, kv_heads=16, bytes_per_element=4)
    assert calc.data["rows"][1] == ("chosen (GQA)", 16, total)
    assert calc.data["total"] == total
    assert calc.data["rows"][0][2] == 4 * total
    assert calc.data["title"] == "Llama 2 70B: 2 x 8,192 tokens"
    assert "h_kv=16 (g=4)" in calc.data["readout"]
    assert f"{format_bytes(total)} in total" in calc.data["readout"]
    assert "The released model uses h_kv=8" in calc.data["readout"]
    calc.controls["model"].value = "Llama 2 13B"
    assert calc.data["kv_heads"] == 40
    assert calc.data["rows"][1][0] == "chosen (MHA)"


def test_calculator_draws_once_per_model_change() -> None:
    calc = KVCacheCalculator()
    pictures: list[bytes] = []
    calc.image.observe(lambda change: pictures.append(change["new"]), names="value")
    calc.controls["model"].value = "Mistral 7B v0.1"  # new h_kv options and value: still one picture
    assert len(pictures) == 1


def test_calculator_rejects_unknown_model() -> None:
    with pytest.raises(ValueError, match="model must be one of"):
        KVCacheCalculator(model="GPT-5")


def test_head_sharing_shows_i_div_g() -> None:
    sharing = HeadSharing()
    assert sharing.data["assignment"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert sharing.data["readout"].startswith("kv0 serves q0, q1, q2, q3; kv1 serves q4, q5, q6, q7")
    assert repr(sharing) == "HeadSharing(heads=8, kv_heads=2, mapping='repeat')"
    sharing.controls["heads"].value = 6
    assert list(sharing.controls["kv_heads"].options) == [1, 2, 3, 6]
    assert sharing.data["kv_heads"] == 2  # still a divisor, kept
    sharing.controls["kv_heads"].value = 3
    assert sharing.data["assignment"] == [0, 0, 1, 1, 2, 2]
    assert sharing.data["group_size"] == 2
    sharing.controls["mapping"].value = "tile"
    assert sharing.data["assignment"] == [0, 1, 2, 0, 1, 2]
    assert "Not what GQA does" in sharing.data["readout"]
    assert sharing.data["title"] == "h=6, h_kv=3, g=2: tiled (wrong)"
    sharing.controls["heads"].value = 4  # 3 does not divide 4: falls back to 1
    assert sharing.data["kv_heads"] == sharing.controls["kv_heads"].value == 1


@pytest.mark.parametrize(("heads", "kv_heads"), [(8, 1), (8, 8), (16, 16), (5, 1)])
def test_head_sharing_does_not_call_a_right_tiled_order_wrong(heads: int, kv_heads: int) -> None:
    """With h_kv = 1 or h_kv = h, tiling equals repeating: the title and readout must not say "wrong"."""
    sharing = HeadSharing(heads, kv_heads)
    sharing.controls["mapping"].value = "tile"
    assert sharing.data["assignment"] == [i // (heads // kv_heads) for i in range(heads)]
    assert "wrong" not in sharing.data["title"]
    assert sharing.data["title"].endswith("tiled: i % h_kv, here the same as i // g")
    assert "Not what GQA does" not in sharing.data["readout"]
    assert "happens to give the right order" in sharing.data["readout"]
    sharing.controls["mapping"].value = "repeat"
    assert "happens" not in sharing.data["readout"]


def test_head_sharing_rejects_a_kv_head_count_that_does_not_divide() -> None:
    with pytest.raises(ValueError, match="kv_heads one of its divisors"):
        HeadSharing(heads=8, kv_heads=3)


def bars(ax: Axes) -> list[Rectangle]:
    """The bar rectangles of a bar chart (a chart's patches are all rectangles here)."""
    found = [patch for patch in ax.patches if isinstance(patch, Rectangle)]
    assert len(found) == len(ax.patches)
    return found


def test_plotting_functions_return_figures() -> None:
    fig = plot_cache_ladder(LADDER, "t")
    assert [bar.get_height() for bar in bars(fig.axes[0])] == pytest.approx([n / 1024**3 for _, _, n in LADDER])
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["MHA\nh_kv=4", "chosen (GQA)\nh_kv=2", "MQA\nh_kv=1"]
    fig2 = plot_head_sharing([0, 0, 1, 1], 2, "t")
    assert len(fig2.axes[0].lines) == 4
    fig3 = plot_conversion_error([4, 2, 1], {"random": [0.0, 0.5, 0.8]}, heads=4)
    assert np.asarray(fig3.axes[0].lines[0].get_ydata()).tolist() == [0.0, 0.5, 0.8]
    fig4 = plot_models_cache(["a", "b"], [1, 2], [3, 4], tokens=10)
    assert len(fig4.axes[0].patches) == 4
    fig5 = plot_step_times([32, 64], {"with": [0.001, 0.002], "without": [0.01, 0.04]}, "steps")
    ax5 = fig5.axes[0]
    assert [np.asarray(line.get_ydata()).tolist() for line in ax5.lines] == [[1.0, 2.0], [10.0, 40.0]]  # in ms
    assert ax5.get_xscale() == "log" and ax5.get_yscale() == "log" and ax5.get_title() == "steps"
    with pytest.raises(ValueError, match="has 1 times for 2 token counts"):
        plot_step_times([32, 64], {"with": [0.001]}, "t")
    plt.close("all")


def test_clear_drawing_keeps_the_axes_for_the_next_chart() -> None:
    ax = plot_cache_ladder(LADDER, "t").axes[0]
    clear_drawing(ax)
    assert (len(ax.patches), len(ax.texts), len(ax.containers)) == (0, 0, 0)
    plot_cache_ladder([("MHA", 8, 80), ("chosen (GQA)", 8, 80), ("MQA", 1, 10)], "u", ax=ax)
    assert [bar.get_x() + bar.get_width() / 2 for bar in bars(ax)] == [0, 1, 2]  # same places as before
    assert len(ax.texts) == 3
    plt.close("all")


def test_calculator_shows_the_sliding_window() -> None:
    calc = KVCacheCalculator(model="Mistral 7B v0.1", tokens=32768)
    preset = MODELS["Mistral 7B v0.1"]
    assert (calc.data["window"], calc.data["cached"]) == (4096, 4096)
    assert calc.data["total"] == cache_bytes(preset, 32768) == cache_bytes(preset, 4096)  # 512 MiB, not 4 GiB
    assert [n for _, _, n in calc.data["rows"]] == [cache_bytes(preset, 4096, kv_heads=k) for k in (32, 8, 1)]
    assert "keeps its last 4,096 of 32,768 tokens" in calc.data["readout"]
    assert "512 MiB in total for 1 x 4,096 cached tokens" in calc.data["readout"]
    assert calc.data["title"] == "Mistral 7B v0.1: 1 x 32,768 tokens (window 4,096: 4,096 kept)"
    calc.controls["tokens"].value = 1  # inside the window: no "last 1 of 1 tokens"
    assert "nothing is dropped" in calc.data["readout"] and "last" not in calc.data["readout"]
    calc.controls["tokens"].value = 32768
    calc.controls["tokens"].value = 1000  # shorter than the window: every token is kept
    assert calc.data["cached"] == 1000 and calc.data["total"] == cache_bytes(preset, 1000)
    calc.controls["model"].value = "Llama 3 8B"  # no window: nothing about one in the readout
    assert calc.data["window"] is None
    assert "window" not in calc.data["readout"] and "window" not in calc.data["title"]


def test_cache_growth_lines_match_the_byte_function() -> None:
    preset = MODELS["Mistral 7B v0.1"]
    steps = list(range(512, 32769, 512))
    curves = {
        f"{label} (h_kv={k})": [cache_bytes(preset, t, kv_heads=k, windowed=False) for t in steps]
        for label, k in (("MHA", 32), ("GQA", 8), ("MQA", 1))
    }
    curves["GQA + window 4096"] = [cache_bytes(preset, t) for t in steps]
    fig = plot_cache_growth(steps, curves, "growth", dashed={"GQA + window 4096"})
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == list(curves)
    for line, sizes in zip(ax.lines, curves.values(), strict=True):
        assert np.asarray(line.get_xdata()).tolist() == steps
        assert np.allclose(line.get_ydata(), np.asarray(sizes) / 1024**3)
    assert [line.get_linestyle() for line in ax.lines] == ["-", "-", "-", "--"]
    window_line = np.asarray(ax.lines[3].get_ydata())
    assert np.all(window_line[steps.index(4096):] == window_line[-1]) and window_line[-1] == 0.5  # flat at 512 MiB
    assert np.asarray(ax.lines[0].get_ydata())[-1] == 16  # MHA-equivalent at 32768 tokens: 16 GiB
    assert ax.get_title() == "linear scale" and ax.get_xlabel() and "GiB" in ax.get_ylabel()
    legend = ax.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == list(curves)
    log_ax = fig.axes[1]  # the same lines on a logarithmic scale
    assert log_ax.get_yscale() == "log" and ax.get_yscale() == "linear"
    for line, log_line in zip(ax.lines, log_ax.lines, strict=True):
        assert np.array_equal(line.get_ydata(), log_line.get_ydata())
    assert fig.get_suptitle() == "growth" and log_ax.get_title() == "logarithmic scale"
    assert log_ax.yaxis.get_major_formatter()(0.5, 0) == "512 MiB"  # tick labels in binary units
    plt.close("all")


def test_cache_growth_on_given_axes_draws_one_panel() -> None:
    fig, ax = plt.subplots()
    assert plot_cache_growth([1, 2], {"a": [1024**3, 2 * 1024**3]}, "one", ax=ax) is fig
    assert len(fig.axes) == 1 and ax.get_title() == "one"
    assert np.asarray(ax.lines[0].get_ydata()).tolist() == [1.0, 2.0]
    plt.close("all")


def test_cache_growth_rejects_mismatched_data() -> None:
    with pytest.raises(ValueError, match="has 2 values for 3 steps"):
        plot_cache_growth([1, 2, 3], {"a": [1, 2]}, "t")
    with pytest.raises(ValueError, match=r"dashed names curves that are not drawn: \['b'\]"):
        plot_cache_growth([1, 2], {"a": [1, 2]}, "t", dashed={"b"})
    plt.close("all")


def test_head_sharing_tells_16_heads_apart() -> None:
    """16 K/V heads: 16 different colours, labels in contrasting text, markers that do not touch (issue 21)."""
    sharing = HeadSharing(16, 16)
    ax = sharing.figure.axes[0]
    _squares, kv = ax.collections  # the query squares, then the K/V circles
    assert isinstance(kv, PathCollection)
    colours = {tuple(np.round(c, 3)) for c in np.asarray(kv.get_facecolor(), dtype=float)}
    assert len(colours) == 16, "K/V heads share a colour"
    sharing.figure.canvas.draw()
    centres = kv.get_offset_transform().transform(kv.get_offsets())[:, 0]  # display pixels
    # a circle marker of size s (points^2) has a diameter of sqrt(s) points
    diameter = np.sqrt(kv.get_sizes()[0]) * sharing.figure.dpi / 72
    assert np.diff(centres).min() > diameter * 1.1, "neighbouring K/V circles touch"
    for text in ax.texts:
        fill = head_colour(int(text.get_text().removeprefix("kv").removeprefix("q")))
        if text.get_text().startswith("kv"):
            assert text.get_color() == text_colour(fill)


def test_head_sharing_readout_keeps_i_g_together() -> None:
    sharing = HeadSharing(8, 2)
    sharing.controls["mapping"].value = "tile"
    assert sharing.data["readout"].endswith("compare with i // g.")
    assert "i\u00a0//\u00a0g." in sharing.readout.value, "the readout may break the line before a lone 'g.'"


def test_the_calculator_says_what_it_did_with_an_entry_it_cannot_use() -> None:
    """Issue 31: a context or batch of 0 (or past the calculator's range) is counted as the nearest usable
    value, and the readout says so first; a usable entry gets no such note."""
    calc = KVCacheCalculator()
    calc.controls["tokens"].value = 0
    assert calc.data["tokens"] == 1
    assert calc.data["readout"].startswith("A context of 0 tokens holds no cache: counted as 1.")
    calc.controls["batch"].value = -3
    assert "A batch of -3 holds no cache: counted as 1." in calc.data["readout"] and calc.data["batch"] == 1
    calc.controls["tokens"].value = 20_000_000
    assert "A context of 20,000,000 tokens is more than this calculator counts (10,000,000): counted as " \
        "10,000,000." in calc.data["readout"]
    calc.controls["tokens"].value, calc.controls["batch"].value = 4096, 1
    assert calc.data["readout"].startswith("Llama 3 8B: 32 layers")
