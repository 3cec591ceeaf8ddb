"""A journal checked against the anchors it published: the chain hash at some seq, as the floor
export's ``cardd/v1/<site>/<table>/anchor`` topic carried it (docs/floor.md) and a subscriber
kept it. The chain has no key, so someone with the file can edit a record and recompute every
hash after it, the head and its head file too, and a plain verify passes; an anchor kept off the
table is what such a rewrite cannot reproduce. docs/journal.md, "Anchors kept elsewhere".

    anchors = read_anchors(Path("anchors.jsonl"))          # AnchorsFileError: one line, its number
    site, table, mine = select_table(anchors, None)       # MixedTables when more than one
    result = check_anchors(journal_or_path, mine)         # the chain verified first, then each anchor
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Sequence

import msgspec

from core.errors import CarddError
from core.schema_errors import ProblemKind, schema_problem

from .integrity import VerifyResult
from .journal import Journal

SCHEMA = "cardd.floor/1"
#: a site or a table id (docs/floor.md): no MQTT wildcard or separator character
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
#: how many hex digits of a hash a line shows
SHORT_HASH = 6

Id = Annotated[str, msgspec.Meta(pattern=ID_PATTERN)]


class AnchorPayload(msgspec.Struct, frozen=True):
    """The anchor topic's payload: the chain hash of record ``seq`` and that record's time."""
    schema: Literal["cardd.floor/1"]
    site: Id
    table: Id
    seq: Annotated[int, msgspec.Meta(ge=1)]
    hash: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-fA-F]{64}$")]
    time: Annotated[str, msgspec.Meta(max_length=64)]


class AnchorMessage(msgspec.Struct, frozen=True):
    """A line as a subscriber that keeps the topic too writes it."""
    topic: str
    payload: AnchorPayload


#: our words for a field's form, where the pattern msgspec names says little to a person
_FORMS = {"hash": "64 hex digits (the record's chain hash)",
          "site": "a site id (1 to 64 letters, digits, '_' or '-')",
          "table": "a table id (1 to 64 letters, digits, '_' or '-')"}


class AnchorsFileError(CarddError):
    """An anchors file that cannot be read or used; the text names the file (and the line)."""


class MixedTables(AnchorsFileError):
    """Anchors of more than one table in one file, and none chosen: ``tables`` are (site, table)."""

    def __init__(self, message: str, tables: Sequence[tuple[str, str]]) -> None:
        super().__init__(message)
        self.tables = tuple(tables)


@dataclass(frozen=True, slots=True)
class Anchor:
    """One anchor read from a file, from its ``line``."""
    site: str
    table: str
    seq: int
    hash: bytes
    time: str
    line: int


def read_anchors(path: Path) -> list[Anchor]:
    """Every anchor of the file at ``path`` (JSON lines; blank lines ignored), in file order, read
    a line at a time (a year of anchors is half a million lines)."""
    try:
        with open(path, "rb") as file:
            return parse_anchors(file, str(path))
    except FileNotFoundError:
        raise AnchorsFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AnchorsFileError(f"{path}: a directory, not an anchors file") from None
    except OSError as exc:
        raise AnchorsFileError(f"{path}: cannot be read ({exc.strerror})") from None


def parse_anchors(lines: Iterable[bytes], name: str) -> list[Anchor]:
    """The anchors of ``lines`` (the file named ``name``); the first line that is not one is
    :class:`AnchorsFileError` naming its number."""
    return [_parse_line(line, number, name) for number, line in enumerate(lines, 1) if line.strip()]


def _parse_line(line: bytes, number: int, name: str) -> Anchor:
    where = f"{name}, line {number}"
    try:
        value: Any = msgspec.json.decode(line)
    except msgspec.DecodeError:
        raise AnchorsFileError(f"{where}: not a JSON document (an anchor payload, or an object with "
                               "\"topic\" and \"payload\", one a line)") from None
    schema: type = AnchorMessage if isinstance(value, dict) and "payload" in value else AnchorPayload
    try:
        read: AnchorMessage | AnchorPayload = msgspec.convert(value, schema)
    except msgspec.ValidationError as exc:
        problem = schema_problem(exc, schema=schema, data=value)
        field = problem.path[-1] if problem.path else None
        if problem.kind is ProblemKind.OUT_OF_RANGE and isinstance(field, str) and field in _FORMS:
            said = f"{problem.where()}: expected {_FORMS[field]}"
        else:
            said = problem.sentence()
        raise AnchorsFileError(f"{where}: not an anchor: {said}") from None
    payload = read.payload if isinstance(read, AnchorMessage) else read
    return Anchor(payload.site, payload.table, payload.seq, bytes.fromhex(payload.hash), payload.time, number)


def parse_table(text: str) -> tuple[str, str]:
    """``SITE/TABLE`` as (site, table); ValueError saying the form otherwise."""
    site, slash, table = text.partition("/")
    if not slash or not all(re.fullmatch(ID_PATTERN, part) for part in (site, table)):
        raise ValueError(f"{text!r}: expected SITE/TABLE, each 1 to 64 letters, digits, '_' or '-' "
                         "(as in the topic cardd/v1/SITE/TABLE/anchor)")
    return site, table


def select_table(anchors: Sequence[Anchor], wanted: tuple[str, str] | None,
                 name: str = "the anchors file") -> tuple[str, str, list[Anchor]]:
    """The table the anchors are of, and its anchors: ``wanted``'s, or the only one's.
    :class:`MixedTables` when the file holds more than one and none is wanted."""
    tables = sorted({(a.site, a.table) for a in anchors})
    if not tables:
        raise AnchorsFileError(f"{name} holds no anchors: nothing to check the journal against")
    if wanted is None:
        if len(tables) > 1:
            raise MixedTables(f"{name} holds the anchors of {len(tables)} tables ({_tables(tables)}): "
                              "a journal is one table's", tables)
        wanted = tables[0]
    elif wanted not in tables:
        raise AnchorsFileError(f"{name} holds no anchors of {'/'.join(wanted)} (it holds {_tables(tables)})")
    return wanted[0], wanted[1], [a for a in anchors if (a.site, a.table) == wanted]


def _tables(tables: Sequence[tuple[str, str]]) -> str:
    shown = [f"{site}/{table}" for site, table in tables[:5]]
    return ", ".join(shown) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")


def short(digest: bytes) -> str:
    return digest.hex()[:SHORT_HASH] + "…"


MismatchKind = Literal["differs", "beyond_head", "conflict"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """An anchor the journal does not reproduce: its record hashes otherwise (``differs``), the
    journal ends before it (``beyond_head``), or the file holds another hash for its seq too
    (``conflict``, where the journal's is ``journal_hash`` when it could be read)."""
    kind: MismatchKind
    seq: int
    time: str
    line: int
    anchor_hash: bytes
    journal_hash: bytes | None
    head_seq: int
    other_hashes: tuple[bytes, ...] = ()

    def why(self) -> str:
        """What is wrong, in a few words after ``anchor seq N (time)``."""
        if self.kind == "beyond_head":
            return (f"the journal ends at seq {self.head_seq}, before it (records were removed from its end, or "
                    "it was replaced by an older copy)")
        if self.kind == "conflict":
            hashes = ", ".join(short(h) for h in (self.anchor_hash, *self.other_hashes))
            journal = "" if self.journal_hash is None else f"; the journal's record {self.seq} hashes " \
                                                          f"{short(self.journal_hash)}"
            return f"the anchors file holds {1 + len(self.other_hashes)} hashes for it ({hashes}){journal}"
        assert self.journal_hash is not None
        return f"the journal's record {self.seq} hashes {short(self.journal_hash)}, the anchor says " \
               f"{short(self.anchor_hash)}"

    def to_json_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "seq": self.seq, "time": self.time, "line": self.line,
                "anchor_hash": self.anchor_hash.hex(),
                "journal_hash": None if self.journal_hash is None else self.journal_hash.hex(),
                "other_hashes": [h.hex() for h in self.other_hashes], "why": self.why()}


