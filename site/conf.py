"""Sphinx configuration of the Several Heads website (build it with `bash scripts/build_site.sh`).

The source folder is the repository root and this folder holds only the configuration and the
landing page, so the site is built from the committed notebooks where they are, with their stored
outputs: nothing is executed, and no notebook is copied anywhere first. Pages keep the repository's layout:
`site/index.md` becomes `site/index.html`, `notebooks/01_one_head.ipynb` becomes
`notebooks/01_one_head.html`, and a small `index.html` at the top forwards to the landing page.
"""

from __future__ import annotations

# Where the repository is published. A placeholder, the same as the Binder badges in README.md
# (tests/test_site_config.py fails when the two disagree); change it here and there together.
REPOSITORY = "several-heads/several-heads"  # github.com/<owner>/<name>
BRANCH = "HEAD"  # what Binder builds: the default branch's latest commit
BINDERHUB = "https://mybinder.org"
REPOSITORY_URL = f"https://github.com/{REPOSITORY}"
# What a Binder badge or button opens, up to the notebook's path: JupyterLab ("jupyterlab" in the
# theme's words) with that notebook open.
BINDER_LAUNCH = f"{BINDERHUB}/v2/gh/{REPOSITORY}/{BRANCH}?urlpath=lab/tree/"
NOTEBOOK_INTERFACE = "jupyterlab"
# What an "Open in Colab" badge or button opens, up to the notebook's path: Colab reads the notebook
# from the same repository and branch. The Colab setup cell of every lesson installs lessons_lib from
# REPOSITORY too (scripts/add_colab_cell.py writes it from this file).
COLAB = "https://colab.research.google.com"
COLAB_LAUNCH = f"{COLAB}/github/{REPOSITORY}/blob/{BRANCH}/"

project = "Several Heads"
author = "the Several Heads authors"
html_title = "Several Heads"

extensions = [
    "myst_nb",  # reads the .ipynb lessons and site/index.md (it brings in myst-parser)
    # MathJax 3 copied into _static/mathjax/ and loaded from there, not from a CDN (the extension
    # sets mathjax_path itself, over any value given in this file).
    "sphinx-mathjax-offline",
    "sphinx.ext.githubpages",  # writes .nojekyll, so GitHub Pages keeps the _static/ folders
]

# The source folder is the repository root: read the landing page and the numbered lessons only, and
# do not even walk into .venv, .git, build/ or student/ (tens of thousands of files between them).
root_doc = "site/index"
include_patterns = ["site/index.md", "notebooks/[0-9][0-9]_*.ipynb"]
exclude_patterns = [".*", "build", "student"]

# Show the stored outputs exactly as strict nbval compared them.
nb_execution_mode = "off"
# A widget's view cannot run on a static page and no widget state is stored, so skip that mimetype:
# each widget cell then shows its text/html output, a note that says where the live widget runs.
# A lesson figure is stored twice: as image/png and as text/html (the same PNG in an <img> with its alt
# text, for JupyterLab: lessons_lib/plotting/alt_text.py). Here the PNG goes first, so myst-nb draws the
# figure itself and gives it the alt text from the cell's metadata (mystnb.image.alt).
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
    ("html", "image/png", 25),
]
# ... and never load the ipywidgets embedding scripts (they come from a CDN).
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
# Every cell tagged hide-input is an exercise's solution (tests/test_site_config.py checks it).
nb_code_prompt_show = "Show the solution"
nb_code_prompt_hide = "Hide the solution"
myst_enable_extensions = ["dollarmath", "substitution"]
# On Binder, binder/postBuild writes the learner copy (no stored outputs, so no answer on screen) into
# my-lessons/; every Binder link opens a lesson there, the theme's per-page launch buttons included.
LEARNER_COPY = "my-lessons/"
# Colab opens a notebook of the repository as it is: colab/ holds the same learner copy, committed
# (scripts/regenerate_notebooks.py writes it), with each solution a form cell Colab folds.
COLAB_COPY = "colab/"
myst_substitutions = {
    # the learner copy that binder/postBuild writes, as the README's badges open it (no stored answers)
    "binder_lesson_01": f"[lesson 01 on Binder]({BINDER_LAUNCH}{LEARNER_COPY}01_one_head.ipynb)",
    "colab_lesson_01": f"[lesson 01 on Colab]({COLAB_LAUNCH}{COLAB_COPY}01_one_head.ipynb)",
    "repository": f"[{REPOSITORY_URL.removeprefix('https://')}]({REPOSITORY_URL})",
    # The landing page's launch button (lesson pages have the theme's launch menu); styled in site.css.
    "binder_button": (
        f'<a class="launch-binder" href="{BINDER_LAUNCH}{LEARNER_COPY}01_one_head.ipynb">'
        "Launch lesson 01 on Binder</a>"
    ),
}

