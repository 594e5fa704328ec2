"""The MLA data-flow figure: every box's text is written from the sizes given, the cached and
left-out boxes are drawn as such, the title names the sizes, and bad sizes are rejected."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import same_color as same_colour
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Annotation, Text

from lessons_lib.mla import LatentAttention
from lessons_lib.plotting.latent_flow import ABSORBED_COLOUR, BOXES, SIZE_KEYS, flow_labels, plot_latent_flow

X = "\u00d7"  # the multiplication sign the labels use
DEEPSEEK_V2 = {"D": 5120, "h": 128, "d_c": 512, "d_nope": 128, "d_rope": 64, "d_v": 128}


def box_texts(fig: Figure) -> dict[str, str]:
    """The text of every box, by the name stored as its ``gid``."""
    ax = fig.axes[0]
    return {str(t.get_gid()): t.get_text() for t in ax.texts if isinstance(t, Text) and t.get_gid()}


def test_box_texts_match_the_layer_sizes() -> None:
    layer = LatentAttention(20, 5, latent_width=7, rope_width=6, nope_width=3, value_width=9, seed=2)
    fig = plot_latent_flow(layer.sizes)
    texts = box_texts(fig)
    assert texts == flow_labels(layer.sizes)
    assert "D = 20" in texts["x"]
    assert f"5 {X} 3" in texts["q"] and f"5 {X} 3" in texts["k"]  # h x d_nope
    assert f"5 {X} 9" in texts["v"]  # h x d_v
    assert "d_c = 7" in texts["latent"] and "CACHED" in texts["latent"]
    assert "d_rope = 6" in texts["rope_key"] and "CACHED" in texts["rope_key"]
    assert f"5 {X} 7" in texts["absorbed_q"]  # h x d_c
    assert "= 9" in texts["scores"] and "= 13" in texts["scores"]  # d_nope + d_rope, d_c + d_rope
    title = fig.axes[0].get_title()
    for key, value in layer.sizes.items():
        assert f"{key} = {value}" in title
    plt.close(fig)


def test_deepseek_sizes_and_left_out_parts() -> None:
    fig = plot_latent_flow(DEEPSEEK_V2, query_latent_width=1536)
    texts = box_texts(fig)
    assert "over d_nope + d_rope = 192" in texts["scores"] and "over d_c + d_rope = 576" in texts["scores"]
    assert "d_c' = 1536" in texts["query_latent"] and "q_a_layernorm" in texts["query_latent"]
    assert "RMSNorm(c)" in texts["kv_norm"] and "kv_a_layernorm" in texts["kv_norm"]
    for name in ("query_latent", "kv_norm"):
        assert "not in this lesson's layer" in texts[name]
    arrow_labels = [t.get_text() for t in fig.axes[0].texts if not t.get_gid()]
    assert f"W_dkv (5120 {X} 512)" in arrow_labels and f"W_kr (5120 {X} 64)" in arrow_labels
    # DeepSeek-V2's queries come from the query latent c^Q, not from x
    assert texts["q"].startswith("q_i = c^Q W_uq[i]") and "RoPE(c^Q W_qr[i])" in texts["q_rope"]
    assert "W_uq[i]" in arrow_labels and "W_q[i]" not in arrow_labels
    plt.close(fig)


def test_absorbed_route_has_a_value_side() -> None:
    """The absorbed route draws the score side and the value side: the weights mix c, then W_uv W_o."""
    fig = plot_latent_flow(DEEPSEEK_V2)
    texts = box_texts(fig)
    assert "absorbed: (weights_i c) (d_c = 512)" in texts["output"] and "W_uv[i] W_o[i]" in texts["output"]
    assert "explicit: o_i = weights_i v_i (d_v = 128)" in texts["output"]
    arrow_labels = [t.get_text() for t in fig.axes[0].texts if not t.get_gid()]
    assert f"absorbed: weights {X} c, then W_uv[i] W_o[i]" in arrow_labels and "absorbed: c itself" in arrow_labels
    arrows = [a.arrow_patch for a in fig.axes[0].texts if isinstance(a, Annotation) and a.arrow_patch is not None]
    orange = [a for a in arrows if same_colour(a.get_edgecolor(), ABSORBED_COLOUR)]
    assert len(orange) == 4  # score side: x W_uk^T, into the scores, c itself; value side: weights x c
    assert texts["q"].startswith("q_i = x W_q[i]")  # the lesson's layer: queries straight from x
    plt.close(fig)


@pytest.mark.parametrize(("query_latent_width", "count", "left_out"), [(None, 11, 1), (1536, 12, 2)])
def test_cached_boxes_thick_left_out_boxes_dashed(query_latent_width: int | None, count: int, left_out: int) -> None:
    fig = plot_latent_flow(DEEPSEEK_V2, query_latent_width=query_latent_width)
    boxes = [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == len(flow_labels(DEEPSEEK_V2, query_latent_width)) == count
    dashed = [b for b in boxes if b.get_linestyle() not in ("-", "solid")]
    thick = [b for b in boxes if b.get_linewidth() > 2]
    assert len(dashed) == left_out and len(thick) == 2
    legend = fig.axes[0].get_legend()
    assert legend is not None and len(legend.get_texts()) == 4
    plt.close(fig)


def test_query_latent_is_optional() -> None:
    assert "query_latent" not in flow_labels(DEEPSEEK_V2)  # the lesson's layer: queries straight from x
    assert "(d_c' = 1536)" in flow_labels(DEEPSEEK_V2, query_latent_width=1536)["query_latent"]


def test_rmsnorm_sits_after_the_latent_before_the_up_projections() -> None:
    """DeepSeek-V2 normalises the latent c after W_dkv, before W_uk / W_uv (kv_b_proj(kv_a_layernorm(c)))."""
    ys = {name: box[1] for name, box in BOXES.items()}  # the data flows down the canvas
    assert ys["x"] > ys["latent"] > ys["kv_norm"] > ys["k"] == ys["v"]
    fig = plot_latent_flow(DEEPSEEK_V2)
    arrows = [a for a in fig.axes[0].texts if isinstance(a, Annotation) and a.arrow_patch is not None]
    starts = [tuple(a.xyann) for a in arrows]
    x, y, w, h = BOXES["kv_norm"]
    on_edge = [p for p in starts if x - w / 2 - 1e-9 <= p[0] <= x + w / 2 + 1e-9
               and y - h / 2 - 1e-9 <= p[1] <= y + h / 2 + 1e-9]
    from_norm = [p for p in on_edge if abs(p[1] - (y - h / 2)) < 1e-9 or abs(p[0] - (x - w / 2)) < 1e-9]
    assert len(from_norm) == 4  # W_uk, W_uv, and both absorbed arrows leave the norm box
    plt.close(fig)


def test_bad_sizes_rejected() -> None:
    with pytest.raises(ValueError, match=r"missing \['d_v'\]"):
        flow_labels({k: v for k, v in DEEPSEEK_V2.items() if k != "d_v"})
    with pytest.raises(ValueError, match="must be positive"):
        flow_labels({**DEEPSEEK_V2, "h": 0})
    with pytest.raises(TypeError, match="must be an int"):
        plot_latent_flow({**DEEPSEEK_V2, "D": 5120.0})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="query_latent_width must be an int"):
        flow_labels(DEEPSEEK_V2, query_latent_width="1536")  # type: ignore[arg-type]
    assert SIZE_KEYS == ("D", "h", "d_c", "d_nope", "d_rope", "d_v")