@dataclass(frozen=True, slots=True)
class AnchorResult:
    """The chain's verify, then the anchors: ``checked`` compared with the journal (``matched``
    of them reproduced), ``not_checkable`` from before the pruned start, ``mismatched`` seqs the
    journal does not reproduce, the first of them (in seq order) and the journal's ends."""
    verify: VerifyResult
    checked: int = 0
    matched: int = 0
    not_checkable: int = 0
    mismatched: int = 0
    first_mismatch: Mismatch | None = None
    pruned_through: int = 0
    head_seq: int = 0

    @property
    def ok(self) -> bool:
        return self.verify.ok and self.mismatched == 0

    def line(self) -> str:
        """The outcome in one line: ``anchors: 412 checked, ...``."""
        said = [f"anchors: {self.checked} checked"]
        if self.not_checkable:
            said.append(f"{self.not_checkable} before the pruned start (seq {self.pruned_through}; not checkable)")
        if self.first_mismatch is None:
            said.append("every one reproduced by the journal" if self.checked else "none left to compare")
        else:
            first = self.first_mismatch
            more = f"{self.mismatched} not reproduced, first" if self.mismatched > 1 else "not reproduced"
            said.append(f"{more}: anchor seq {first.seq} ({first.time}): {first.why()}")
        return ", ".join(said)

    def to_json_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "matched": self.matched, "not_checkable": self.not_checkable,
                "mismatched": self.mismatched,
                "first_mismatch": None if self.first_mismatch is None else self.first_mismatch.to_json_dict(),
                "pruned_through": self.pruned_through, "head_seq": self.head_seq}


