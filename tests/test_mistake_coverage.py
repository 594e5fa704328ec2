"""Across every lesson's typical-mistake table: at least `NAMED_GOAL` of the mistakes are named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mistake_table import NAMED_GOAL, Mistake

TABLES = sorted(Path(__file__).parent.glob("test_mistakes_*.py"))


def _rows() -> list[Mistake]:
    rows: list[Mistake] = []
    for path in TABLES:
        spec = importlib.util.spec_from_file_location(f"_table_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        rows += module.MISTAKES
    return rows


def test_most_typical_mistakes_are_named() -> None:
    rows = _rows()
    assert TABLES and rows, "no typical-mistake tables found"
    named = sum(row.named for row in rows)
    assert named / len(rows) >= NAMED_GOAL, f"{named} of {len(rows)} mistakes named, goal {NAMED_GOAL:.0%}"
