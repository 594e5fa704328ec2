"""Lesson 07 picture: the data flow of multi-head latent attention (MLA), drawn with its sizes.

`flow_labels` writes the text of every box from a layer's sizes (``LatentAttention.sizes`` or the
same keys read from a model's config), and `plot_latent_flow` draws the boxes and arrows: the
latent ``c`` (cached) up-projected into per-head keys and values, the shared rotary key (cached),
the absorbed route (score side: ``q_i W_uk[i]^T`` meets ``c`` directly; value side: the weights mix
``c`` itself, then ``W_uv[i] W_o[i]`` maps the mixture to the output), and, dashed, the parts the
lesson's layer leaves out (query compression and the RMSNorms on the latents). Given the query
latent's width, the query boxes read from ``c^Q`` as in DeepSeek-V2.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Patch

from lessons_lib.validation import check_int

__all__ = ["SIZE_KEYS", "flow_labels", "plot_latent_flow"]

SIZE_KEYS = ("D", "h", "d_c", "d_nope", "d_rope", "d_v")
LEFT_OUT = "not in this lesson's layer"
TIMES = "\u00d7"  # the multiplication sign in "h x d_c"

CACHED_FILL, TENSOR_FILL, LEFT_OUT_FILL, ABSORBED_FILL = "#d6e6f5", "#f4f4f4", "white", "#fde3c8"
CACHED_EDGE = "#1f5fa0"
EXPLICIT_COLOUR, ABSORBED_COLOUR, LEFT_OUT_COLOUR = "#555555", "#d9730d", "#888888"

# Boxes as (centre x, centre y, width, height) on a 15.4 x 8 canvas: queries on top, the latent in
# the middle, the rotary key at the bottom, attention on the right. The two left-out boxes sit on
# the arrows they would interrupt in DeepSeek-V2.
BOXES = {
    "x": (0.9, 4.0, 1.3, 0.8),
    "query_latent": (3.45, 5.8, 3.1, 1.0),
    "q": (7.4, 7.2, 2.8, 0.8),
    "q_rope": (7.4, 5.7, 3.0, 0.8),
    "kv_norm": (3.75, 4.0, 3.0, 0.8),
    "latent": (6.8, 4.0, 2.4, 0.8),
    "k": (9.9, 4.85, 2.6, 0.8),
    "v": (9.9, 3.0, 2.6, 0.8),
    "rope_key": (8.0, 1.2, 3.6, 0.8),
    "absorbed_q": (11.5, 7.2, 3.2, 0.8),
    "scores": (13.5, 5.0, 3.5, 1.7),
    "output": (13.5, 1.45, 3.5, 1.3),
}
CACHED = ("latent", "rope_key")
DASHED = ("query_latent", "kv_norm")


def _sizes(sizes: Mapping[str, int], query_latent_width: int | None) -> dict[str, int]:
    """The six sizes as ints (plus ``d_cq`` when given); ``ValueError`` naming a missing key."""
    missing = [key for key in SIZE_KEYS if key not in sizes]
    if missing:
        raise ValueError(
            f"sizes is missing {missing}; give all of {list(SIZE_KEYS)}, e.g. LatentAttention(...).sizes"
        )
    checked = {key: check_int(f"sizes[{key!r}]", sizes[key], symbol=key) for key in SIZE_KEYS}
    if query_latent_width is not None:
        checked["d_cq"] = check_int("query_latent_width", query_latent_width, symbol="d_c'")
    return checked


def flow_labels(sizes: Mapping[str, int], query_latent_width: int | None = None) -> dict[str, str]:
    """The text of every box of `plot_latent_flow`, keyed by box name, with the given sizes.

    ``sizes`` holds ``D, h, d_c, d_nope, d_rope, d_v`` (see `SIZE_KEYS`); ``query_latent_width``
    is DeepSeek-V2's ``q_lora_rank`` (d_c'), shown in the left-out query-compression box; given, the
    queries are written from the query latent ``c^Q`` (DeepSeek-V2), else from ``x`` (the lesson's layer).
    """
    n = _sizes(sizes, query_latent_width)
    D, h, d_c, d_nope, d_rope, d_v = (n[key] for key in SIZE_KEYS)
    d_cq = f"d_c' = {n['d_cq']}" if "d_cq" in n else "d_c'"
    query_source, query_up = ("c^Q", "W_uq") if "d_cq" in n else ("x", "W_q")
    return {
        "x": f"x\nD = {D}",
        "query_latent": f"query latent c^Q = x W_dq ({d_cq}),\nRMSNorm (q_a_layernorm), then W_uq\n{LEFT_OUT}",
        "q": f"q_i = {query_source} {query_up}[i]\nh {TIMES} d_nope = {h} {TIMES} {d_nope}",
        "q_rope": f"q^R_i = RoPE({query_source} W_qr[i])\nh {TIMES} d_rope = {h} {TIMES} {d_rope}",
        "kv_norm": f"RMSNorm on c (kv_a_layernorm)\n{LEFT_OUT}",
        "latent": f"latent c = x W_dkv\nd_c = {d_c}   CACHED",
        "k": f"k_i = c W_uk[i]\nh {TIMES} d_nope = {h} {TIMES} {d_nope}",
        "v": f"v_i = c W_uv[i]\nh {TIMES} d_v = {h} {TIMES} {d_v}",
        "rope_key": f"k^R = RoPE(x W_kr)\nd_rope = {d_rope}, shared by all heads   CACHED",
        "absorbed_q": f"absorbed query q_i W_uk[i]^T\nh {TIMES} d_c = {h} {TIMES} {d_c}",
        "scores": (
            f"scores of head i\nexplicit: [q_i; q^R_i]·[k_i; k^R]\nover d_nope + d_rope = {d_nope + d_rope}\n"
            f"absorbed: (q_i W_uk[i]^T)·c + q^R_i·k^R\nover d_c + d_rope = {d_c + d_rope}"
        ),
        "output": (
            f"softmax, then per head i:\nexplicit: o_i = weights_i v_i (d_v = {d_v}),\n"
            f"out = Σ_i o_i W_o[i]   (D = {D})\n"
            f"absorbed: (weights_i c) (d_c = {d_c}),\nout = Σ_i (weights_i c) W_uv[i] W_o[i]"
        ),
    }


def _edge(name: str, side: str, shift: float = 0.0) -> tuple[float, float]:
    """A point on one side of a box, ``shift`` along that side from its middle."""
    x, y, w, h = BOXES[name]
    return {"left": (x - w / 2, y + shift), "right": (x + w / 2, y + shift),
            "top": (x + shift, y + h / 2), "bottom": (x + shift, y - h / 2)}[side]


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], colour: str, label: str = "",
           at: float = 0.5, dashed: bool = False, bend: float = 0.0) -> None:
    """An arrow from ``start`` to ``end``, labelled just above the point a fraction ``at`` along the
    straight line between them; ``bend`` curves it (matplotlib's arc3 ``rad``)."""
    ax.annotate("", xy=end, xytext=start, zorder=1, arrowprops=dict(
        arrowstyle="-|>", color=colour, lw=1.4, linestyle="--" if dashed else "-", shrinkA=0, shrinkB=1,
        connectionstyle=f"arc3,rad={bend}"))
    if label:
        x, y = start[0] + at * (end[0] - start[0]), start[1] + at * (end[1] - start[1]) + 0.08
        ax.text(x, y, label, fontsize=8, color=colour, ha="center", va="bottom", zorder=3,
                bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.9))


def _box(ax: Axes, name: str, text: str) -> None:
    x, y, w, h = BOXES[name]
    dashed, cached = name in DASHED, name in CACHED
    fill = CACHED_FILL if cached else LEFT_OUT_FILL if dashed else TENSOR_FILL
    fill = ABSORBED_FILL if name == "absorbed_q" else fill
    edge = LEFT_OUT_COLOUR if dashed else CACHED_EDGE if cached else "#444444"
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04", fc=fill, ec=edge,
                                lw=2.2 if cached else 1.0, ls="--" if dashed else "-", zorder=2))
    ax.text(x, y, text, ha="center", va="center", fontsize=8, zorder=3, gid=name,
            color=LEFT_OUT_COLOUR if dashed else "black")


