"""Retention: exports (one contiguous stretch of the chain to a file, then noted in the chain)
and the prune of what was exported and is older than the horizon, which moves the anchor.
docs/journal.md, "Retention", has the rules."""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from .chain import BATCH
from .connection import connect
from .errors import JournalCorrupt, JournalExportError
from .export import write_export
from .records import KIND_EXPORT, KIND_PRUNE, REASON_EXPORTED, REASON_PRUNED, Entry, Record, iso_ns
from .schema import DAY_NS, RECORD_COLUMNS
from .sqlite_errors import sqlite_problem

#: what runs first in the transaction of an export's or a prune's record: (connection, its seq)
BeforeInsert = Callable[[sqlite3.Connection, int], None]


@dataclass(frozen=True, slots=True)
class ExportFile:
    """An export file written and fsynced, not yet noted in the chain (:meth:`Journal.note_export`)."""
    path: Path
    fmt: str
    first_seq: int
    last_seq: int
    count: int
    sha256: str  # hex, of the whole file


@dataclass(frozen=True, slots=True)
class ExportResult(ExportFile):
    """An export file noted in the chain."""
    record_seq: int  # the "export" record that notes it in the chain


@dataclass(frozen=True, slots=True)
class RetentionStatus:
    pruned_through: int  # the anchor: records up to it are gone
    exported_through: int  # exports cover every record from the anchor up to this seq
    unexported: int  # records after it
    oldest_unexported: str | None  # the first of them, ISO-8601 UTC
    unexported_past_horizon: bool  # that one is already older than the horizon: export it
    horizon_days: int  # the retention horizon: exported records older than this are pruned

    def to_json_dict(self) -> dict[str, Any]:
        return {"pruned_through": self.pruned_through, "exported_through": self.exported_through,
                "unexported": self.unexported, "oldest_unexported": self.oldest_unexported,
                "unexported_past_horizon": self.unexported_past_horizon, "horizon_days": self.horizon_days}

    def oldest_written(self, ts_ns: int, now_ns: int) -> "RetentionStatus":
        """This status once its oldest unexported record is known: the one stamped ``ts_ns``
        (the first written after a check that saw every record exported)."""
        return replace(self, oldest_unexported=iso_ns(ts_ns),
                       unexported_past_horizon=ts_ns < now_ns - self.horizon_days * DAY_NS)


@dataclass(frozen=True, slots=True)
class PruneResult:
    pruned: int
    through_seq: int  # the new anchor: records up to it are gone
    record_seq: int | None  # the "prune" record, None when nothing was pruned




def write_export_file(journal: Path, target: Path, fmt: str, since: int | None, until: int | None) -> ExportFile:
    """The records of the journal at ``journal`` from the first at or after ``since`` to the last
    before ``until`` written to ``target`` and fsynced, from one read snapshot on a connection of
    its own (appends go on meanwhile)."""
    reader = connect(journal, readonly=True)
    try:
        reader.execute("BEGIN")
        first, last = _seq_range(reader, since, until)
        if first is None or last is None or first > last:
            raise JournalExportError(f"journal {journal}: no records to export in that range")
        count, digest = write_export(target, fmt, _batches(reader, first, last))
    except sqlite3.Error as exc:
        raise JournalCorrupt(journal, None, f"damaged SQLite file while exporting: {sqlite_problem(exc)}") from None
    finally:
        reader.close()
    return ExportFile(target, fmt, first, last, count, digest)


