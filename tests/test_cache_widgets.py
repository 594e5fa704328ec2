"""Lesson 05 widgets: build them, drive them through .value, check the data they show."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from lessons_lib.kv_cache import MODELS, cache_bytes, kv_head_options  # noqa: E402
from lessons_lib.plotting.cache_charts import (  # noqa: E402
    plot_cache_ladder,
    plot_conversion_error,
    plot_head_sharing,
    plot_models_cache,
)
from lessons_lib.widgets.cache_widgets import HeadSharing, KVCacheCalculator  # noqa: E402

PNG_MAGIC = b"\x89PNG"


def test_calculator_starts_from_the_model_config() -> None:
    calc = KVCacheCalculator()
    preset = MODELS["Llama 3 8B"]
    assert calc.kv_heads.value == preset.kv_heads
    assert list(calc.kv_heads.options) == kv_head_options(preset.heads)
    assert calc.rows == [
        ("MHA", 32, cache_bytes(preset, 4096, kv_heads=32)),
        ("chosen (GQA)", 8, cache_bytes(preset, 4096)),
        ("MQA", 1, cache_bytes(preset, 4096, kv_heads=1)),
    ]
    assert "128 KiB per token" in calc.readout.value
    assert calc.image.value.tobytes().startswith(PNG_MAGIC)


def test_calculator_follows_every_control() -> None:
    calc = KVCacheCalculator()
    calc.model.value = "Llama 2 70B"
    assert list(calc.kv_heads.options) == [1, 2, 4, 8, 16, 32, 64]
    assert calc.kv_heads.value == 8
    calc.kv_heads.value = 16
    calc.tokens.value = 8192
    calc.batch.value = 2
    calc.bytes_per_element.value = 4
    preset = MODELS["Llama 2 70B"]
    assert calc.rows[1] == ("chosen (GQA)", 16, cache_bytes(preset, 8192, 2, kv_heads=16, bytes_per_element=4))
    assert calc.rows[0][2] == 4 * calc.rows[1][2]
    assert "h_kv=16 (g=4)" in calc.readout.value
    assert "The released model uses h_kv=8" in calc.readout.value
    calc.model.value = "Llama 2 13B"
    assert calc.kv_heads.value == 40
    assert calc.rows[1][0] == "chosen (MHA)"


def test_calculator_rejects_unknown_model() -> None:
    with pytest.raises(ValueError, match="model must be one of"):
        KVCacheCalculator(model="GPT-5")


def test_head_sharing_shows_i_div_g() -> None:
    widget = HeadSharing()
    assert widget.assignment == [0, 0, 0, 0, 1, 1, 1, 1]
    assert widget.readout.value.startswith("kv0 serves q0, q1, q2, q3; kv1 serves q4, q5, q6, q7")
    widget.heads.value = 6
    assert list(widget.kv_heads.options) == [1, 2, 3, 6]
    assert widget.kv_heads.value == 2  # still a divisor, kept
    widget.kv_heads.value = 3
    assert widget.assignment == [0, 0, 1, 1, 2, 2]
    widget.mapping.value = "tile"
    assert widget.assignment == [0, 1, 2, 0, 1, 2]
    assert "Not what GQA does" in widget.readout.value
    widget.heads.value = 4  # 3 does not divide 4: falls back to 1
    assert widget.kv_heads.value == 1
    assert widget.image.value.tobytes().startswith(PNG_MAGIC)


def test_widget_callbacks_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    calc, sharing = KVCacheCalculator(), HeadSharing()
    calc.model.value = "Mistral 7B"
    sharing.mapping.value = "tile"
    assert capsys.readouterr() == ("", "")
    assert plt.get_fignums() == []  # widgets draw without pyplot: no figure left open


def test_plotting_functions_return_figures() -> None:
    fig = plot_cache_ladder([("MHA", 4, 100), ("chosen (GQA)", 2, 50), ("MQA", 1, 25)], "t")
    assert [bar.get_height() for bar in fig.axes[0].patches] == pytest.approx([100 / 1024**3, 50 / 1024**3, 25 / 1024**3])
    fig2 = plot_head_sharing([0, 0, 1, 1], 2, "t")
    assert len(fig2.axes[0].lines) == 4
    fig3 = plot_conversion_error([4, 2, 1], {"random": [0.0, 0.5, 0.8]}, heads=4)
    assert list(fig3.axes[0].lines[0].get_ydata()) == [0.0, 0.5, 0.8]
    fig4 = plot_models_cache(["a", "b"], [1, 2], [3, 4], tokens=10)
    assert len(fig4.axes[0].patches) == 4
    plt.close("all")
