"""Every lesson figure's alt text, and the figure as ``<img alt=...>`` inside a notebook kernel.

``ALT_TEXTS`` maps (lesson, a piece of the source of the cell that draws the figure) to one sentence
saying what the figure shows. Two readers use it:

* ``scripts/apply_figure_metadata.py`` writes each text into its cell's metadata (``mystnb.image.alt``),
  which the website gives the picture;
* in a notebook kernel, :func:`install_alt_html` (run when :mod:`lessons_lib.plotting` is imported) adds a
  ``text/html`` form to every figure a lesson cell shows: ``<img alt="..." src="data:image/png;...">``,
  the same PNG with the text in its ``alt``. JupyterLab shows ``text/html`` before ``image/png`` and its
  PNG renderer sets no ``alt`` (it reads none from the output's metadata), so this is how a screen reader
  in JupyterLab hears the words the website gives. The ``image/png`` output stays for every tool that
  reads it (the website picks it: ``nb_mime_priority_overrides`` in ``site/conf.py``).

A cell's figure gets the text whose piece its source contains; a cell that contains none (a learner's own
plot) or several gets no ``text/html``, only the PNG.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["ALT_TEXTS", "alt_text_for", "figure_html", "install_alt_html", "matching_keys"]

# (lesson, a piece of the figure cell's source) -> what the figure shows, in one or two sentences.
# Every piece names the plotting module too, so no piece is found in another lesson's cells.
ALT_TEXTS: dict[tuple[str, str], str] = {
    ("01", "attention_flow.plot_weights("): (
        "A 4 by 4 heatmap of causal attention weights, each row a query's weights over the positions, with "
        "the cells above the diagonal hatched grey as masked and every weight written in its cell."
    ),
    ("01", "attention_flow.plot_head_flow("): (
        "A data-flow diagram of one head: the target and source go through W_q, W_k and W_v to Q, K and V, "
        "then to scores, softmax weights and the weighted sum of V, each box labelled with its array's shape."
    ),
    ("02", "head_split.plot_head_split("): (
        "Four coloured grids of the labels 10*t + f in two rows: on top the input and its reshape into h = 2 "
        "heads; below, the transpose that gives every head one colour and, framed in red as wrong, the direct"
        " reshape that mixes the heads' features."
    ),
    ("03", "head_merge.plot_head_merge("): (
        "Left, the heads' outputs concatenated into one row of D features per token, each head's block in its"
        " colour; right, W_o with each block of d_h rows in the colour of the head whose features it reads."
    ),
    ("04", "mask_conventions.plot_mask_conventions("): (
        "One causal mask with 4 query rows and 6 key columns, shown three ways side by side: our "
        "True-means-attend booleans, nn.MultiheadAttention's True-means-blocked booleans, and a float mask of"
        " zeros and minus infinity. In every panel the cells that may attend are pale green with black text "
        "and the blocked cells, the upper-right triangle, are dark grey with white text."
    ),
    ("05", "attention_maps.plot_head_map("): (
        "A heatmap of head 0's attention weights on sequence 0, queries down and keys across, each axis "
        "labelled with the sequence's tokens."
    ),
    ("05", "attention_maps.plot_average_contrast("): (
        "Five attention heatmaps of sequence 0, tokens on both axes: heads 0 to 3 of the trained layer (heads"
        " 0, 1 and 2 each with one sharp pattern, head 3 with its weight spread over two places), and last, "
        "in a red frame, the entry-by-entry mean of the four maps."
    ),
    ("05", "attention_maps.plot_head_count_comparison("): (
        "Grouped bars of held-out accuracy for each target token, one bar per head count at the same total "
        "width, with one dot per training seed and a dashed line at chance level."
    ),
    ("06", "cache_charts.plot_head_sharing("): (
        "Eight query heads in a top row joined by lines to the two key/value heads in the bottom row, query "
        "heads 0 to 3 to K/V head 0 and 4 to 7 to K/V head 1, coloured by K/V head."
    ),
    ("06", "cache_charts.plot_models_cache("): (
        "Horizontal bars per real model comparing the KV cache it keeps for 4096 tokens with the cache the "
        "same model would need with full multi-head attention."
    ),
    ("06", "cache_charts.plot_cache_growth("): (
        "The KV cache in GiB growing with every decoded token for each attention variant, on a linear scale "
        "at left and a logarithmic scale at right, the sliding-window variant levelling off."
    ),
    ("06", "cache_charts.plot_conversion_error("): (
        "The relative output error of an MHA layer converted to GQA by mean-pooling its K/V heads, against "
        "the number of K/V heads kept, zero at h_kv = 8, where nothing is pooled."
    ),
    ("06", "cache_charts.plot_step_times("): (
        "Time of one decoding step against the number of tokens already decoded, both axes logarithmic: with "
        "the cache the line stays nearly flat, without it the line climbs steeply as T grows."
    ),
    ("07", "latent_flow.plot_latent_flow(layer.sizes"): (
        "A data-flow diagram of the lesson's latent attention layer: x is down-projected into a cached latent"
        " c and a cached rotary key; the queries come straight from x; grey arrows leave the latent c itself "
        "through W_uk and W_uv to rebuild every head's keys and values, and orange arrows show the absorbed "
        "route, also leaving c: queries meet the latent directly for the scores, and the weighted latent goes"
        " through W_uv, then W_o, for the output. A dashed RMSNorm box, absent from this layer, stands aside "
        "in the top right corner, connected to nothing."
    ),
    ("07", "latent_flow.plot_latent_flow(deepseek_sizes"): (
        "The same latent attention data-flow diagram with DeepSeek-V2's sizes: x is down-projected into the "
        "cached latent c (blue), a dashed RMSNorm box sits after c and before the W_uk and W_uv arrows and "
        "the absorbed route, every head's query is built from the dashed query latent c^Q, and the rotary key"
        " is cached beside the latent."
    ),
    ("08", "tiling.plot_tiling("): (
        "Left, the grid of query and key blocks with each visited tile numbered in visiting order and the "
        "fully masked tiles grey; right, one query row's running maximum and running sum after each key "
        "block."
    ),
    ("08", "tiling.plot_peak_memory("): (
        "Peak memory of naive and tiled attention against the sequence length, both axes logarithmic: the "
        "naive line climbs much faster than the tiled one as the sequence grows."
    ),
    ("09", "residual_stream.plot_residual_stream("): (
        "A pre-norm transformer block drawn on its residual stream, which runs upwards: LayerNorm 1 feeds the"
        " stacked heads, whose writes join and add back into the stream, then LayerNorm 2 feeds the "
        "feed-forward layer, whose output is added too."
    ),
    ("09", "induction_maps.plot_loss_per_position("): (
        "The model's next-token loss at each position, the two halves shaded: around and above the dashed "
        "uniform-guess line over the first half, with the dotted best possible loss below it, and far lower "
        "over the repeated second half."
    ),
    ("09", "induction_maps.plot_head_maps("): (
        "Attention heatmaps of every head in both layers on one repeated sequence, each titled with its "
        "previous-token and induction scores; one layer 0 head attends to the previous token and layer 1's "
        "induction heads show a diagonal stripe offset by the repeat."
    ),
    ("09", "induction_maps.plot_ablation("): (
        "A table-like heatmap of the repeated-half loss with one head zeroed at a time, rows for the two "
        "layers and columns for the heads, each cell labelled with its loss."
    ),
    ("09", "induction_maps.plot_composition("): (
        "Grouped bars, one group per induction head (last layer, heads 2 and 3), one bar per condition: "
        "intact, the layer 0 previous-token head hidden from their keys, hidden from their queries, and "
        "ablated (the whole head zeroed). The bars are tall when intact or hidden from the queries only, and "
        "short when hidden from the keys or ablated."
    ),
    ("09", "induction_maps.plot_ov_circuits("): (
        "Two 32 by 32 maps on one red-blue scale centred on 0, rows the attended token, columns the token "
        "whose logit changes: layer 1 head 2 has a red diagonal on a pale background (it raises the logit of "
        "the token it reads); layer 1 head 0 has a blue diagonal (it lowers it)."
    ),
    ("09", "induction_maps.plot_training_curve("): (
        "Two panels over 3000 training steps. Above, losses: the held-out repeated half stays near 3.5 for "
        "about 350 steps, falls steeply to below 1 by step 650 and then slowly to 0.11; the held-out first "
        "half rises from 3.5 to 3.8 during the fall and eases back to 3.6; the training batches' loss, in "
        "grey, drops less. Below, the best induction score jumps from about 0.2 to 0.7 between steps 380 and "
        "600 and ends at 0.85; the best previous-token score rises with it to about 0.55, then climbs slowly "
        "to 0.97."
    ),
    ("10", "text_maps.plot_text_maps("): (
        "Four attention heatmaps of the Shakespeare model on a line from Hamlet, the line's characters on "
        "both axes (spaces shown as open boxes), one for each head with the best previous-character, "
        "word-start, last-break and repeat score, each titled with its layer and head."
    ),
    ("10", "text_maps.plot_ablation("): (
        "Left, a grid of the validation loss added by zeroing each of the 16 heads, rows for the four layers "
        "and columns for the heads, each cell labelled with its value; right, horizontal bars of the loss "
        "added by zeroing each layer's whole attention."
    ),
    ("10", "text_maps.plot_cache_ladder("): (
        "Two panels of validation loss against cache bytes per token on a log scale: hollow grey markers for "
        "the converted models before any training, blue for the same models after 225 more steps, orange for "
        "shapes trained from scratch; circles for MHA, GQA and MQA, diamonds for latent caches, a dashed line"
        " at the shipped model's loss. The left panel shows every model, the right zooms in on the trained "
        "ones."
    ),
}

# The kernel's shell, the source of the cell it runs now and that cell's alt text (None: not a lesson figure's).
_running: dict[str, Any] = {"shell": None, "source": "", "alt": None}


def matching_keys(source: str, lesson: str | None = None) -> list[tuple[str, str]]:
    """The keys of ``ALT_TEXTS`` whose piece ``source`` contains (only ``lesson``'s, if given)."""
    return [key for key in ALT_TEXTS if key[1] in source and lesson in (None, key[0])]


def alt_text_for(source: str) -> str | None:
    """The alt text of the one figure whose piece ``source`` contains; None if it contains none or several."""
    keys = matching_keys(source)
    return ALT_TEXTS[keys[0]] if len(keys) == 1 else None


def figure_html(png_base64: str, alt: str, width: int | None = None) -> str:
    """An ``<img>`` showing a base64 PNG with ``alt``, ``width`` CSS pixels wide (never wider than its output)."""
    size = f' width="{int(width)}"' if width else ""
    return (f'<img src="data:image/png;base64,{png_base64}" alt="{html.escape(alt, quote=True)}"{size} '
            'style="max-width: 100%; height: auto;">')


def _show_with_alt(figure: Any) -> None:
    """Show ``figure`` as every display of it would, plus the ``<img alt>`` form made from the same PNG.

    The figure is drawn once: drawing some figures twice moves a label by a pixel or two.
    """
    from IPython.display import publish_display_data

    shell = _running["shell"]
    formatter = shell.display_formatter
    formatter.ipython_display_formatter.enabled = False  # this printer itself: skip it for the one call below
    try:
        data, metadata = formatter.format(figure)
    finally:
        formatter.ipython_display_formatter.enabled = True
    png, alt = data.get("image/png"), _running["alt"]
    if isinstance(png, str) and alt:
        data["text/html"] = figure_html(png, alt, metadata.get("image/png", {}).get("width"))
    if data:
        publish_display_data(data, metadata)  # type: ignore[no-untyped-call]


def _follow(source: str) -> None:
    """Keep the running cell's source; figures get ``_show_with_alt`` only while a lesson figure's cell runs."""
    _running.update(source=source, alt=alt_text_for(source))
    shell = _running["shell"]
    if shell is None:
        return
    from matplotlib.figure import FigureBase

    printers = shell.display_formatter.ipython_display_formatter
    if _running["alt"] is None:
        printers.pop(FigureBase, None)  # a learner's own plot: displayed as IPython always does
    else:
        printers.for_type(FigureBase, _show_with_alt)


def _remember_cell(info: Any) -> None:
    """IPython's ``pre_run_cell`` event: a cell is about to run."""
    _follow(getattr(info, "raw_cell", None) or "")


def _started_cell(shell: Any) -> str:
    """The source of the cell running now: the kernel's request (a kernel runs some cells, nbval's all,
    without storing them in the history), else the last input the history stored."""
    get_parent = getattr(shell, "get_parent", None)
    parent = get_parent() if callable(get_parent) else None
    code = parent.get("content", {}).get("code") if isinstance(parent, dict) else None
    if isinstance(code, str) and code:
        return code
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    return str(history[-1]) if history else str(_running["source"])


def install_alt_html(shell: Any) -> None:
    """Show every lesson figure in ``shell`` with a ``text/html`` form carrying its alt text.

    Before each cell whose source names a lesson figure, a display printer is set for
    ``matplotlib.figure.FigureBase`` (IPython's ``select_figure_formats``, which pyplot runs when it
    activates the inline backend, removes printers for ``Figure`` itself, not this one, which a ``Figure``
    reaches through its base class); before any other cell it is removed.
    """
    _running["shell"] = shell
    callbacks = shell.events.callbacks["pre_run_cell"]
    if _remember_cell not in callbacks:
        shell.events.register("pre_run_cell", _remember_cell)
    _follow(_started_cell(shell))  # the cell importing this package started before the hook was there
