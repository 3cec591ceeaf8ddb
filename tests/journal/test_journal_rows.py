"""The writer's parameters (records.chain_values) store each column as before: hashes as BLOBs,
no round as NULL, a round's text as text (an empty one too), in statements of one row and of many."""
from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from cardd.journal import Entry, Journal
from tests.journal.journal_helpers import FakeClock

ROUNDS: list[object] = [None, "", "0", 0, "7", 7, True, 7.5, "x" * 40]
#: what the round column holds for each, and its SQLite type
STORED = [(None, "null"), ("", "text"), ("0", "text"), ("0", "text"), ("7", "text"), ("7", "text"),
          (None, "null"), (None, "null"), ("x" * 40, "text")]


@pytest.mark.parametrize("copies", [1, 3])  # 9 rows: one statement a row; 27: statements of 16 and 8 rows, then 3
def test_each_column_is_stored_with_its_type(tmp_path, copies):
    path = tmp_path / "j.db"
    with Journal.open(path, create=True, clock=FakeClock()) as journal:
        journal.append([Entry("event", "R", "shoe", data={"round": r}) for r in ROUNDS] * copies)
        assert journal.verify().ok
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT round, typeof(round), typeof(prev), typeof(hash), length(prev), length(hash), "
                            "typeof(seq), typeof(ts), typeof(data) FROM records ORDER BY seq").fetchall()
    assert [(r[0], r[1]) for r in rows] == STORED * copies
    assert {r[2:] for r in rows} == {("blob", "blob", 32, 32, "integer", "integer", "text")}
