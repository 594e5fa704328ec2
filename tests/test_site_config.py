"""The website's configuration (site/) agrees with the README and with the lessons it shows.

* The Binder badges in README.md and the site's launch buttons open the same repository, branch
  and interface: site/conf.py names them once, and every badge must be the link the site builds.
* The table of contents in site/index.md lists every lesson in notebooks/, in order, and so does
  the landing page's table of lessons.
* What the site's settings take for granted about the notebooks: every cell that the site folds
  away (tag ``hide-input``) is a solution, and every widget output carries the HTML note the site
  shows in its place.
* Every lesson's headings are in order (one H1, first; no level skipped), every figure cell carries a
  one-sentence alt text for the site (``mystnb.image.alt``, written by scripts/apply_figure_metadata.py),
  and the landing page has a launch button.
* requirements-site.txt adds tools beside requirements.txt without pinning anything it pins.
* With the site tools installed: a table of contents that leaves a lesson out fails the build (with
  stand-in notebooks, so the build takes a few seconds).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
NOTEBOOKS = ROOT / "notebooks"
# The headings and alt-text checks read these (BROWSER_TEST_NOTEBOOKS=/path: other copies, as the browser tests).
CHECKED_NOTEBOOKS = Path(os.environ.get("BROWSER_TEST_NOTEBOOKS", NOTEBOOKS))
BADGE = re.compile(r"\[!\[[^\]]*\]\(https://mybinder\.org/badge_logo\.svg\)\]\(([^)\s]+)\)")
# How sphinx-book-theme spells each notebook interface in a Binder link's urlpath.
INTERFACE_PATHS = {"jupyterlab": "lab/tree", "classic": "tree"}
SITE_TOOLS = ("sphinx", "myst_nb", "sphinx_book_theme")
INSTALL_SITE_TOOLS = "the site tools are not installed: .venv/bin/pip install -r requirements-site.txt"


def site_config() -> dict[str, Any]:
    """The names site/conf.py defines (it only assigns values, so running it is safe)."""
    return runpy.run_path(str(SITE / "conf.py"))


def lessons() -> list[str]:
    """Every lesson, as its path without suffix relative to the repository ("notebooks/01_one_head")."""
    found = [f"notebooks/{path.stem}" for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
    assert found, f"no lessons found in {NOTEBOOKS}"
    return found


def toctree_entries(index: str) -> list[str]:
    """The document names listed in the (only) toctree directive of a MyST page."""
    blocks = re.findall(r"^```\{toctree\}\n(.*?)^```", index, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, f"site/index.md should hold exactly one toctree, found {len(blocks)}"
    return [line.strip() for line in blocks[0].splitlines() if line.strip() and not line.startswith(":")]


def cells(path: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return found


def tags(cell: dict[str, Any]) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def test_readme_binder_badges_are_the_links_the_site_builds() -> None:
    config = site_config()
    badges = BADGE.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert badges, "README.md has no Binder badge; the site's launch buttons have nothing to agree with"
    launch = config["BINDER_LAUNCH"]
    for link in badges:
        assert link.startswith(launch), (
            f"README badge {link} disagrees with site/conf.py, whose launch buttons open {launch}...: "
            "change REPOSITORY / BRANCH in site/conf.py and the badges in README.md together"
        )
        # Badges open the learner copy that binder/postBuild writes (my-lessons/NN_topic.ipynb, made from
        # notebooks/NN_topic.ipynb; tests/test_binder.py checks that); the site's buttons open notebooks/.
        notebook = re.sub(r"^my-lessons/", "notebooks/", link.removeprefix(launch))
        assert (ROOT / notebook).is_file(), f"README badge {link} opens a copy of {notebook}, which does not exist"


def test_the_theme_builds_launch_links_from_the_one_place_the_repository_is_named() -> None:
    """sphinx-book-theme writes `{binderhub_url}/v2/gh/{owner}/{name}/{branch}?urlpath={interface}/{path}`."""
    config = site_config()
    options = config["html_theme_options"]
    owner, name = config["REPOSITORY"].split("/")
    assert options["repository_url"] == f"https://github.com/{owner}/{name}"
    interface = INTERFACE_PATHS[options["launch_buttons"]["notebook_interface"]]
    built_by_theme = (
        f"{options['launch_buttons']['binderhub_url']}/v2/gh/{owner}/{name}/{options['repository_branch']}"
        f"?urlpath={interface}/"
    )
    assert built_by_theme == config["BINDER_LAUNCH"]
    # The theme adds a page's path in the source folder, which must be its path in the repository.
    assert options["path_to_docs"] == ""


def test_the_table_of_contents_lists_every_lesson_in_order() -> None:
    entries = toctree_entries((SITE / "index.md").read_text(encoding="utf-8"))
    assert entries == [f"/{lesson}" for lesson in lessons()], (
        "site/index.md's toctree must list every notebooks/NN_*.ipynb once, in lesson order"
    )


def test_the_landing_page_table_links_every_lesson_in_order() -> None:
    index = (SITE / "index.md").read_text(encoding="utf-8")
    linked = re.findall(r"^\| \[[^\]]+\]\(\.\./(notebooks/[^)]+)\.ipynb\) \|", index, re.MULTILINE)
    assert linked == lessons(), "the lesson table in site/index.md must link every lesson once, in order"


def test_the_build_reads_exactly_the_landing_page_and_the_lessons() -> None:
    config = site_config()
    read = {
        path.relative_to(ROOT).with_suffix("").as_posix()
        for pattern in config["include_patterns"]
        for path in ROOT.glob(pattern)
    }
    assert read == {config["root_doc"], *lessons()}
    every_notebook = {path.relative_to(ROOT).with_suffix("").as_posix() for path in NOTEBOOKS.glob("*.ipynb")}
    assert every_notebook == set(lessons()), "every notebook in notebooks/ must be a lesson named NN_topic.ipynb"


def test_every_folded_cell_is_a_solution() -> None:
    """The site labels each folded cell "Show the solution"; that must stay true."""
    config = site_config()
    assert "solution" in config["nb_code_prompt_show"]
    folded = 0
    for lesson in lessons():
        for i, cell in enumerate(cells(ROOT / f"{lesson}.ipynb")):
            if "hide-input" in tags(cell):
                folded += 1
                assert "solution" in tags(cell), f"{lesson} cell {i} is folded on the site but is not a solution"
    assert folded > 0


def test_every_widget_output_carries_the_note_the_site_shows() -> None:
    """The site drops the widget-view mimetype, so a widget output without its HTML note would be empty."""
    config = site_config()
    widget_view = "application/vnd.jupyter.widget-view+json"
    assert ("html", widget_view, None) in config["nb_mime_priority_overrides"]
    widgets = 0
    for lesson in lessons():
        for i, cell in enumerate(cells(ROOT / f"{lesson}.ipynb")):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if widget_view in data:
                    widgets += 1
                    note = "".join(data.get("text/html", []))
                    assert 'class="lesson-widget-note"' in note, f"{lesson} cell {i}: widget output without its note"
    assert widgets > 0


def test_site_requirements_move_no_pin_of_requirements_txt() -> None:
    def pinned(path: Path) -> dict[str, str]:
        found = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
            if match:
                found[match[1].lower().replace("_", "-")] = match[2]
        return found

    site, learner = pinned(ROOT / "requirements-site.txt"), pinned(ROOT / "requirements.txt")
    assert {"sphinx", "myst-nb", "sphinx-book-theme"} <= site.keys()
    assert not site.keys() & learner.keys(), "requirements-site.txt must not pin what requirements.txt pins"
    # Read with requirements.txt in one resolution, so the site tools cannot move a learner's pin.
    assert "-r requirements.txt" in (ROOT / "requirements-site.txt").read_text(encoding="utf-8").splitlines()


def stand_in_notebook(title: str) -> str:
    """A one-cell notebook: enough for Sphinx to find a lesson and give it a title."""
    notebook = {
        "cells": [{"cell_type": "markdown", "metadata": {}, "source": [f"# {title}\n"]}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(notebook)


def test_a_lesson_missing_from_the_table_of_contents_fails_the_build(tmp_path: Path) -> None:
    if any(importlib.util.find_spec(tool) is None for tool in SITE_TOOLS):
        pytest.skip(INSTALL_SITE_TOOLS)
    left_out = lessons()[4]
    source = tmp_path / "source"
    (source / "notebooks").mkdir(parents=True)
    (source / "site").mkdir()
    for lesson in lessons():
        (source / f"{lesson}.ipynb").write_text(stand_in_notebook(lesson), encoding="utf-8")
    index = (SITE / "index.md").read_text(encoding="utf-8")
    assert f"\n/{left_out}\n" in index
    (source / "site" / "index.md").write_text(index.replace(f"\n/{left_out}\n", "\n"), encoding="utf-8")

    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_site.sh"), str(tmp_path / "out" / "site"), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHON": sys.executable},  # the interpreter running the tests, not .venv's
    )
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert result.returncode != 0, f"the build passed although {left_out} is not in the toctree:\n{result.stderr}"
    # Exactly one complaint, about the lesson left out: the stand-ins build cleanly otherwise.
    assert len(warnings) == 1, result.stderr
    assert f"{left_out}.ipynb" in warnings[0] and "toctree" in warnings[0], warnings[0]


# ----- headings, alt texts, the landing page's launch button ---------------------------------------
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+\S")


def heading_levels(markdown_sources: list[str]) -> list[int]:
    """The level of every Markdown heading (``#`` lines outside fenced code), in order."""
    levels = []
    for text in markdown_sources:
        fenced = False
        for line in text.splitlines():
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and (match := HEADING.match(line)):
                levels.append(len(match.group(1)))
    return levels


def heading_problems(levels: list[int]) -> list[str]:
    problems = []
    if not levels or levels[0] != 1:
        problems.append("the first heading is not an H1")
    if levels.count(1) != 1:
        problems.append(f"{levels.count(1)} H1 headings, not one")
    for before, after in itertools.pairwise(levels):
        if after > before + 1:
            problems.append(f"an H{after} follows an H{before}")
    return problems


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (["# Lesson\n\n## 1. Part\n\n### a", "## 2. Part"], []),
        (["# Lesson\n\n### skipped"], ["an H3 follows an H1"]),
        (["## no title"], ["the first heading is not an H1", "0 H1 headings, not one"]),
        (["# One\n```python\n# a comment, not a heading\n```\n# Two"], ["2 H1 headings, not one"]),
    ],
)
def test_heading_check_sees_each_problem(sources: list[str], expected: list[str]) -> None:
    assert heading_problems(heading_levels(sources)) == expected