def export_note(written: ExportFile, who: str) -> tuple[Entry, BeforeInsert]:
    """The "export" record of ``written``, and what goes in with it: the range in ``exports``
    (what makes the records prunable)."""
    data = {"file": str(written.path), "format": written.fmt, "sha256": written.sha256,
            "first_seq": written.first_seq, "last_seq": written.last_seq, "count": written.count,
            "message": f"exported {written.count} record(s) (seq {written.first_seq}..{written.last_seq}) "
                       f"to {written.path}"}
    note = Entry(kind=KIND_EXPORT, reason=REASON_EXPORTED, source="journal", who=who, data=data)
    note.check(journal_internal=True)

    def remember(conn: sqlite3.Connection, record_seq: int) -> None:
        conn.execute("INSERT INTO exports VALUES (?, ?, ?, ?, ?)", (record_seq, written.first_seq, written.last_seq,
                                                                    str(written.path), written.sha256))

    return note, remember


def prune_note(anchor_seq: int, through: int, anchor_hash: bytes, horizon_days: int, cutoff: int,
               who: str) -> tuple[Entry, BeforeInsert]:
    """The "prune" record of a prune from ``anchor_seq`` through ``through``, and what goes in
    with it: the anchor moved (its trigger checks export and age), then the records up to it gone."""
    pruned = through - anchor_seq
    note = Entry(kind=KIND_PRUNE, reason=REASON_PRUNED, source="journal", who=who,
                 data={"through_seq": through, "anchor_hash": anchor_hash.hex(), "count": pruned,
                       "horizon_days": horizon_days, "cutoff": iso_ns(cutoff),
                       "message": f"pruned {pruned} record(s) (seq {anchor_seq + 1}..{through}): exported, "
                                  f"older than {horizon_days} days"})
    note.check(journal_internal=True)

    def cut(conn: sqlite3.Connection, record_seq: int) -> None:
        conn.execute("UPDATE anchor SET seq = ?, hash = ? WHERE id = 1", (through, anchor_hash))
        conn.execute("DELETE FROM records WHERE seq <= ?", (through,))
        conn.execute("DELETE FROM snapshots WHERE seq < ?", (through,))

    return note, cut


def _batches(conn: sqlite3.Connection, first: int, last: int) -> Iterator[list[Record]]:
    cursor = conn.execute(f"SELECT {RECORD_COLUMNS} FROM records WHERE seq BETWEEN ? AND ? ORDER BY seq",
                          (first, last))
    while rows := cursor.fetchmany(BATCH):
        yield [Record(*row) for row in rows]


def _seq_range(conn: sqlite3.Connection, since: int | None, until: int | None) -> tuple[int | None, int | None]:
    first = conn.execute("SELECT min(seq) FROM records" + ("" if since is None else " WHERE ts >= ?"),
                         () if since is None else (since,)).fetchone()[0]
    last = conn.execute("SELECT max(seq) FROM records" + ("" if until is None else " WHERE ts < ?"),
                        () if until is None else (until,)).fetchone()[0]
    return first, last


def exported_through(conn: sqlite3.Connection, anchor_seq: int) -> int:
    """The last seq that exports cover without a gap from the anchor on (the anchor if none)."""
    covered = anchor_seq
    for first, last in conn.execute("SELECT first_seq, last_seq FROM exports WHERE last_seq > ? ORDER BY first_seq",
                                    (anchor_seq,)):
        if first > covered + 1:
            break
        covered = max(covered, last)
    return covered


def prunable_through(conn: sqlite3.Connection, anchor_seq: int, cutoff: int, max_records: int | None) -> int:
    """The last seq prune may delete: exported without a gap from the anchor, older than the
    cutoff from the anchor on, not past the latest snapshot, at most ``max_records`` on (which
    also bounds the search for the first young record)."""
    covered = exported_through(conn, anchor_seq)
    if max_records is not None:
        covered = min(covered, anchor_seq + max_records)
    if covered == anchor_seq:
        return anchor_seq
    young = conn.execute("SELECT min(seq) FROM records WHERE seq > ? AND seq <= ? AND ts >= ?",
                         (anchor_seq, covered, cutoff)).fetchone()[0]
    through = covered if young is None else young - 1
    snapshot = conn.execute("SELECT max(seq) FROM snapshots").fetchone()[0]
    if snapshot is not None:
        through = min(through, snapshot)
    return through