def plot_latent_flow(
    sizes: Mapping[str, int], query_latent_width: int | None = None, title: str | None = None
) -> Figure:
    """MLA's data flow with the boxes labelled by `flow_labels` (``sizes`` as there); returns the figure.

    Grey arrows: the explicit route (rebuild every head's K and V). Orange: the absorbed route
    (queries meet the cached latent). Dashed: parts of DeepSeek-V2 the lesson's layer leaves out.
    Blue boxes are what the cache keeps per token and layer. Each box's text has ``gid`` = its name.
    """
    labels = flow_labels(sizes, query_latent_width)
    n = _sizes(sizes, query_latent_width)
    fig, ax = plt.subplots(figsize=(12.5, 6.6))
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.93)
    ax.set_xlim(0, 15.4)
    ax.set_ylim(0, 8.0)
    ax.axis("off")
    grey, orange = EXPLICIT_COLOUR, ABSORBED_COLOUR
    query_up = "W_uq[i]" if query_latent_width is not None else "W_q[i]"  # from c^Q in DeepSeek-V2
    _arrow(ax, _edge("x", "top"), _edge("q", "left"), grey, query_up, at=0.85)
    _arrow(ax, _edge("x", "right", 0.3), _edge("q_rope", "left"), grey, "W_qr[i]", at=0.88)
    _arrow(ax, _edge("x", "right"), _edge("latent", "left"), grey)
    ax.text(1.62, 3.93, f"W_dkv\n{n['D']} {TIMES} {n['d_c']}", fontsize=8, color=grey, va="top", zorder=3)
    _arrow(ax, _edge("x", "bottom"), _edge("rope_key", "left"), grey, f"W_kr ({n['D']} {TIMES} {n['d_rope']})")
    _arrow(ax, _edge("latent", "right", 0.2), _edge("k", "left"), grey, "W_uk[i]")
    _arrow(ax, _edge("latent", "right", -0.2), _edge("v", "left"), grey, "W_uv[i]")
    _arrow(ax, _edge("q", "bottom", 1.0), _edge("scores", "top", -1.1), grey)
    _arrow(ax, _edge("q_rope", "right"), _edge("scores", "left", 0.3), grey)
    _arrow(ax, _edge("k", "right"), _edge("scores", "left", -0.15), grey)
    _arrow(ax, _edge("rope_key", "right"), _edge("scores", "bottom", -0.5), grey)
    _arrow(ax, _edge("v", "right"), _edge("output", "top", -1.2), grey)
    _arrow(ax, _edge("scores", "bottom", 1.0), _edge("output", "top", 1.0), grey, "weights")
    _arrow(ax, _edge("q", "right"), _edge("absorbed_q", "left"), orange, f"{TIMES} W_uk[i]^T")
    _arrow(ax, _edge("absorbed_q", "right", -0.2), _edge("scores", "top", 0.8), orange)
    _arrow(ax, _edge("latent", "right"), _edge("scores", "left", -0.6), orange, "absorbed: c itself")
    _arrow(ax, _edge("latent", "bottom", 0.6), _edge("output", "left", -0.3), orange,
           f"absorbed: weights {TIMES} c, then W_uv[i] W_o[i]", at=0.62, bend=0.12)
    for name, text in labels.items():
        _box(ax, name, text)
    legend = [
        Line2D([], [], color=grey, lw=1.4, label="explicit route: rebuild K, V per head"),
        Line2D([], [], color=orange, lw=1.4, label="absorbed route: queries meet the latent, weights mix it"),
        Patch(fc=CACHED_FILL, ec=CACHED_EDGE, lw=2.2, label="cached per token and layer"),
        Patch(fc="white", ec=LEFT_OUT_COLOUR, ls="--", label="in DeepSeek-V2, " + LEFT_OUT),
    ]
    ax.legend(handles=legend, loc="lower left", fontsize=8, frameon=False)
    if title is None:
        title = ("MLA data flow: D = {D}, h = {h}, d_c = {d_c}, d_nope = {d_nope}, d_rope = {d_rope}, "
                 "d_v = {d_v}").format(**n)
    ax.set_title(title, fontsize=11)
    return fig