html_theme = "sphinx_book_theme"
html_theme_options = {
    "repository_url": REPOSITORY_URL,
    "repository_branch": BRANCH,
    "path_to_docs": "",  # paths of pages in the repository = their paths in the source folder
    "use_repository_button": True,
    "use_download_button": True,
    "launch_buttons": {"binderhub_url": BINDERHUB, "colab_url": COLAB, "notebook_interface": NOTEBOOK_INTERFACE},
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    # The sidebar has the search field; without this the parent theme adds a second one in a top bar.
    "navbar_persistent": [],
}
# Light or dark as the reader's system prefers (the theme logs a console error when this is unset).
html_context = {"default_mode": "auto"}
# site/_templates wraps two of the theme's sidebar items: the search button without its aria-label, and the
# site title inside a landmark (each template says why).
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_extra_path = ["_extra"]  # index.html at the top of the site, forwarding to site/index.html
# The download button offers the notebook itself (`_sources/notebooks/01_one_head.ipynb`).
html_sourcelink_suffix = ""
html_show_copyright = False


def _binder_opens_the_learner_copy(
    app: object, pagename: str, templatename: str, context: dict, doctree: object  # type: ignore[type-arg]
) -> None:
    """The theme's Binder and Colab buttons open the page's own path (notebooks/...), with every stored
    answer; point them at the learner copies (my-lessons/ on Binder, colab/ on Colab)."""
    stack = list(context.get("header_buttons", []))
    while stack:
        button = stack.pop()
        stack += button.get("buttons", [])
        url = button.get("url", "")
        if url.startswith(BINDER_LAUNCH + "notebooks/"):
            button["url"] = BINDER_LAUNCH + LEARNER_COPY + url.removeprefix(BINDER_LAUNCH + "notebooks/")
        elif url.startswith(COLAB_LAUNCH + "notebooks/"):
            button["url"] = COLAB_LAUNCH + COLAB_COPY + url.removeprefix(COLAB_LAUNCH + "notebooks/")


# myst-nb names each folded solution's <summary> "Toggle hidden content", which hides its visible text
# ("Show the solution") from a screen reader and breaks WCAG 2.5.3 (label in name: a voice user says
# what they see). Without the aria-label the summary's name is its visible text.
UNNAMED_SUMMARY = '<summary aria-label="Toggle hidden content">'


def _summaries_named_by_their_text(
    app: object, pagename: str, templatename: str, context: dict, doctree: object  # type: ignore[type-arg]
) -> None:
    """Drop myst-nb's aria-label from every folded cell's <summary> (see `UNNAMED_SUMMARY`)."""
    if isinstance(context.get("body"), str):
        context["body"] = context["body"].replace(UNNAMED_SUMMARY, "<summary>")


def setup(app: object) -> None:
    # After the theme has added its launch buttons (priority 500).
    app.connect("html-page-context", _binder_opens_the_learner_copy, priority=900)  # type: ignore[attr-defined]
    app.connect("html-page-context", _summaries_named_by_their_text, priority=900)  # type: ignore[attr-defined]
