"""Write each lesson figure's alt text into the metadata of the cell that draws it (idempotent).

The website (myst-nb) gives an output image the ``alt`` found in its cell's metadata under
``mystnb.image.alt``; the text sits in the same cell as the code that draws the figure, so the notebook
and the site share one description. A figure cell is found by the plotting call in its source (not by
its cell id, which a rewrite may change). Running it again changes nothing; a plotting cell this script
does not know, or a known call found in no cell, is reported and makes it exit 1.

    python scripts/apply_figure_metadata.py                   # every notebooks/NN_*.ipynb, in place
    python scripts/apply_figure_metadata.py path/to/NN_x.ipynb ...  # only these notebooks
    python scripts/apply_figure_metadata.py --check           # change nothing; exit 1 if a cell needs it

Only cell metadata changes: sources, outputs, ids and tags are kept as they are. After it, regenerate
the notebooks' outputs (``scripts/regenerate_notebooks.py``) so their figures are stored at twice the
pixel density (`lessons_lib.plotting` asks the inline backend for retina PNGs).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (lesson number, a piece of the figure cell's source) -> the figure's alt text: what it shows, in one sentence.
ALT_TEXTS: dict[tuple[str, str], str] = {
    ("01", "plot_weights("): (
        "A 4 by 4 heatmap of causal attention weights, each row a query's weights over the positions, with the "
        "cells above the diagonal hatched grey as masked and every weight written in its cell."
    ),
    ("01", "plot_head_flow("): (
        "A data-flow diagram of one head: the target and source go through W_q, W_k and W_v to Q, K and V, then "
        "to scores, softmax weights and the weighted sum of V, each box labelled with its array's shape."
    ),
    ("02", "plot_head_split("): (
        "Four coloured grids of the labels 10*t + f in two rows: on top the input and its reshape into h = 2 "
        "heads; below, the transpose that gives every head one colour and, framed in red as wrong, the direct "
        "reshape that mixes the heads' features."
    ),
    ("03", "plot_head_merge("): (
        "Left, the heads' outputs concatenated into one row of D features per token, each head's block in its "
        "colour; right, W_o with each block of d_h rows in the colour of the head whose features it reads."
    ),
    ("04", "plot_mask_conventions("): (
        "One causal mask shown three ways side by side: our True-means-attend booleans, nn.MultiheadAttention's "
        "True-means-blocked booleans, and a float mask of zeros and minus infinity."
    ),
    ("05", "plot_head_map("): (
        "A heatmap of head 0's attention weights on sequence 0, queries down and keys across, each axis "
        "labelled with the sequence's tokens."
    ),
    ("05", "plot_average_contrast("): (
        "One attention heatmap per head of the trained layer on sequence 0, each with a sharp pattern of its "
        "own, and last their average, a blur that no head computes."
    ),
    ("05", "plot_head_count_comparison("): (
        "Grouped bars of held-out accuracy for each target token, one bar per head count at the same total "
        "width, with one dot per training seed and a dashed line at chance level."
    ),
    ("06", "plot_head_sharing("): (
        "Eight query heads in a top row joined by lines to the two key/value heads in the bottom row, query "
        "heads 0 to 3 to K/V head 0 and 4 to 7 to K/V head 1, coloured by K/V head."
    ),
    ("06", "plot_models_cache("): (
        "Horizontal bars per real model comparing the KV cache it keeps for 4096 tokens with the cache the "
        "same model would need with full multi-head attention."
    ),
    ("06", "plot_cache_growth("): (
        "The KV cache in GiB growing with every decoded token for each attention variant, on a linear scale "
        "at left and a logarithmic scale at right, the sliding-window variant levelling off."
    ),
    ("06", "plot_conversion_error("): (
        "The relative output error of an MHA layer converted to GQA by mean-pooling its K/V heads, against "
        "the number of K/V heads kept, zero at h_kv = 8, where nothing is pooled."
    ),
    ("06", "plot_step_times("): (
        "Time of one decoding step against the number of tokens already decoded, both axes logarithmic: with "
        "the cache the line stays nearly flat, without it the line climbs steeply as T grows."
    ),
    ("07", "plot_latent_flow(layer.sizes"): (
        "A data-flow diagram of the lesson's latent attention layer: x is compressed into a cached latent c and "
        "a cached rotary key, grey arrows rebuild every head's keys and values, and orange arrows show the "
        "absorbed route: queries meet the latent directly for the scores, and the weighted latent goes "
        "through W_uv W_o for the output."
    ),
    ("07", "plot_latent_flow(deepseek_sizes"): (
        "The same latent attention data-flow diagram with DeepSeek-V2's sizes: the cached latent and rotary "
        "key in blue boxes, and every head's query built from the query latent c^Q."
    ),
    ("08", "plot_tiling("): (
        "Left, the grid of query and key blocks with each visited tile numbered in visiting order and the "
        "fully masked tiles grey; right, one query row's running maximum and running sum after each key block."
    ),
    ("08", "plot_peak_memory("): (
        "Peak memory of naive and tiled attention against the sequence length, both axes logarithmic: the "
        "naive line climbs much faster than the tiled one as the sequence grows."
    ),
    ("09", "plot_residual_stream("): (
        "A pre-norm transformer block drawn on its residual stream, which runs upwards: LayerNorm 1 feeds the "
        "stacked heads, whose writes join and add back into the stream, then LayerNorm 2 feeds the feed-forward "
        "layer, whose output is added too."
    ),
    ("09", "plot_loss_per_position("): (
        "The model's next-token loss at each position, the two halves shaded: around and above the dashed "
        "uniform-guess line over the first half, with the dotted best possible loss below it, and far lower "
        "over the repeated second half."
    ),
    ("09", "plot_head_maps("): (
        "Attention heatmaps of every head in both layers on one repeated sequence, each titled with its "
        "previous-token and induction scores; one layer 0 head attends to the previous token and layer 1's "
        "induction heads show a diagonal stripe offset by the repeat."
    ),
    ("09", "plot_ablation("): (
        "A table-like heatmap of the repeated-half loss with one head zeroed at a time, rows for the two layers "
        "and columns for the heads, each cell labelled with its loss."
    ),
    ("09", "plot_composition("): (
        "Bars of the induction heads' induction scores when the layer 0 previous-token head's write is intact "
        "and when it is hidden from their keys, queries or values, one group of bars per condition."
    ),
    ("10", "plot_text_maps("): (
        "Four attention heatmaps of the Shakespeare model on a line from Hamlet, the line's characters on both "
        "axes (spaces shown as open boxes), one for each head with the best previous-character, word-start, "
        "last-break and repeat score, each titled with its layer and head."
    ),
    ("10", "plot_cache_ladder("): (
        "Two panels of validation loss against cache bytes per token on a log scale: hollow grey markers for "
        "the converted models before any training, blue for the same models after 225 more steps, orange for "
        "shapes trained from scratch; circles for MHA, GQA and MQA, diamonds for latent caches, a dashed line "
        "at the shipped model's loss. The left panel shows every model, the right zooms in on the trained ones."
    ),
    ("10", "plot_ablation("): (
        "Left, a grid of the validation loss added by zeroing each of the 16 heads, rows for the four layers and "
        "columns for the heads, each cell labelled with its value; right, horizontal bars of the loss added by "
        "zeroing each layer's whole attention."
    ),
}
PLOT_CALL = re.compile(r"\.plot_\w+\(")


def source(cell: dict) -> str:  # type: ignore[type-arg]
    text = cell["source"]
    return text if isinstance(text, str) else "".join(text)


def apply(path: Path, write: bool) -> tuple[int, list[str], set[tuple[str, str]]]:
    """Set the alt text of every figure cell of ``path``: (cells changed, problems, keys used)."""
    lesson = path.name[:2]
    notebook = json.loads(path.read_text(encoding="utf-8"))
    changed, problems, used = 0, [], set()
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code" or not PLOT_CALL.search(source(cell)):
            continue
        keys = [key for key in ALT_TEXTS if key[0] == lesson and key[1] in source(cell)]
        if len(keys) != 1:
            problems.append(f"{path.name}: cell {cell.get('id')} calls a plotting function but matches {keys or 'no'} "
                            "alt text; add one to ALT_TEXTS")
            continue
        used.add(keys[0])
        mystnb = cell.setdefault("metadata", {}).setdefault("mystnb", {})
        image = mystnb.setdefault("image", {})
        if image.get("alt") != ALT_TEXTS[keys[0]]:
            image["alt"] = ALT_TEXTS[keys[0]]
            changed += 1
    if changed and write:
        # The layout nbformat writes (one-space indent, a final newline), so only the metadata shows in a diff.
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed, problems, used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell needs a change")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    problems: list[str] = []
    used: set[tuple[str, str]] = set()
    pending = 0
    for path in paths:
        changed, found, keys = apply(path, write=not args.check)
        problems += found
        used |= keys
        pending += changed
        print(f"{path.name}: {changed} figure cell(s) {'need' if args.check else 'given'} an alt text")
    lessons = {path.name[:2] for path in paths}
    problems += [f"no cell of lesson {lesson} calls {call!r}" for lesson, call in ALT_TEXTS
                 if lesson in lessons and (lesson, call) not in used]
    for problem in problems:
        print("apply_figure_metadata:", problem, file=sys.stderr)
    return 1 if problems or (args.check and pending) else 0


if __name__ == "__main__":
    sys.exit(main())
