"""The journal's SQLite schema, with the triggers that keep it append-only in SQL too.

Records are never updated; they are deleted only up to the anchor, and the anchor moves
only forward, onto a record that was exported and is older than the legal minimum horizon
by the machine's clock (``prune`` is the only writer of both). Every insert must carry the
next sequence number and the previous record's hash.
"""
from __future__ import annotations

import re

APPLICATION_ID = 0x43415244  # "CARD": PRAGMA application_id marks the file as a cardd journal
#: 2: a card read and the first event it caused are one record (records.INPUT_KEY). A journal of
#: version 1 is read as it is and marked 2 when opened for writing (its records stay valid):
#: a release that reads only version 1 then refuses it instead of replaying it wrongly
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
MIN_RETENTION_DAYS = 90
DAY_NS = 86_400 * 1_000_000_000
# the machine's clock in UTC nanoseconds, as SQLite can compute it
_SQL_NOW_NS = "CAST((julianday('now') - 2440587.5) * 86400000000000 AS INTEGER)"

#: the floor export's cursor (cardd/export): the records a broker acknowledged, through
#: ``delivered_through``, the export chain's hash of that record (``chain``, docs/floor.md "The
#: export chain"; NULL while none was noted) and ``session``, its connections counted. Outside the
#: chain: it is a note of what left the table, not a record of the table; a journal made before it
#: gets it when next opened for writing (IF NOT EXISTS), one made before ``chain`` the column
#: (DELIVERY_CHAIN)
DELIVERY = """CREATE TABLE IF NOT EXISTS delivery (
    id INTEGER PRIMARY KEY CHECK (id = 1), delivered_through INTEGER NOT NULL, session INTEGER NOT NULL,
    chain TEXT
);
INSERT OR IGNORE INTO delivery (id, delivered_through, session) VALUES (1, 0, 0);
"""
DELIVERY_CHAIN = "ALTER TABLE delivery ADD COLUMN chain TEXT"

TABLES = f"""
CREATE TABLE records (
    seq      INTEGER PRIMARY KEY,
    ts       INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    source   TEXT NOT NULL,
    reason   TEXT NOT NULL,
    severity TEXT NOT NULL,
    who      TEXT NOT NULL,
    round    TEXT,
    data     TEXT NOT NULL,
    prev     BLOB NOT NULL,
    hash     BLOB NOT NULL
);
CREATE INDEX records_ts ON records (ts);
CREATE INDEX records_round ON records (round) WHERE round IS NOT NULL;
CREATE INDEX records_reason ON records (reason) WHERE reason <> '';
CREATE INDEX records_severity ON records (severity) WHERE severity <> 'info';

-- the last record written, checked against the chain on every open
CREATE TABLE head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash BLOB NOT NULL);
-- the last record pruned: the chain starts after it
CREATE TABLE anchor (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash BLOB NOT NULL);
-- what was exported, so prune knows what it may delete (the chain holds the same in export records)
CREATE TABLE exports (
    record_seq INTEGER PRIMARY KEY, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    file TEXT NOT NULL, sha256 TEXT NOT NULL
);
-- the caller's state, valid after record seq; only the latest few are kept
CREATE TABLE snapshots (seq INTEGER PRIMARY KEY, sha256 BLOB NOT NULL, data TEXT NOT NULL);
{DELIVERY}
INSERT INTO head VALUES (1, 0, zeroblob(32));
INSERT INTO anchor VALUES (1, 0, zeroblob(32));
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
"""

