"""Lesson 09 picture: the residual stream of a pre-norm block, and where each head reads and writes.

`block_labels` writes the text of every box from a block's sizes (``D``, ``h``, ``F``), and
`plot_residual_stream` draws them: the stream ``x (B, T, D)`` runs left to right; the attention
sub-layer reads a LayerNorm'd copy, every head reads all ``D`` features through its own columns of
``W_q``, ``W_k``, ``W_v`` and writes back through its own ``d_h`` rows of ``W_o``; the sum is added
to the stream; then the feed-forward sub-layer reads and adds the same way.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from lessons_lib.validation import check_int, head_width

__all__ = ["block_labels", "plot_residual_stream", "shown_heads"]

STREAM_COLOUR, HEAD_FILL, NORM_FILL, FFN_FILL, END_FILL = "#1f5fa0", "#d9ead3", "#ead1dc", "#fce5cd", "#e8e8e8"
MOST_HEADS_DRAWN = 5  # more heads: the first three, a gap, and the last
STREAM_Y = 1.3  # the stream's height on the 13.4 x 7 canvas


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
            labels[f"head {i}"] = f"head {i}: reads all D via W_q, W_k, W_v[:, {columns}]\nwrites via W_o[{rows}, :]"
    return labels


def _box(ax: Axes, name: str, text: str, centre: tuple[float, float], size: tuple[float, float], fill: str) -> None:
    (x, y), (w, h) = centre, size
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.05", facecolor=fill,
                                edgecolor="black", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5, gid=name)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], colour: str = "black") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=colour, linewidth=1.1))


def plot_residual_stream(
    width: int, heads: int, hidden: int, activation: str = "relu", title: str | None = None
) -> Figure:
    """The pre-norm block ``x = x + MHA(LN1(x)); x = x + FFN(LN2(x))`` drawn on its stream.

    Every head box names the columns it reads and the rows of ``W_o`` it writes through, for
    ``d_h = D / h``; with more than `MOST_HEADS_DRAWN` heads, the middle ones stand behind a gap.
    """
    labels = block_labels(width, heads, hidden, activation)
    fig, ax = plt.subplots(figsize=(12.0, 5.6))
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.02, top=0.93)
    ax.set_xlim(0, 13.4)
    ax.set_ylim(0.5, 7)
    ax.axis("off")
    y = STREAM_Y
    # The stream: one thick arrow from the embeddings to whatever reads the block's output.
    ax.add_patch(FancyArrowPatch((1.6, y), (12.0, y), arrowstyle="simple,head_width=1.2,head_length=0.8",
                                 mutation_scale=14, color=STREAM_COLOUR, alpha=0.35, linewidth=0))
    ax.text(6.8, y - 0.55, f"the residual stream x (B, T, D={width}): every sub-layer reads it and adds to it",
            ha="center", va="center", fontsize=9, color=STREAM_COLOUR)
    _box(ax, "embed", labels["embed"], (0.95, y), (1.7, 0.9), END_FILL)
    _box(ax, "out", labels["out"], (12.65, y), (1.3, 1.1), END_FILL)
    for name, x in (("attention_add", 7.2), ("ffn_add", 11.6)):
        ax.add_patch(Circle((x, y), 0.22, facecolor="white", edgecolor="black", linewidth=1.2))
        ax.text(x, y, labels[name], ha="center", va="center", fontsize=12, gid=name)

    # Attention sub-layer: read, normalise, h heads side by side, their writes summed and added.
    _arrow(ax, (2.0, y + 0.15), (2.0, 2.85))
    _box(ax, "norm1", labels["norm1"], (2.0, 3.2), (1.2, 0.5), NORM_FILL)
    drawn = shown_heads(heads)
    tops = [5.9 - 0.95 * k for k in range(len(drawn))]
    for i, top in zip(drawn, tops, strict=True):
        if i is None:
            ax.text(5.0, top, "...", ha="center", va="center", fontsize=14)
            continue
        _box(ax, f"head {i}", labels[f"head {i}"], (5.0, top), (3.3, 0.62), HEAD_FILL)
        _arrow(ax, (2.65, 3.2), (3.3, top))  # every head reads the same normalised copy
        _arrow(ax, (6.7, top), (7.2, y + 0.25), colour="#38761d")  # and writes into the stream
    ax.text(5.0, 6.6, f"multi-head attention, h={heads}, d_h={head_width(width, heads)}: the heads' writes add up",
            ha="center", va="center", fontsize=9)

    # Feed-forward sub-layer, reading the stream after the heads' writes.
    _arrow(ax, (8.0, y + 0.15), (8.0, 2.85))
    _box(ax, "norm2", labels["norm2"], (8.0, 3.2), (1.2, 0.5), NORM_FILL)
    _arrow(ax, (8.65, 3.2), (9.1, 3.2))
    _box(ax, "ffn", labels["ffn"], (10.2, 3.2), (2.1, 1.0), FFN_FILL)
    _arrow(ax, (11.3, 3.0), (11.6, y + 0.25), colour="#b45f06")

    ax.set_title(title or f"one pre-norm block: x = x + MHA(LN1(x)), then x = x + FFN(LN2(x))  (D={width}, "
                 f"h={heads}, F={hidden})", fontsize=10)
    return fig
