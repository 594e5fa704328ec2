"""Lesson 07 picture: the data flow of multi-head latent attention (MLA), drawn with its sizes.

`flow_labels` writes the text of every box from a layer's sizes (``LatentAttention.sizes`` or the
same keys read from a model's config), and `plot_latent_flow` draws the boxes and arrows: the
latent ``c`` (cached) up-projected into per-head keys and values, the shared rotary key (cached),
the absorbed route (score side: ``q_i W_uk[i]^T`` meets ``c`` directly; value side: the weights mix
``c`` itself, then ``W_uv[i] W_o[i]`` maps the mixture to the output), and, dashed, the parts the
lesson's layer leaves out (query compression and the RMSNorms on the latents). Given the query
latent's width, the query boxes read from ``c^Q`` as in DeepSeek-V2. The data flows down from ``x``
on a 7.65 inch wide figure, narrow enough to be shown at its own size in a lesson page.
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

# Boxes as (centre x, centre y, width, height) in inches on a 7.65 inch wide canvas, the data flowing
# down: x on top; the queries on the left and the latent on the right below it; then the absorbed
# query and the per-head keys and values; the scores beside them; the rotary key under the scores and
# the output beside it. The two left-out boxes sit on the arrows they would interrupt in DeepSeek-V2:
# the query latent between x and the queries (drawn only when its width is given), and the RMSNorm
# on the latent between the cached latent and everything that reads it (W_uk, W_uv, the absorbed route).
BOXES = {
    "x": (3.9, 9.45, 0.85, 0.5),
    "query_latent": (2.05, 8.3, 2.95, 0.72),
    "latent": (6.3, 8.3, 1.5, 0.5),
    "q_rope": (1.3, 7.05, 1.95, 0.5),
    "q": (3.45, 7.05, 1.75, 0.5),
    "kv_norm": (6.3, 7.05, 2.3, 0.5),
    "absorbed_q": (1.9, 5.75, 1.6, 0.68),
    "scores": (1.96, 4.35, 2.82, 1.0),
    "k": (4.75, 4.35, 1.7, 0.5),
    "v": (6.95, 4.35, 1.46, 0.5),
    "rope_key": (2.0, 2.85, 2.95, 0.5),
    "output": (5.93, 2.85, 2.75, 1.0),
}
CACHED = ("latent", "rope_key")
CANVAS = (0.1, 7.75, 1.3, 9.8)  # x from, x to, y from, y to, in inches (7.65 in wide)
FONT = 9.0  # every text but the title, in points: the figure is narrow enough to be shown at its own size
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
    is DeepSeek-V2's ``q_lora_rank`` (d_c'); given, a left-out query-compression box ``query_latent``
    is added and the queries are written from the query latent ``c^Q`` (DeepSeek-V2), else they read
    ``x`` (the lesson's layer) and there is no such box. ``kv_norm`` is the RMSNorm DeepSeek-V2 applies
    to the latent after ``W_dkv``, before ``W_uk`` and ``W_uv``.
    """
    n = _sizes(sizes, query_latent_width)
    D, h, d_c, d_nope, d_rope, d_v = (n[key] for key in SIZE_KEYS)
    query_source, query_up = ("c^Q", "W_uq") if "d_cq" in n else ("x", "W_q")
    query_latent = {} if "d_cq" not in n else {
        "query_latent": f"query latent c^Q = x W_dq (d_c' = {n['d_cq']}),\n"
                        f"RMSNorm (q_a_layernorm), then W_uq\n{LEFT_OUT}"}
    return {
        "x": f"x\nD = {D}",
        **query_latent,
        "q": f"q_i = {query_source} {query_up}[i]\nh {TIMES} d_nope = {h} {TIMES} {d_nope}",
        "q_rope": f"q^R_i = RoPE({query_source} W_qr[i])\nh {TIMES} d_rope = {h} {TIMES} {d_rope}",
        "kv_norm": f"RMSNorm(c) (kv_a_layernorm)\n{LEFT_OUT}",
        "latent": f"latent c = x W_dkv\nd_c = {d_c}   CACHED",
        "k": f"k_i = c W_uk[i]\nh {TIMES} d_nope = {h} {TIMES} {d_nope}",
        "v": f"v_i = c W_uv[i]\nh {TIMES} d_v = {h} {TIMES} {d_v}",
        "rope_key": f"k^R = RoPE(x W_kr)\nd_rope = {d_rope}, shared by all heads   CACHED",
        "absorbed_q": f"absorbed query\nq_i W_uk[i]^T\nh {TIMES} d_c = {h} {TIMES} {d_c}",
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


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], colour: str) -> None:
    """An arrow from ``start`` to ``end``, under the boxes."""
    ax.annotate("", xy=end, xytext=start, zorder=1, arrowprops=dict(
        arrowstyle="-|>", color=colour, lw=1.4, shrinkA=0, shrinkB=1))


