"""Shared helpers for the journal tests: filling a journal and tampering with it behind its back."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from cardd.journal import Entry, Journal
from cardd.journal.head_file import CommittedHead, write_new
from cardd.journal.records import body_bytes, canonical_json, iso_ns, record_hash
from cardd.journal.schema import RECORD_COLUMNS, TRIGGERS

DAY_NS = 86_400 * 1_000_000_000
# 2020-01-01T00:00:00Z: old enough that the SQL guard (the machine's clock minus 90 days) allows pruning
T0 = 1_577_836_800 * 1_000_000_000


class FakeClock:
    """A wall clock the test moves: UTC nanoseconds."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def card(round_id: int, index: int, **extra: object) -> Entry:
    return Entry("event", "CARD_ASSIGNED", "shoe", data={"round": round_id, "index": index, **extra})


def fill(journal: Journal, rounds: int, per_round: int = 10, clock: FakeClock | None = None,
         step_ns: int = 1_000_000_000) -> list[int]:
    """Rounds of card events, one group commit (with a snapshot) per round."""
    seqs: list[int] = []
    for r in range(1, rounds + 1):
        seqs += journal.append([card(r, i) for i in range(per_round)], snapshot={"round": r, "seq": seqs[-1:]})
        if clock is not None:
            clock.now += step_ns
    return seqs


def tamper(path: Path, *sql: str) -> None:
    """Change the file the way an editor would: drop the guards, run the SQL, put the guards back."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        for name in names:
            conn.execute(f"DROP TRIGGER {name}")
        for statement in sql:
            conn.execute(statement)
        conn.executescript(TRIGGERS)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def journal_of_cards(path: Path, records: int) -> Path:
    """A new journal at ``path`` of ``records`` card events, rounds of 10."""
    with Journal.open(path, create=True) as journal:
        fill(journal, rounds=records // 10, per_round=10)
    return path


def damage_page_of(path: Path, seq: int) -> None:
    """Overwrite the whole leaf page of the main file that holds record ``seq``."""
    conn = sqlite3.connect(path)
    (digest,) = conn.execute("SELECT hash FROM records WHERE seq = ?", (seq,)).fetchone()
    conn.close()
    page = path.read_bytes().index(digest) // 4096 * 4096
    with open(path, "r+b") as file:
        file.seek(page)
        file.write(b"\xa5" * 4096)


def rechained_from(path: Path, seq: int, prev: bytes) -> list[str]:
    """SQL giving record ``seq`` the previous-hash ``prev`` and every record from it (and the
    head) the hashes that follow: a chain sound in itself from ``seq`` on, not joined to the
    record before it."""
    conn = sqlite3.connect(path)
    rows = conn.execute(f"SELECT {RECORD_COLUMNS} FROM records WHERE seq >= ? ORDER BY seq", (seq,)).fetchall()
    conn.close()
    statements = []
    for row in rows:
        digest = record_hash(prev, body_bytes(*row[:9]))
        statements.append(f"UPDATE records SET prev = x'{prev.hex()}', hash = x'{digest.hex()}' WHERE seq = {row[0]}")
        prev = digest
    return statements + [f"UPDATE head SET hash = x'{prev.hex()}'"]


def deleted_and_rechained(path: Path, seq: int) -> list[str]:
    """SQL deleting record ``seq`` and re-hashing every record after it onto the one before it,
    the head rewritten to match: each link sound, only the run of seqs shows the gap."""
    conn = sqlite3.connect(path)
    before = conn.execute("SELECT hash FROM records WHERE seq = ?", (seq - 1,)).fetchone()
    anchor = conn.execute("SELECT hash FROM anchor").fetchone()[0]
    conn.close()
    return [f"DELETE FROM records WHERE seq = {seq}", *rechained_from(path, seq + 1, anchor if before is None else before[0]),
            "UPDATE head SET seq = (SELECT max(seq) FROM records)"]


def forge_head_file(path: Path) -> None:
    """Write the journal's head file anew to say its stored head was committed, as someone who
    rewrote the chain can (it is a check on what the disk did, not a seal)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    seq, digest = conn.execute("SELECT seq, hash FROM head").fetchone()
    conn.close()
    write_new(path, CommittedHead(seq, digest), like=path)


def forge_edit(path: Path, seq: int, data: dict[str, object]) -> None:
    """Give record ``seq`` other data and rebuild the chain from it on: every later hash, the
    head and its head file recomputed, as someone with the file (and no key) can. A plain verify
    of the result passes; only hashes kept elsewhere (exports, anchors) show the edit."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    (prev,) = conn.execute("SELECT prev FROM records WHERE seq = ?", (seq,)).fetchone()
    conn.close()
    text = canonical_json(data, "data").replace("'", "''")
    tamper(path, f"UPDATE records SET data = '{text}' WHERE seq = {seq}")
    tamper(path, *rechained_from(path, seq, prev))
    forge_head_file(path)


def truncate(path: Path, through_seq: int) -> None:
    """Remove every record after ``through_seq``, the head, its head file and the snapshots moved
    back to match: a journal a plain verify cannot tell from one that ended there."""
    tamper(path, f"DELETE FROM records WHERE seq > {through_seq}", f"DELETE FROM snapshots WHERE seq > {through_seq}",
           f"UPDATE head SET seq = {through_seq}, hash = (SELECT hash FROM records WHERE seq = {through_seq})")
    forge_head_file(path)


def anchor_payloads(path: Path, seqs: list[int], site: str = "floor1", table: str = "bj-07") -> list[dict[str, object]]:
    """The anchor topic's payloads for records ``seqs`` of the journal at ``path``, as the table
    publishes them (docs/floor.md): the record's chain hash and its time, to the millisecond."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = [conn.execute("SELECT seq, ts, hash FROM records WHERE seq = ?", (seq,)).fetchone() for seq in seqs]
    conn.close()
    return [{"schema": "cardd.floor/1", "site": site, "table": table, "seq": seq, "hash": digest.hex(),
             "time": iso_ns(ts)[:23] + "Z"} for seq, ts, digest in rows]


def write_anchors(target: Path, payloads: list[dict[str, object]], *, with_topic: bool = False) -> Path:
    """An anchors file as a subscriber keeps one: a payload a line (or ``{"topic", "payload"}``)."""
    lines = []
    for payload in payloads:
        topic = f"cardd/v1/{payload['site']}/{payload['table']}/anchor"
        lines.append(json.dumps({"topic": topic, "payload": payload} if with_topic else payload))
    target.write_text("\n".join(lines) + "\n")
    return target
