"""Lesson 09 picture: the residual stream of a pre-norm block, and where each head reads and writes.

`block_labels` writes the text of every box from a block's sizes (``D``, ``h``, ``F``), and
`plot_residual_stream` draws them: the stream ``x (B, T, D)`` runs upwards on the left, from the
embeddings to whatever reads the block's output; the attention sub-layer, on its right, reads a
LayerNorm'd copy, every head (stacked one above the other) reads all ``D`` features through its own
columns of ``W_q``, ``W_k``, ``W_v`` and writes back through its own ``d_h`` rows of ``W_o``; the
writes join, and their sum is added to the stream; above it, the feed-forward sub-layer reads and
adds the same way. The figure is 7.6 inches wide, narrow enough to be shown at its own size.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from lessons_lib.validation import check_int, head_width

__all__ = ["block_labels", "plot_residual_stream", "shown_heads"]

STREAM_COLOUR, HEAD_FILL, NORM_FILL, FFN_FILL, END_FILL = "#1f5fa0", "#d9ead3", "#ead1dc", "#fce5cd", "#e8e8e8"
HEAD_WRITE, FFN_WRITE = "#38761d", "#b45f06"
MOST_HEADS_DRAWN = 5  # more heads: the first three, a gap, and the last
FONT = 9.5  # every text but the title and the plus signs, in points (the figure is shown at its own size)
# The canvas in inches (1 data unit = 1 inch): the stream's x, the columns of the norms, the heads and
# the feed-forward box, the line the heads' writes join on; the boxes' widths, the heads' stack (bottom, pitch).
CANVAS_WIDTH, TITLE_SPACE = 7.6, 0.45
STREAM_X, NORM_X, HEAD_X, FFN_X, WRITE_X = 0.95, 2.35, 5.2, 4.3, 7.3
NORM_WIDTH, HEAD_WIDTH, HEADS_BOTTOM, HEAD_PITCH, PLUS_RADIUS = 1.05, 3.5, 1.3, 0.7, 0.17


def shown_heads(heads: int) -> list[int | None]:
    """The heads drawn as boxes, in order; ``None`` marks the gap standing for the heads left out."""
    heads = check_int("heads", heads, symbol="h")
    if heads <= MOST_HEADS_DRAWN:
        return list(range(heads))
    return [0, 1, 2, None, heads - 1]


def block_labels(width: int, heads: int, hidden: int, activation: str = "relu") -> dict[str, str]:
    """The text of every box of `plot_residual_stream`, by box name (heads as ``head 0`` ...)."""
    D, h, F = check_int("width", width, symbol="D"), check_int("heads", heads, symbol="h"), check_int("hidden", hidden)
    d_h = head_width(D, h)
    labels = {
        "embed": f"tokens -> embeddings\nx (B, T, D={D})",
        "out": "next block,\nor unembedding\n-> logits",
        "norm1": "LayerNorm 1",
        "norm2": "LayerNorm 2",
        "ffn": f"feed-forward\nD={D} -> F={F} -> D\n({activation}), each position alone",
        "attention_add": "+",
        "ffn_add": "+",
    }
    for i in shown_heads(h):
        if i is not None:
            columns, rows = f"{i * d_h}:{(i + 1) * d_h}", f"{i * d_h}:{(i + 1) * d_h}"
            labels[f"head {i}"] = (f"head {i}: reads all D via W_q[:, {columns}],\n"
                                   f"W_k[:, {columns}], W_v[:, {columns}]; writes via W_o[{rows}, :]")
    return labels


def _box(ax: Axes, name: str, text: str, centre: tuple[float, float], size: tuple[float, float], fill: str) -> None:
    (x, y), (w, h) = centre, size
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04", facecolor=fill,
                                edgecolor="black", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=FONT, gid=name)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], colour: str = "black") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=colour, linewidth=1.1,
                                 shrinkA=0, shrinkB=0))


def _line(ax: Axes, xs: list[float], ys: list[float], colour: str) -> None:
    ax.plot(xs, ys, color=colour, linewidth=1.1, solid_capstyle="butt")


def plot_residual_stream(
    width: int, heads: int, hidden: int, activation: str = "relu", title: str | None = None
) -> Figure:
    """The pre-norm block ``x = x + MHA(LN1(x)); x = x + FFN(LN2(x))`` drawn on its stream.

    The stream runs upwards on the left; each sub-layer reads it through an arrow to the right and
    writes back through an arrow from the right into a ``+`` on it, the attention heads' writes
    joined on one line first (they add up). Every head box names the columns it reads and the rows of
    ``W_o`` it writes through, for ``d_h = D / h``; with more than `MOST_HEADS_DRAWN` heads, the
    middle ones stand behind a gap. Sizes are in inches: the figure is 7.6 inches wide.
    """
    labels = block_labels(width, heads, hidden, activation)
    drawn = shown_heads(heads)
    # Heights, bottom up: the heads' stack (head 0 on top), the attention write, the feed-forward
    # read and write, and the box that reads the block's output.
    rows = [HEADS_BOTTOM + HEAD_PITCH * (len(drawn) - 1 - k) for k in range(len(drawn))]
    norm1_y = (rows[0] + rows[-1]) / 2
    attention_add = rows[0] + 0.8
    norm2_y = attention_add + 0.65
    ffn_add = norm2_y + 0.7
    out_y = ffn_add + 0.85
    height = out_y + 0.45
    fig = plt.figure(figsize=(CANVAS_WIDTH, height + TITLE_SPACE))
    ax = fig.add_axes((0.0, 0.0, 1.0, height / (height + TITLE_SPACE)))
    ax.set_xlim(0, CANVAS_WIDTH)
    ax.set_ylim(0, height)
    ax.axis("off")
    x = STREAM_X
    # The stream: one thick arrow up from the embeddings to whatever reads the block's output.
    ax.add_patch(FancyArrowPatch((x, 0.72), (x, out_y - 0.42), arrowstyle="simple,head_width=1.2,head_length=0.8",
                                 mutation_scale=14, color=STREAM_COLOUR, alpha=0.35, linewidth=0))
    _box(ax, "embed", labels["embed"], (x, 0.42), (1.7, 0.52), END_FILL)
    _box(ax, "out", labels["out"], (x, out_y), (1.35, 0.7), END_FILL)
    ax.text(1.95, 0.42, f"the residual stream x (B, T, D={width}): every sub-layer reads it and adds to it",
            ha="left", va="center", fontsize=FONT, color=STREAM_COLOUR)
    for name, y in (("attention_add", attention_add), ("ffn_add", ffn_add)):
        ax.add_patch(Circle((x, y), PLUS_RADIUS, facecolor="white", edgecolor="black", linewidth=1.2, zorder=3))
        ax.text(x, y, labels[name], ha="center", va="center", fontsize=12, gid=name, zorder=4)

    # Attention sub-layer: read, normalise, h heads stacked, their writes joined, summed and added.
    _arrow(ax, (x + 0.08, norm1_y), (NORM_X - NORM_WIDTH / 2 - 0.05, norm1_y))
    _box(ax, "norm1", labels["norm1"], (NORM_X, norm1_y), (NORM_WIDTH, 0.4), NORM_FILL)
    written = []
    for i, y in zip(drawn, rows, strict=True):
        if i is None:
            ax.text(HEAD_X, y, "...", ha="center", va="center", fontsize=14)
            continue
        _box(ax, f"head {i}", labels[f"head {i}"], (HEAD_X, y), (HEAD_WIDTH, 0.52), HEAD_FILL)
        # each head reads the same normalised copy, and writes out to the right
        _arrow(ax, (NORM_X + NORM_WIDTH / 2 + 0.05, norm1_y), (HEAD_X - HEAD_WIDTH / 2 - 0.05, y))
        _line(ax, [HEAD_X + HEAD_WIDTH / 2 + 0.05, WRITE_X], [y, y], HEAD_WRITE)
        written.append(y)
    _line(ax, [WRITE_X, WRITE_X], [min(written), attention_add], HEAD_WRITE)  # the writes add up
    _arrow(ax, (WRITE_X + 0.006, attention_add), (x + PLUS_RADIUS, attention_add), colour=HEAD_WRITE)
    ax.text(HEAD_X, rows[0] + 0.5,
            f"multi-head attention, h={heads}, d_h={head_width(width, heads)}: the heads' writes add up",
            ha="center", va="center", fontsize=FONT)

    # Feed-forward sub-layer, reading the stream after the heads' writes.
    _arrow(ax, (x + 0.08, norm2_y), (NORM_X - NORM_WIDTH / 2 - 0.05, norm2_y))
    _box(ax, "norm2", labels["norm2"], (NORM_X, norm2_y), (NORM_WIDTH, 0.4), NORM_FILL)
    _arrow(ax, (NORM_X + NORM_WIDTH / 2 + 0.05, norm2_y), (FFN_X - 1.05, norm2_y))
    _box(ax, "ffn", labels["ffn"], (FFN_X, norm2_y), (2.0, 0.68), FFN_FILL)
    _line(ax, [FFN_X, FFN_X], [norm2_y + 0.38, ffn_add], FFN_WRITE)
    _arrow(ax, (FFN_X + 0.006, ffn_add), (x + PLUS_RADIUS, ffn_add), colour=FFN_WRITE)

    ax.set_title(title or f"one pre-norm block: x = x + MHA(LN1(x)), then x = x + FFN(LN2(x))  (D={width}, "
                 f"h={heads}, F={hidden})", fontsize=10.5)
    return fig
