"""Markdown tables in the docs are whole: a blank line inside one ends it, and the rows after it
are shown as a paragraph of pipes (cardctl.md's Devices table lost monitor, capture and replay so)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SEPARATOR = re.compile(r"^\|\s*:?-{3,}")


def rows_outside_a_table(text: str) -> list[int]:
    """Line numbers of table rows that start after a blank line without a header separator under them."""
    lines = text.splitlines()
    stray, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|") or (i > 0 and lines[i - 1].strip()):
            continue
        if i + 1 >= len(lines) or not SEPARATOR.match(lines[i + 1]):
            stray.append(i + 1)
    return stray


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_no_table_is_split_by_a_blank_line(path: Path) -> None:
    assert rows_outside_a_table(path.read_text(encoding="utf-8")) == [], f"{path}: a row after a blank line"


def test_a_split_table_is_found() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n"
    assert rows_outside_a_table(table) == [5]
    assert rows_outside_a_table(table.replace("\n\n", "\n")) == []
