"""Every lesson figure carries its alt text inside JupyterLab, the same words the website gives it.

JupyterLab draws an ``image/png`` output with no ``alt`` (its renderer reads none from the output's
metadata), so ``lessons_lib.plotting`` gives each lesson figure a ``text/html`` form too: the same PNG in an
``<img alt="...">``, which JupyterLab shows first. These tests check

* the table (``lessons_lib/plotting/alt_text.py``): each piece is found in exactly one figure cell, of its
  own lesson, and the cells' site metadata holds the table's words (``apply_figure_metadata.py --check``);
* the stored outputs: every figure cell's output has the ``text/html`` form, with its cell's alt text and
  the very PNG its ``image/png`` holds;
* in an IPython shell: a cell that names a lesson figure's piece gets the ``<img alt>``, a learner's own
  plot gets no ``text/html`` (only its PNG), the form survives pyplot re-selecting the figure formats, and
  quotes and ampersands in a text are escaped.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import pytest

from lessons_lib.plotting import alt_text
from lessons_lib.plotting.alt_text import ALT_TEXTS, alt_text_for, figure_html, install_alt_html

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IMG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)"(?: width="(\d+)")?')


def joined(value: str | list[str]) -> str:
    """A notebook's text, stored as one string or as a list of lines."""
    return value if isinstance(value, str) else "".join(value)


def source(cell: dict[str, Any]) -> str:
    return joined(cell["source"])


def figure_cells() -> list[tuple[str, dict[str, Any]]]:
    """(lesson, cell) for every code cell that stores a figure."""
    found = []
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if any("image/png" in output.get("data", {}) for output in cell.get("outputs", [])):
                found.append((path.name[:2], cell))
    return found



def test_each_piece_names_one_figure_cell_of_its_lesson() -> None:
    cells = figure_cells()
    assert len(cells) == len(ALT_TEXTS)
    for (lesson, piece), text in ALT_TEXTS.items():
        holders = [(number, cell.get("id")) for number, cell in cells if piece in source(cell)]
        assert len(holders) == 1 and holders[0][0] == lesson, f"{piece!r} ({lesson}) is found in {holders}"
        assert len(text.split()) >= 6 and text.endswith("."), f"{piece!r}: not a sentence: {text!r}"


def test_the_site_metadata_holds_the_tables_words() -> None:
    script_path = ROOT / "scripts" / "apply_figure_metadata.py"
    spec = importlib.util.spec_from_file_location("apply_figure_metadata", script_path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--check"]) == 0, "run scripts/apply_figure_metadata.py"


def test_every_stored_figure_has_an_img_with_its_alt_text() -> None:
    for lesson, cell in figure_cells():
        where = f"lesson {lesson} cell {cell.get('id')}"
        wanted = cell["metadata"]["mystnb"]["image"]["alt"]
        assert alt_text_for(source(cell)) == wanted, where
        figures = [output for output in cell["outputs"] if "image/png" in output.get("data", {})]
        assert len(figures) == 1, where
        data, metadata = figures[0]["data"], figures[0].get("metadata", {})
        assert "text/html" in data, f"{where}: no text/html form (regenerate the lesson)"
        found = IMG.fullmatch(joined(data["text/html"]).split(" style=")[0])
        assert found, f"{where}: {joined(data['text/html'])[:80]!r}..."
        png, alt, width = found.groups()
        assert html.unescape(alt) == wanted, where
        assert base64.b64decode(png) == base64.b64decode(joined(data["image/png"])), f"{where}: another PNG"
        assert int(width) == metadata["image/png"]["width"], where


@pytest.fixture
def shell() -> Iterator[Any]:
    """An IPython shell with pyplot's inline backend in retina format, as in a lesson's kernel."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    backend = matplotlib.get_backend()
    made = InteractiveShell.instance()
    try:
        matplotlib.use("module://matplotlib_inline.backend_inline")
        select_figure_formats(made, {"retina"})  # type: ignore[no-untyped-call]
        install_alt_html(made)
        yield made
    finally:
        plt.close("all")
        InteractiveShell.clear_instance()
        matplotlib.use(backend)
        alt_text._running.update(shell=None, source="", alt=None)


def shown(shell: Any, cell: str) -> dict[str, Any]:
    """What a cell with this source shows for a figure it draws (the data of its one display output)."""
    from IPython.utils.capture import capture_output

    code = ("\nimport matplotlib.pyplot\n_figure = matplotlib.pyplot.figure(figsize=(2, 1))"
            "\n_figure.add_subplot().plot([0, 1])\ndisplay(_figure)")
    with capture_output() as captured:
        result = shell.run_cell(cell + code)
    assert result.success, result.error_in_exec
    assert len(captured.outputs) == 1, captured.outputs
    return dict(captured.outputs[0].data)


def test_a_lesson_cell_gets_the_img_and_a_learners_plot_only_the_png(shell: Any) -> None:
    (_, piece), text = next(iter(ALT_TEXTS.items()))
    data = shown(shell, f"# {piece}")
    found = IMG.match(data["text/html"])
    assert found and html.unescape(found.group(2)) == text
    assert base64.b64decode(found.group(1)) == base64.b64decode(data["image/png"])
    own = shown(shell, "plt_title = 'my own plot'")
    assert "text/html" not in own and "image/png" in own


def test_a_cell_naming_two_figures_gets_no_img(shell: Any) -> None:
    pieces = [piece for _, piece in list(ALT_TEXTS)[:2]]
    assert "text/html" not in shown(shell, "# " + " ".join(pieces))


def test_the_img_survives_pyplot_selecting_the_formats_in_the_cell(shell: Any) -> None:
    """What the inline backend does when the cell's own ``import matplotlib.pyplot`` activates it."""
    (_, piece), text = next(iter(ALT_TEXTS.items()))
    reselect = ("from IPython.core.pylabtools import select_figure_formats\n"
                "select_figure_formats(get_ipython(), {'retina'})")
    found = IMG.match(shown(shell, f"# {piece}\n{reselect}")["text/html"])
    assert found and html.unescape(found.group(2)) == text


def test_quotes_and_ampersands_are_escaped() -> None:
    made = figure_html("AAAA", 'a "quoted" <b> & more', 120)
    found = IMG.match(made)
    assert found and html.unescape(found.group(2)) == 'a "quoted" <b> & more' and found.group(3) == "120"
    assert '"quoted"' not in made and "<b>" not in made


def test_the_cell_importing_the_package_is_read_from_the_kernels_request() -> None:
    """nbval (and a kernel asked not to store history) runs cells without storing them in the history."""

    class KernelShell:
        history_manager = None

        def get_parent(self) -> dict[str, Any]:
            return {"header": {"msg_type": "execute_request"}, "content": {"code": "# the cell running now"}}

    assert alt_text._started_cell(KernelShell()) == "# the cell running now"
