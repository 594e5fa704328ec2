"""Write each lesson figure's alt text into the metadata of the cell that draws it (idempotent).

The website (myst-nb) gives an output image the ``alt`` found in its cell's metadata under
``mystnb.image.alt``. The texts live in ``lessons_lib/plotting/alt_text.py``, which also gives each figure
its alt text inside JupyterLab (a ``text/html`` form of the figure), so the notebook, JupyterLab and the
site share one description: edit a text there, then run this script. A figure cell is found by the
plotting call in its source (not by its cell id, which a rewrite may change). Running it again changes
nothing; a plotting cell this script does not know, or a known call found in no cell, is reported and
makes it exit 1 (``tests/test_figure_alt_html.py`` runs ``--check``).

    python scripts/apply_figure_metadata.py                   # every notebooks/NN_*.ipynb, in place
    python scripts/apply_figure_metadata.py path/to/NN_x.ipynb ...  # only these notebooks
    python scripts/apply_figure_metadata.py --check           # change nothing; exit 1 if a cell needs it

Only cell metadata changes: sources, outputs, ids and tags are kept as they are. After it, regenerate
the notebooks' outputs (``scripts/regenerate_notebooks.py``) so each figure's stored ``text/html`` form
carries the new text too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(REPO))
from lessons_lib.plotting.alt_text import ALT_TEXTS, matching_keys  # noqa: E402

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
        keys = matching_keys(source(cell), lesson)
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