@pytest.mark.parametrize("lesson", [path.stem for path in sorted(CHECKED_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))])
def test_headings_are_in_order(lesson: str) -> None:
    """One H1 (the title, first) and no skipped level: what a screen reader's heading list needs."""
    path = CHECKED_NOTEBOOKS / f"{lesson}.ipynb"
    sources = ["".join(cell["source"]) for cell in cells(path) if cell["cell_type"] == "markdown"]
    assert not heading_problems(heading_levels(sources)), f"{lesson}: {heading_problems(heading_levels(sources))}"


def test_every_figure_has_an_alt_text() -> None:
    """Every cell that stores a figure gives the site a one-sentence description of it."""
    missing = []
    for path in sorted(CHECKED_NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        for cell in cells(path):
            if any("image/png" in output.get("data", {}) for output in cell.get("outputs", [])):
                alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt", "")
                if len(alt.split()) < 6 or not alt.endswith("."):
                    missing.append(f"{path.stem} cell {cell.get('id')}: {alt!r}")
    assert not missing, "figures without a real alt text (run scripts/apply_figure_metadata.py):\n" + "\n".join(
        missing
    )


def test_the_landing_page_has_a_launch_button() -> None:
    config = site_config()
    button = config["myst_substitutions"]["binder_button"]
    assert f'href="{config["BINDER_LAUNCH"]}my-lessons/01_one_head.ipynb"' in button
    assert "{{ binder_button }}" in (SITE / "index.md").read_text(encoding="utf-8")


def test_a_folded_solution_is_named_by_the_text_it_shows() -> None:
    """myst-nb's <summary aria-label="Toggle hidden content"> hides "Show the solution" from screen readers
    (axe: label-content-name-mismatch); the page hook removes it and leaves every other summary alone."""
    config = site_config()
    body = (
        f'<details class="hide above-input">{config["UNNAMED_SUMMARY"]}\n<p class="collapsed">Show the solution</p>'
        '</summary></details><details><summary aria-label="Other">x</summary></details>'
    )
    context: dict[str, Any] = {"body": body}
    config["_summaries_named_by_their_text"](None, "notebooks/02", "page.html", context, None)
    assert "Toggle hidden content" not in context["body"]
    assert '<details class="hide above-input"><summary>\n<p class="collapsed">Show the solution' in context["body"]
    assert '<summary aria-label="Other">' in context["body"]


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_the_back_to_top_pill_is_readable() -> None:
    """The theme's pill was 2.45:1 on a phone; site.css gives it colours at 4.5:1 or more (WCAG AA text)."""
    css = (SITE / "_static" / "site.css").read_text(encoding="utf-8")
    rule = re.search(r"#pst-back-to-top\s*\{([^}]*)\}", css)
    assert rule, "site.css no longer styles the theme's Back to top pill"
    colours = dict(re.findall(r"(background-color|color):\s*(#[0-9a-fA-F]{6})", rule.group(1)))
    high, low = sorted((_luminance(colours["background-color"]), _luminance(colours["color"])), reverse=True)
    assert (high + 0.05) / (low + 0.05) >= 4.5
