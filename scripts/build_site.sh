#!/usr/bin/env bash
# Build the website of the lessons from the committed notebooks and their stored outputs.
#
#   bash scripts/build_site.sh                    # -> build/site/index.html (build/ is ignored by git)
#   bash scripts/build_site.sh OUT_DIR            # into another folder (the browser test uses one in tmp)
#   bash scripts/build_site.sh OUT_DIR SOURCE_DIR # another tree laid out like this one (for the tests)
#
# Needs the site tools: .venv/bin/pip install -r requirements-site.txt (PYTHON=... picks the interpreter).
# Nothing is executed: the pages show the outputs that strict nbval compares. Every warning is an
# error (-W) and --keep-going lists them all before failing, so a broken cross-reference, a missing
# image, or a lesson left out of the table of contents in site/index.md fails the build. Each run
# starts afresh (-E -a): no page is reused from an earlier build.
# Beside OUT_DIR, Sphinx keeps its pickled documents in OUT_DIR.doctrees, and myst-nb writes the
# notebooks' images to jupyter_execute/ in OUT_DIR's parent folder before copying them in.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-$repo/build/site}")"
source_dir="$(realpath -m "${2:-$repo}")"
python="${PYTHON:-$repo/.venv/bin/python}"

if ! "$python" -c "import sphinx, myst_nb, sphinx_book_theme" 2> /dev/null; then
    echo "build_site: the site tools are missing; run: $python -m pip install -r $repo/requirements-site.txt" >&2
    exit 1
fi
"$python" -m sphinx -W --keep-going -E -a -q -b html -d "$out.doctrees" -c "$repo/site" "$source_dir" "$out"
echo "build_site: built $out/index.html"
