"""Colours shared by the lesson pictures: one colour per head, distinct for up to 16 heads.

``HEAD_COLOURS`` starts with Okabe and Ito's eight colours, chosen to stay apart under the common
colour-vision deficiencies (Okabe & Ito, "Color Universal Design", 2008), then adds eight from Paul
Tol's "muted" and "dark" schemes (https://personal.sron.nl/~pault/) that differ from every earlier one in
lightness or hue. No 16 colours stay apart for every reader, so every picture also writes each head's
number on or next to its colour. `text_colour` picks black or white text for a fill, whichever contrasts
more. Heatmaps use viridis (weights) or cividis (orders), both perceptually uniform and readable with
colour-vision deficiencies; signed values use the diverging ``RdBu_r``.
"""

from __future__ import annotations

from matplotlib.colors import ListedColormap, to_rgb

__all__ = ["HEAD_COLOURS", "head_colour", "head_colourmap", "relative_luminance", "text_colour"]

HEAD_COLOURS = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
    "#332288",  # indigo
    "#999933",  # olive
    "#882255",  # wine
    "#44AA99",  # teal
    "#DDCC77",  # sand
    "#117733",  # dark green
    "#AA4499",  # purple
    "#888888",  # grey
)


def head_colour(index: int) -> str:
    """The colour of head ``index`` (0 .. 15; the palette repeats after 16 heads)."""
    return HEAD_COLOURS[index % len(HEAD_COLOURS)]


def head_colourmap(heads: int) -> ListedColormap:
    """A colour map of the first ``heads`` head colours, for images of head ids ``0 .. heads-1``."""
    return ListedColormap([head_colour(i) for i in range(heads)])


def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a Matplotlib colour (0 black .. 1 white)."""
    channels = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]


def text_colour(fill: str) -> str:
    """``"black"`` or ``"white"``: the text colour with the higher WCAG contrast on ``fill``."""
    luminance = relative_luminance(fill)
    return "black" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "white"