def check_anchors(journal: Journal | Path, anchors: Sequence[Anchor]) -> AnchorResult:
    """Verify the journal's chain (:meth:`Journal.verify`, the whole walk), then each anchor in seq
    order: the record at its seq must be there with that hash. An anchor at or after the head
    the journal has not (yet) written is a mismatch: the journal ends before a record it
    published; one before the prune anchor cannot be checked (its record is gone), one at it is
    checked against the hash the journal keeps of it. Two hashes for one seq in the file are a
    mismatch of their own. A path is opened read-only (:class:`JournalCorrupt` when the check on
    open refuses it, as for a verify)."""
    if isinstance(journal, Path):
        with Journal.open(journal, readonly=True) as opened:
            return check_anchors(opened, anchors)
    verified = journal.verify()
    if not verified.ok:
        return AnchorResult(verified)
    by_seq: dict[int, list[Anchor]] = {}
    for anchor in sorted(anchors, key=lambda a: (a.seq, a.line)):
        same = by_seq.setdefault(anchor.seq, [])
        if all(kept.hash != anchor.hash for kept in same):  # the same anchor twice is one
            same.append(anchor)
    found = journal.chain_hashes(by_seq)
    checked = matched = not_checkable = mismatched = 0
    first: Mismatch | None = None
    for seq, kept in by_seq.items():
        stored: bytes | None = None
        if seq < found.anchor_seq:  # its record is pruned: nothing to compare it with
            not_checkable += len(kept)
        else:
            stored = found.anchor_hash if seq == found.anchor_seq else found.hashes.get(seq)
            checked += len(kept)
            matched += sum(1 for a in kept if a.hash == stored)
        mismatch = _mismatch(kept, stored, found.head_seq) if seq >= found.anchor_seq or len(kept) > 1 else None
        if mismatch is not None:
            mismatched += 1
            first = first or mismatch
    return AnchorResult(verified, checked, matched, not_checkable, mismatched, first, found.anchor_seq,
                        found.head_seq)


def _mismatch(kept: list[Anchor], stored: bytes | None, head_seq: int) -> Mismatch | None:
    """What is wrong with the anchors of one seq (one, or several hashes), or None."""
    anchor = kept[0]
    if len(kept) > 1:  # the journal's hash (when it has the record) first: the ones it does not reproduce after
        ordered = sorted(kept, key=lambda a: (a.hash != stored, a.line))
        return Mismatch("conflict", anchor.seq, ordered[0].time, ordered[0].line, ordered[0].hash, stored, head_seq,
                        tuple(a.hash for a in ordered[1:]))
    if stored is None:
        return Mismatch("beyond_head", anchor.seq, anchor.time, anchor.line, anchor.hash, None, head_seq)
    if stored != anchor.hash:
        return Mismatch("differs", anchor.seq, anchor.time, anchor.line, anchor.hash, stored, head_seq)
    return None
