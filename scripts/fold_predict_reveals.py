"""Fold each Predict's reveal on the website: the code cell right after a ``**Predict:**`` gets the tag
``hide-output`` and its own toggle words (myst-nb's cell-level ``code_prompt_show``/``_hide``; the
site-wide words, "Show the solution", are the solutions' own).

    python scripts/fold_predict_reveals.py            # every notebooks/NN_*.ipynb
    python scripts/fold_predict_reveals.py --check    # exit 1 if a reveal is not folded

JupyterLab and Colab ignore both (the learner copy stores no output anyway);
tests/test_notebook_hygiene.py checks every lesson.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TAG = "hide-output"
PROMPTS = {"code_prompt_show": "Show the result", "code_prompt_hide": "Hide the result"}


def _text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def reveals(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The code cell right after each Predict."""
    return [
        cells[i + 1]
        for i, cell in enumerate(cells[:-1])
        if cell["cell_type"] == "markdown" and "**Predict:**" in _text(cell) and cells[i + 1]["cell_type"] == "code"
    ]


def folded(cell: dict[str, Any]) -> bool:
    metadata = cell.get("metadata", {})
    mystnb = metadata.get("mystnb", {})
    return TAG in metadata.get("tags", []) and all(mystnb.get(key) == value for key, value in PROMPTS.items())


def fold(cell: dict[str, Any]) -> None:
    metadata = cell.setdefault("metadata", {})
    tags = metadata.setdefault("tags", [])
    if TAG not in tags:
        tags.append(TAG)
    metadata.setdefault("mystnb", {}).update(PROMPTS)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(arg) for arg in argv if arg != "--check"] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    unfolded = 0
    for path in paths:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        todo = [cell for cell in reveals(notebook["cells"]) if not folded(cell)]
        unfolded += len(todo)
        if todo and not check:
            for cell in todo:
                fold(cell)
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
            print(f"{path}: folded {len(todo)} reveals")
    if check and unfolded:
        print(f"{unfolded} reveals are not folded: run python scripts/fold_predict_reveals.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
