#!/usr/bin/env bash
# Write the student version of every lesson: the notebooks without their `solution` cells and
# without outputs (so every prediction is still open), into DIR (default: student/, ignored by git).
#   bash scripts/student_version.sh [DIR]
# nbconvert's own TagRemovePreprocessor does the removal; nothing here edits a notebook by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-student}"
"${PYTHON:-.venv/bin/python}" -m jupyter nbconvert --to notebook --log-level=WARN \
    --TagRemovePreprocessor.enabled=True --TagRemovePreprocessor.remove_cell_tags=solution \
    --ClearOutputPreprocessor.enabled=True --output-dir "$out" notebooks/*.ipynb