def _line(ax: Axes, points: list[tuple[float, float]], colour: str) -> None:
    """A line through ``points`` (the part of a routed arrow before its last, arrow-headed, leg)."""
    xs, ys = zip(*points, strict=True)
    ax.plot(xs, ys, color=colour, lw=1.4, zorder=1, solid_joinstyle="miter")


def _label(ax: Axes, at: tuple[float, float], text: str, colour: str, ha: str = "center", rotation: float = 0) -> None:
    """An arrow's label at ``at``, on a white patch so that it reads over a line."""
    ax.text(*at, text, fontsize=FONT, color=colour, ha=ha, va="center", rotation=rotation, zorder=3,
            bbox=dict(boxstyle="round,pad=0.12", fc="white", ec="none"))


def _box(ax: Axes, name: str, text: str) -> None:
    x, y, w, h = BOXES[name]
    dashed, cached = name in DASHED, name in CACHED
    fill = CACHED_FILL if cached else LEFT_OUT_FILL if dashed else TENSOR_FILL
    fill = ABSORBED_FILL if name == "absorbed_q" else fill
    edge = LEFT_OUT_COLOUR if dashed else CACHED_EDGE if cached else "#444444"
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04", fc=fill, ec=edge,
                                lw=2.2 if cached else 1.0, ls="--" if dashed else "-", zorder=2))
    ax.text(x, y, text, ha="center", va="center", fontsize=FONT, zorder=3, gid=name,
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
    fig = plt.figure(figsize=(CANVAS[1] - CANVAS[0], CANVAS[3] - CANVAS[2] + 0.45))
    ax = fig.add_axes((0.0, 0.0, 1.0, (CANVAS[3] - CANVAS[2]) / (CANVAS[3] - CANVAS[2] + 0.45)))
    ax.set_xlim(CANVAS[0], CANVAS[1])
    ax.set_ylim(CANVAS[2], CANVAS[3])
    ax.axis("off")
    grey, orange = EXPLICIT_COLOUR, ABSORBED_COLOUR
    # From x: the queries (through the query-latent box when DeepSeek-V2's is drawn), the latent, and
    # the rotary key along the left margin, round everything else.
    if query_latent_width is not None:  # DeepSeek-V2: the queries read the query latent c^Q
        _line(ax, [_edge("x", "bottom", -0.25), _edge("query_latent", "top", 0.9)], grey)
        _arrow(ax, _edge("query_latent", "bottom", -0.75), _edge("q_rope", "top"), grey)
        _arrow(ax, _edge("query_latent", "bottom", 1.0), _edge("q", "top", -0.4), grey)
    else:  # the lesson's layer: both query parts straight from x
        _arrow(ax, _edge("x", "bottom", -0.3), _edge("q_rope", "top", 0.3), grey)
        _arrow(ax, _edge("x", "bottom", -0.1), _edge("q", "top", -0.4), grey)
    query_up = "W_uq[i]" if query_latent_width is not None else "W_q[i]"  # from c^Q in DeepSeek-V2
    _label(ax, (1.3, 7.6), "W_qr[i]", grey)
    _label(ax, (3.18, 7.6), query_up, grey)
    # x -> the cached latent -> DeepSeek-V2's RMSNorm on it -> everything that reads the latent
    _arrow(ax, _edge("x", "right"), _edge("latent", "top", -0.3), grey)
    _label(ax, (5.05, 9.05), f"W_dkv ({n['D']} {TIMES} {n['d_c']})", grey, ha="left")
    _arrow(ax, _edge("latent", "bottom"), _edge("kv_norm", "top"), grey)
    margin = CANVAS[0] + 0.12
    _line(ax, [_edge("x", "left"), (margin, BOXES["x"][1]), (margin, BOXES["rope_key"][1])], grey)
    _arrow(ax, (margin, BOXES["rope_key"][1]), _edge("rope_key", "left"), grey)
    _label(ax, (1.8, BOXES["x"][1]), f"W_kr ({n['D']} {TIMES} {n['d_rope']})", grey)
    # The latent, up-projected into every head's keys and values (the explicit route).
    _arrow(ax, _edge("kv_norm", "bottom", -0.6), _edge("k", "top", 0.25), grey)
    _label(ax, (5.35, 5.75), "W_uk[i]", grey)
    _arrow(ax, _edge("kv_norm", "bottom", 0.6), _edge("v", "top", -0.1), grey)
    _label(ax, (6.9, 5.75), "W_uv[i]", grey)
    # Into the scores: both query parts, the keys, the rotary key; then the weights to the output.
    _arrow(ax, _edge("q_rope", "bottom", -0.5), _edge("scores", "top", -1.16), grey)
    _arrow(ax, _edge("q", "bottom", -0.1), _edge("scores", "top", 1.3), grey)
    _arrow(ax, _edge("k", "left"), _edge("scores", "right"), grey)
    _arrow(ax, _edge("rope_key", "top"), _edge("scores", "bottom"), grey)
    _arrow(ax, _edge("scores", "right", -0.3), _edge("output", "left", 0.1), grey)
    _label(ax, (3.95, 3.55), "weights", grey)
    _arrow(ax, _edge("v", "bottom"), _edge("output", "top", 1.02), grey)
    # The absorbed route: the score side (the query meets the latent) and the value side.
    _arrow(ax, _edge("q", "bottom", -0.6), _edge("absorbed_q", "top", 0.55), orange)
    _label(ax, (2.55, 6.45), f"{TIMES} W_uk[i]^T", orange, ha="right")
    _arrow(ax, _edge("absorbed_q", "bottom"), _edge("scores", "top", -0.06), orange)
    _arrow(ax, _edge("kv_norm", "left", -0.1), _edge("scores", "right", 0.35), orange)
    _label(ax, (4.25, 5.62), "absorbed: c itself", orange)
    channel = BOXES["output"][0]  # down the gap between the keys and the values
    top, bottom = _edge("kv_norm", "bottom")[1], _edge("output", "top")[1]
    _arrow(ax, (channel, top), (channel, bottom), orange)
    _label(ax, (channel, (top + bottom) / 2), f"absorbed: weights {TIMES} c, then W_uv[i] W_o[i]", orange, rotation=90)
    for name, text in labels.items():
        _box(ax, name, text)
    legend = [
        Line2D([], [], color=grey, lw=1.4, label="explicit route: rebuild K, V per head"),
        Line2D([], [], color=orange, lw=1.4, label="absorbed route: queries meet the latent, weights mix it"),
        Patch(fc=CACHED_FILL, ec=CACHED_EDGE, lw=2.2, label="cached per token and layer"),
        Patch(fc="white", ec=LEFT_OUT_COLOUR, ls="--", label="in DeepSeek-V2, " + LEFT_OUT),
    ]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(CANVAS[0], 2.2), bbox_transform=ax.transData,
              fontsize=FONT, frameon=False, borderaxespad=0)
    if title is None:
        title = ("MLA data flow: D = {D}, h = {h}, d_c = {d_c}, d_nope = {d_nope}, d_rope = {d_rope}, "
                 "d_v = {d_v}").format(**n)
    ax.set_title(title, fontsize=10.5)
    return fig
