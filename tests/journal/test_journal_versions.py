"""The journal's schema version: what this release reads, and an older journal marked with this
release's version when opened for writing (its records as they were)."""
from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from cardd.journal import Entry, Journal, JournalError
from cardd.journal.schema import SCHEMA_VERSION


def user_version(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        return version


def set_user_version(path: Path, version: int) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA user_version = {version}")


@pytest.fixture
def version_1(tmp_path: Path) -> Path:
    """A journal as release 1 left it: schema version 1, one record."""
    path = tmp_path / "journal.sqlite3"
    with Journal.open(path, create=True) as journal:
        journal.append([Entry(kind="input", source="shoe-reader", data={"type": "LinkUp", "device": "shoe-reader"})])
    set_user_version(path, 1)
    return path


def test_a_new_journal_has_this_releases_version(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    Journal.open(path, create=True).close()
    assert user_version(path) == SCHEMA_VERSION == 2


def test_a_version_1_journal_is_read_as_it_is(version_1: Path) -> None:
    with Journal.open(version_1, readonly=True) as journal:
        assert [r.kind for r in journal.query(limit=None)] == ["input"] and journal.verify().ok
    assert user_version(version_1) == 1  # a reader changes nothing


def test_a_version_1_journal_opened_for_writing_is_marked_2_and_its_chain_goes_on(version_1: Path) -> None:
    with Journal.open(version_1) as journal:
        journal.append([Entry(kind="event", reason="CARD_ASSIGNED", source="round", data={"input": {"type": "x"}})])
        assert journal.verify().ok and journal.last_seq == 2
    assert user_version(version_1) == 2


def test_a_journal_of_a_later_version_is_refused_naming_the_versions_read(version_1: Path) -> None:
    set_user_version(version_1, 3)
    with pytest.raises(JournalError, match=r"has schema version 3; this cardd reads versions 1, 2$"):
        Journal.open(version_1)
    assert user_version(version_1) == 3