# the guards: checked present on every open
TRIGGERS = f"""
CREATE TRIGGER records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'journal records are append-only'); END;
CREATE TRIGGER records_delete_only_pruned BEFORE DELETE ON records
WHEN OLD.seq > (SELECT seq FROM anchor)
BEGIN SELECT RAISE(ABORT, 'journal records are deleted only by prune, up to the anchor'); END;
-- the last record (the anchor when none is left) must be seq - 1 and hold the hash prev: one step
-- to the end of the rowid b-tree per insert (LEGACY_APPEND_IN_ORDER: the same rule, as older journals hold it)
CREATE TRIGGER records_append_in_order BEFORE INSERT ON records
WHEN coalesce((SELECT seq + 1 IS NEW.seq AND hash IS NEW.prev FROM records ORDER BY seq DESC LIMIT 1),
              (SELECT seq + 1 IS NEW.seq AND hash IS NEW.prev FROM anchor)) IS NOT 1
BEGIN SELECT RAISE(ABORT, 'a journal record must carry the next seq and the previous record''s hash'); END;
-- the hash encoding joins fields with 0x1F: no field may hold one, so the bytes fix the fields
CREATE TRIGGER records_no_separator BEFORE INSERT ON records
WHEN instr(NEW.kind || NEW.source || NEW.reason || NEW.severity || NEW.who || ifnull(NEW.round, ''), char(31)) > 0
BEGIN SELECT RAISE(ABORT, 'a journal record field may not contain the separator 0x1F'); END;

CREATE TRIGGER head_forward BEFORE UPDATE ON head
WHEN NEW.seq < OLD.seq OR NEW.hash IS NOT (SELECT hash FROM records WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'the journal head only moves forward, onto a stored record'); END;
CREATE TRIGGER head_no_delete BEFORE DELETE ON head
BEGIN SELECT RAISE(ABORT, 'the journal head is never deleted'); END;

CREATE TRIGGER anchor_forward BEFORE UPDATE ON anchor
WHEN NEW.seq <= OLD.seq
  OR NEW.hash IS NOT (SELECT hash FROM records WHERE seq = NEW.seq)
  OR NOT EXISTS (SELECT 1 FROM exports WHERE NEW.seq BETWEEN first_seq AND last_seq)
  OR (SELECT ts FROM records WHERE seq = NEW.seq) >= {_SQL_NOW_NS} - {MIN_RETENTION_DAYS * DAY_NS}
BEGIN SELECT RAISE(ABORT, 'the anchor moves only forward onto an exported record older than {MIN_RETENTION_DAYS} days'); END;
CREATE TRIGGER anchor_no_delete BEFORE DELETE ON anchor
BEGIN SELECT RAISE(ABORT, 'the journal anchor is never deleted'); END;

CREATE TRIGGER exports_no_update BEFORE UPDATE ON exports
BEGIN SELECT RAISE(ABORT, 'export records are append-only'); END;
CREATE TRIGGER exports_no_delete BEFORE DELETE ON exports
BEGIN SELECT RAISE(ABORT, 'export records are append-only'); END;
"""
#: records_append_in_order as older journals hold it: the same rule, two lookups
#: of the records a row (the check on open accepts both forms, GUARD_FORMS; a journal keeps the
#: form it was made with: no trigger is rewritten in place)
LEGACY_APPEND_IN_ORDER = """
CREATE TRIGGER records_append_in_order BEFORE INSERT ON records
WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM records), (SELECT seq FROM anchor)) + 1
  OR NEW.prev IS NOT coalesce((SELECT hash FROM records WHERE seq = NEW.seq - 1), (SELECT hash FROM anchor))
BEGIN SELECT RAISE(ABORT, 'a journal record must carry the next seq and the previous record''s hash'); END;
"""
SCHEMA = TABLES + TRIGGERS


def _trigger_texts(script: str) -> dict[str, str]:
    """name -> the text SQLite keeps of each CREATE TRIGGER in ``script`` (its sqlite_master.sql)."""
    return {found.group(2): found.group(1)
            for found in re.finditer(r"(CREATE TRIGGER (\w+)\b.*?\bEND);", script, re.S)}


#: every form of each guard a journal made by cardd holds, as SQLite keeps its text: the check on
#: open refuses a guard missing, rewritten (a trigger of the same name that guards less) or joined
#: by a trigger cardd never makes
GUARD_FORMS: dict[str, frozenset[str]] = {name: frozenset({text}) for name, text in _trigger_texts(TRIGGERS).items()}
GUARD_FORMS["records_append_in_order"] |= frozenset(_trigger_texts(LEGACY_APPEND_IN_ORDER).values())
TRIGGER_NAMES = frozenset(GUARD_FORMS)


# the body of a record as SQLite builds it (records.body_bytes in SQL), so verify reads it
# ready-made: one printf per row is faster than eight concatenations. Bind BODY_FORMAT to the ?.
SQL_BODY = "CAST(printf(?, seq, ts, kind, source, reason, severity, who, ifnull(round, ''), data) AS BLOB)"
BODY_FORMAT = "\x1f".join(["%d", "%d"] + ["%s"] * 7)
RECORD_COLUMNS = "seq, ts, kind, source, reason, severity, who, round, data, prev, hash"
