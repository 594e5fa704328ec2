"""Drawings for lesson 06: KV-cache sizes and growth, which query heads share which K/V head, conversion error.

Each function draws data it is given (computed by `lessons_lib.kv_cache` or `lessons_lib.gqa_numpy`)
onto ``ax`` (a new pyplot figure when ``ax`` is ``None``) and returns the figure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure

from lessons_lib.kv_cache import format_bytes
from lessons_lib.plotting import MAX_FIGURE_INCHES
from lessons_lib.plotting.palette import head_colour, text_colour

__all__ = [
    "clear_drawing",
    "plot_cache_growth",
    "plot_cache_ladder",
    "plot_conversion_error",
    "plot_head_sharing",
    "plot_models_cache",
    "plot_step_times",
]

GIB = 1024**3


def _axes(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure | SubFigure, Axes]:
    if ax is None:
        fig, ax = plt.subplots(figsize=size)
        return fig, ax
    return ax.figure, ax


def plot_cache_ladder(rows: Sequence[tuple[str, int, int]], title: str, ax: Axes | None = None) -> Figure | SubFigure:
    """Bars of cache bytes for rows ``(label, h_kv, bytes)``, e.g. from `kv_cache.ladder`."""
    fig, ax = _axes(ax, (5.5, 3.2))
    sizes = [n / GIB for _, _, n in rows]
    bars = ax.bar(range(len(rows)), sizes, color=["#9e9e9e", "#1f77b4", "#ff7f0e"][: len(rows)])
    for bar, (_, _, n) in zip(bars, rows, strict=True):
        ax.annotate(
            format_bytes(n), (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=9
        )
    ax.set_xticks(range(len(rows)), [f"{label}\nh_kv={kv}" for label, kv, _ in rows])
    ax.set_ylim(0, 1.2 * max(sizes))  # room for the labels above the bars
    ax.set_yticks([])  # each bar carries its size; a scale would only repeat it
    ax.set_ylabel("KV cache, to scale")
    ax.set_title(title, fontsize=10)
    return fig


def clear_drawing(ax: Axes) -> None:
    """Remove what a ``plot_*`` function drew on ``ax`` (lines, bars, markers, labels), keep the axes.

    Faster than ``ax.clear()``, which also rebuilds the axes' ticks: a widget that redraws its
    chart on every change calls this first.
    """
    for container in list(ax.containers):
        container.remove()  # the bars of a bar chart, with the container that groups them
    for artist in [*ax.lines, *ax.patches, *ax.collections, *ax.texts]:
        artist.remove()


def plot_models_cache(
    names: Sequence[str], actual: Sequence[int], mha: Sequence[int], tokens: int, ax: Axes | None = None
) -> Figure | SubFigure:
    """Horizontal bars per model: the cache it really keeps vs its MHA-equivalent (bytes)."""
    fig, ax = _axes(ax, (6.5, 3.2))
    rows = range(len(names))
    ax.barh(
        [r + 0.2 for r in rows], [n / GIB for n in mha], height=0.4, color="#9e9e9e", label="MHA-equivalent (h_kv = h)"
    )
    ax.barh([r - 0.2 for r in rows], [n / GIB for n in actual], height=0.4, color="#1f77b4", label="as configured")
    ax.set_yticks(list(rows), list(names))
    ax.invert_yaxis()
    ax.set_xlabel(f"KV cache for one sequence of {tokens} tokens, 2-byte elements (GiB)")
    ax.legend(fontsize=9, loc="lower right")
    return fig


def plot_head_sharing(mapping: Sequence[int], kv_heads: int, title: str, ax: Axes | None = None) -> Figure | SubFigure:
    """Query heads (top row) joined to the key/value head each reads (bottom row).

    ``mapping[i]`` is the K/V head of query head ``i``; colours follow the K/V head (`palette.HEAD_COLOURS`,
    distinct for up to 16 heads) and every marker is labelled (``q{i}`` and ``kv{j}``; past 10 K/V heads the
    circles carry the number ``j`` alone, which fits them). Markers shrink with the number of heads, so
    neighbours never touch.
    """
    heads = len(mapping)
    # 6 in for up to 11 heads, wider for more (at most the page column), so the labels keep 9 pt
    fig, ax = _axes(ax, (min(MAX_FIGURE_INCHES, max(6.0, 0.45 * (heads + 1) + 0.5)), 2.6))
    span = max(heads - 1, 1)
    kv_x = [span * (j + 0.5) / kv_heads - 0.5 for j in range(kv_heads)]
    # Marker width: at most 75% of the distance between neighbours (in points), never more than 20 pt.
    box = ax.get_position()
    axes_points = box.width * fig.get_figwidth() * 72 if isinstance(fig, Figure) else 300.0
    step = axes_points / (heads + 1)  # x runs from -1 to heads: heads + 1 units
    side = min(20.0, 0.75 * step)
    fontsize = 9 if side >= 17 else 7.5
    for i, j in enumerate(mapping):
        ax.plot([i, kv_x[j]], [1, 0], color=head_colour(j), lw=1.5, zorder=1)
    ax.scatter(range(heads), [1] * heads, s=side**2, marker="s", c=[head_colour(j) for j in mapping], zorder=2)
    ax.scatter(kv_x, [0] * kv_heads, s=side**2 * 1.1, marker="o", c=[head_colour(j) for j in range(kv_heads)],
               zorder=2)
    for i, j in enumerate(mapping):
        ax.annotate(f"q{i}", (i, 1), ha="center", va="center", fontsize=fontsize, color=text_colour(head_colour(j)),
                    zorder=3)
    for j, x in enumerate(kv_x):
        # "kv10" is wider than its circle: past 10 K/V heads the circles carry the bare number j
        ax.annotate(f"kv{j}" if kv_heads <= 10 else str(j), (x, 0), ha="center", va="center", fontsize=fontsize,
                    color=text_colour(head_colour(j)), zorder=3)
    ax.set_yticks([0, 1], ["K/V heads", "query heads"])
    ax.tick_params(labelsize=9)
    ax.set_xticks([])
    ax.set_ylim(-0.4, 1.4)
    ax.set_xlim(-1, heads)
    for side_name in ("top", "right", "bottom"):
        ax.spines[side_name].set_visible(False)
    ax.set_title(title, fontsize=10)
    return fig


def plot_conversion_error(
    kv_heads: Sequence[int], errors: dict[str, Sequence[float]], heads: int, ax: Axes | None = None
) -> Figure | SubFigure:
    """Relative output error of mean-pooled GQA vs the original MHA layer, one line per case."""
    fig, ax = _axes(ax, (5.5, 3.2))
    for label, values in errors.items():
        ax.plot(kv_heads, values, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(kv_heads), [str(k) for k in kv_heads])
    ax.invert_xaxis()
    ax.set_xlabel(f"h_kv (h = {heads}); MHA on the left, MQA on the right")
    ax.set_ylabel("relative error of outputs")
    ax.legend(fontsize=9)
    return fig


def plot_cache_growth(
    steps: Sequence[int],
    curves: Mapping[str, Sequence[int]],
    title: str,
    dashed: Collection[str] = (),
    ax: Axes | None = None,
) -> Figure | SubFigure:
    """One line per variant: cache bytes (drawn in GiB) after each decoding step.

    ``steps[i]`` is the number of tokens decoded so far and ``curves[label][i]`` the cache in bytes
    at that step (e.g. from `kv_cache.cache_bytes`). Labels in ``dashed`` are drawn dashed (a
    sliding-window variant, say); the legend lists the labels in the order of ``curves``. Without
    ``ax`` the figure has two panels with the same lines, side by side within a lesson page's width:
    a linear scale (how the cache grows) at left and a logarithmic one (so that the small caches
    stay visible next to the large ones) at right, and one legend for both, under them.
    """
    unknown = set(dashed) - set(curves)
    if unknown:
        raise ValueError(f"dashed names curves that are not drawn: {sorted(unknown)}; curves: {list(curves)}")
    for label, sizes in curves.items():
        if len(sizes) != len(steps):
            raise ValueError(f"curve {label!r} has {len(sizes)} values for {len(steps)} steps")
    if ax is not None:
        _draw_growth(ax, steps, curves, dashed, log=False)
        ax.legend(fontsize=9, loc="upper left")
        ax.set_title(title, fontsize=10)
        return ax.figure
    # A fixed layout, in inches, as wide as the page column allows: the legend sits under both panels.
    width, height = MAX_FIGURE_INCHES, 4.0
    fig, (linear, logarithmic) = plt.subplots(1, 2, figsize=(width, height))
    fig.subplots_adjust(left=0.6 / width, right=1 - 0.1 / width, bottom=0.95 / height, top=1 - 0.55 / height,
                        wspace=0.35)
    _draw_growth(linear, steps, curves, dashed, log=False)
    _draw_growth(logarithmic, steps, curves, dashed, log=True)
    linear.set_title("linear scale", fontsize=10)
    logarithmic.set_title("logarithmic scale", fontsize=10)
    linear.legend(fontsize=9, loc="lower center", bbox_to_anchor=(0.5, 0.0), bbox_transform=fig.transFigure,
                  ncols=2, frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig


def _draw_growth(
    ax: Axes, steps: Sequence[int], curves: Mapping[str, Sequence[int]], dashed: Collection[str], log: bool
) -> None:
    for label, sizes in curves.items():
        ax.plot(steps, [n / GIB for n in sizes], label=label, lw=2, ls="--" if label in dashed else "-")
    ax.set_xlim(0, max(steps))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=4, integer=True))  # room for 5-digit labels
    if log:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: format_bytes(round(y * GIB))))
        ax.set_ylabel("KV cache, all layers", fontsize=10)
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("KV cache, all layers (GiB)", fontsize=10)
    ax.set_xlabel("decoding step (tokens so far)", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)


def plot_step_times(
    tokens: Sequence[int], seconds: Mapping[str, Sequence[float]], title: str, ax: Axes | None = None
) -> Figure | SubFigure:
    """Time of one decoding step (drawn in milliseconds, log scale) against the tokens already decoded.

    ``seconds[label][i]`` is the measured time at ``tokens[i]`` (e.g. from `kv_cache.time_decode_step`),
    one line per way of decoding. Both axes are logarithmic: a cost that grows like ``T`` and one
    that grows like ``T^2`` become straight lines of slope 1 and 2.
    """
    for label, values in seconds.items():
        if len(values) != len(tokens):
            raise ValueError(f"line {label!r} has {len(values)} times for {len(tokens)} token counts")
    fig, ax = _axes(ax, (5.5, 3.4))
    for label, values in seconds.items():
        ax.plot(tokens, [1000 * t for t in values], marker="o", lw=2, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(tokens), [str(t) for t in tokens])
    ax.set_xlabel("tokens already decoded (T)", fontsize=10)
    ax.set_ylabel("time of one step (ms)", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title(title, fontsize=10)
    return fig
