"""Insert (or update) the Colab setup cell in every lesson, right after its title cell.

    python scripts/add_colab_cell.py                 # every notebooks/NN_*.ipynb
    python scripts/add_colab_cell.py notebooks/01_one_head.ipynb
    python scripts/add_colab_cell.py --check         # exit 1 if a lesson lacks the current cell

The cell is the same in every lesson and tagged ``colab-setup`` (and ``remove-cell``, so the website
leaves it out). Outside Colab it does nothing and prints nothing. On Colab (which sets the environment
variable ``COLAB_RELEASE_TAG`` in its runtimes) it installs ``lessons_lib`` with pip from the published
repository, unless it is importable already. It installs the package alone: ``lessons_lib`` asks for
``numpy>=1.26,<3`` and nothing else, so Colab's own numpy, torch, matplotlib and ipywidgets stay as
they are. The repository comes from ``REPOSITORY`` in ``site/conf.py``, the one place that the Binder
badges and the site's launch buttons are built from too; ``LESSONS_LIB_SOURCE`` in the environment
replaces it (a fork, a mirror, or the wheel that ``tests/classroom/test_colab_cell.py`` builds).

Running the script twice changes nothing the second time: an existing cell is updated in place (its
id kept), and a notebook whose cell is already current is not rewritten. Execution counts are
renumbered 1, 2, 3, ... as a run from the top gives them, so the notebooks pass strict nbval and the
hygiene test without being regenerated (the cell prints nothing, so no stored output changes).
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TAG = "colab-setup"
TAGS = [TAG, "remove-cell"]
CELL_ID = "colab-setup"
COLAB_VARIABLE = "COLAB_RELEASE_TAG"
SOURCE_VARIABLE = "LESSONS_LIB_SOURCE"


def repository() -> str:
    """``owner/name`` of the published repository, from site/conf.py (which only assigns values)."""
    return str(runpy.run_path(str(ROOT / "site" / "conf.py"))["REPOSITORY"])


def package_source(repo: str | None = None) -> str:
    """What pip installs on Colab: the package at the top of the published repository."""
    return f"git+https://github.com/{repo or repository()}"


def cell_source(repo: str | None = None) -> str:
    return "\n".join(
        [
            "# On Colab only: install this series' helper package (nothing happens anywhere else).",
            "import os",
            "",
            f'if "{COLAB_VARIABLE}" in os.environ:',
            "    import importlib.util",
            "    import subprocess",
            "    import sys",
            "",
            '    if importlib.util.find_spec("lessons_lib") is None:',
            f'        source = os.environ.get("{SOURCE_VARIABLE}", "{package_source(repo)}")',
            '        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]',
            '        subprocess.run([*pip, "--root-user-action=ignore", source], check=True)',
        ]
    )


def _text(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def updated(notebook: dict[str, Any], source: str) -> bool:
    """Put the current cell right after the title cell of ``notebook``; True if anything changed."""
    cells: list[dict[str, Any]] = notebook["cells"]
    if not cells or cells[0]["cell_type"] != "markdown" or not _text(cells[0]).startswith("# "):
        raise ValueError("the first cell must be the lesson's title (a markdown cell starting with '# ')")
    found = [i for i, cell in enumerate(cells) if TAG in cell.get("metadata", {}).get("tags", [])]
    old = cells[found[0]] if found else None
    cell: dict[str, Any] = {
        "cell_type": "code",
        "execution_count": 1,
        "id": old.get("id", CELL_ID) if old else CELL_ID,
        "metadata": {"tags": list(TAGS)},
        "outputs": [],
        "source": source.splitlines(keepends=True),
    }
    if found == [1] and cells[1] == cell:
        return False
    for index in reversed(found):
        del cells[index]
    if "id" not in cells[0]:  # nbformat 4.4 and older notebooks have no cell ids
        del cell["id"]
    cells.insert(1, cell)
    _renumber(cells)
    return True


def _renumber(cells: list[dict[str, Any]]) -> None:
    """Execution counts 1, 2, 3, ... as a run from the top gives them (the new cell runs first and
    prints nothing, so every stored output stays what it was)."""
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    for count, cell in enumerate(code, 1):
        cell["execution_count"] = count
        for output in cell.get("outputs", []):
            if "execution_count" in output:
                output["execution_count"] = count


def add_cell(path: Path, source: str) -> bool:
    """Insert or update the cell in the notebook at ``path``; True if the file was rewritten."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    if not updated(notebook, source):
        return False
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/NN_*.ipynb")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell is missing or old")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    source = cell_source()
    stale = []
    for path in paths:
        if args.check:
            if updated(json.loads(path.read_text(encoding="utf-8")), source):
                stale.append(path)
        elif add_cell(path, source):
            print(f"updated {path}")
    for path in stale:
        print(f"{path}: no current Colab setup cell (run python scripts/add_colab_cell.py)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
