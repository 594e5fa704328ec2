"""Drawing functions (Matplotlib); the numbers they draw come from plain functions.

One submodule per lesson picture: ``attention_flow`` (01: one head's weight heatmap and Q/K/V data
flow), ``head_split`` (02: the split and the direct reshape's scrambled assignment), ``head_merge``
(03: concatenation and the blocks of rows of ``W_o``), ``mask_conventions`` (04: one mask in three
conventions), ``attention_maps`` (05: per-head heatmaps, column blocks, split layouts),
``cache_charts`` (06: KV-cache charts, growth while decoding, which query heads share a K/V head),
``latent_flow`` (07: the MLA data flow), ``tiling`` (08: the tiles a tiled pass visits),
``residual_stream`` (09: the block on its residual stream), ``induction_maps`` (09: the induction
model's loss, heads, ablation and composition, and the widget's panels) and ``text_maps`` (10: the
Shakespeare model's heads on real text, with characters on the axes, and its ablation chart).

Crisp on HiDPI screens: imported inside IPython (a notebook kernel), this package switches the inline
backend to its ``retina`` format, so every figure a lesson shows is a PNG with ``PIXEL_DENSITY`` (2)
pixels per displayed pixel, and the output's metadata gives its displayed size (half the PNG's): JupyterLab
and the website (myst-nb copies ``width`` and ``height`` into the page) show it at that size.
Outside IPython (scripts, tests) importing it changes nothing.

Heard by a screen reader: inside IPython it also gives every lesson figure a ``text/html`` form, the same
PNG in an ``<img>`` whose ``alt`` is the figure's description from ``alt_text.ALT_TEXTS`` (the words the
website uses), because JupyterLab's PNG renderer gives a picture no alt text.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["DISPLAY_DPI", "MAX_FIGURE_INCHES", "MIN_FONT_POINTS", "PAGE_WIDTH", "PIXEL_DENSITY", "use_alt_html",
           "use_retina_inline"]

DISPLAY_DPI = 100  # CSS pixels per figure inch: Matplotlib's default dpi, the size a figure is shown at
PIXEL_DENSITY = 2  # PNG pixels per CSS pixel
# The widest a figure is shown in a lesson page's text column on a desktop (the website at a 1440 px wide
# window; JupyterLab's output area is wider). A wider figure is shrunk to this width, its text with it.
PAGE_WIDTH = 790
MIN_FONT_POINTS = 9.0  # the smallest text a figure may show, in points at its displayed size
# The widest a figure may be, in inches: with the 0.1 in margins the inline backend saves around it
# (Matplotlib's savefig.pad_inches) it is shown at most PAGE_WIDTH wide, at its own size.
MAX_FIGURE_INCHES = round(PAGE_WIDTH / DISPLAY_DPI - 2 * 0.1, 2)  # 7.7


def _ipython_shell() -> Any:
    """The running IPython shell (a notebook kernel's), or None in plain Python."""
    if "IPython" not in sys.modules:  # plain Python: IPython is not even loaded
        return None
    from IPython import get_ipython

    return get_ipython()


def use_retina_inline() -> bool:
    """Ask the running IPython kernel's inline backend for ``retina`` PNGs; False outside IPython.

    Sets the ``InlineBackend.figure_formats`` option, which installs the retina formatter at once and
    again whenever pyplot (re)activates the inline backend, whichever is imported first.
    """
    shell = _ipython_shell()
    if shell is None:
        return False
    try:
        from matplotlib_inline.config import InlineBackend
    except ImportError:  # pragma: no cover - ipykernel depends on matplotlib-inline
        return False
    config = InlineBackend.instance(parent=shell)
    if config.figure_formats != {"retina"}:
        config.figure_formats = {"retina"}  # used whenever pyplot activates the inline backend from now on
    import matplotlib

    if "inline" in matplotlib.get_backend():  # pyplot was imported first: the backend is already active
        from IPython.core.pylabtools import select_figure_formats

        select_figure_formats(shell, {"retina"}, **config.print_figure_kwargs)  # type: ignore[no-untyped-call]
    return True


def use_alt_html() -> bool:
    """Show each lesson figure in the running IPython kernel as an ``<img>`` with its alt text; False outside."""
    shell = _ipython_shell()
    if shell is None or not hasattr(shell, "events"):
        return False
    from .alt_text import install_alt_html

    install_alt_html(shell)
    return True


use_retina_inline()
use_alt_html()
