"""The export chain's checks, as pure functions the archive runs on what it has stored
(docs/floor-service.md, "Chain checks").

Every record names the hash of the record before it (``prev``) and its own (``hash``, which the
floor recomputes: :func:`cardd.floor.contract.event_hash`). Records may come in any order (a
backlog, a resend, a second floor instance), so each link is checked from whichever side
arrives second: a record's ``prev`` against the stored record ``seq - 1``, and its ``hash``
against the stored ``prev`` of ``seq + 1``. The first record stored of a table is trusted as
it comes (its ``prev`` names a record the floor never saw): the chain is checked from there.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from cardd.floor.contract import CHAIN_START, Event, event_hash

#: every kind of chain problem: a floor alarm's cause
KINDS = ("break", "rewritten", "bad_hash", "anchor_mismatch", "session_backwards", "gap")


class ChainProblem(NamedTuple):
    """A floor alarm's cause, naming the table and the seq."""
    kind: str    # one of KINDS
    site: str
    table: str
    seq: int
    detail: str  # one sentence in our words

    def line(self) -> str:
        """``floor1/bj-07 seq 48: rewritten: ...``, as a log or a report shows it."""
        return f"{self.site}/{self.table} seq {self.seq}: {self.kind}: {self.detail}"


class Link(NamedTuple):
    """What the chain keeps of a stored record."""
    hash: str
    prev: str


@dataclass
class Verdict:
    """What :func:`check_records` made of a batch."""
    accepted: list[tuple[Event, str]] = field(default_factory=list)  # the record and its hash, in seq order
    duplicates: int = 0
    refused: list[tuple[Event, ChainProblem]] = field(default_factory=list)

    @property
    def problems(self) -> list[ChainProblem]:
        return [problem for _, problem in self.refused]


def neighbours(events: Iterable[Event]) -> set[int]:
    """The seqs whose stored links :func:`check_records` needs for ``events``: each one's own and
    those either side."""
    seqs: set[int] = set()
    for event in events:
        seqs.update((event.seq - 1, event.seq, event.seq + 1))
    seqs.discard(0)
    return seqs


def _short(digest: str) -> str:
    return digest[:12]


def check_records(site: str, table: str, events: Sequence[Event], stored: Mapping[int, Link]) -> Verdict:
    """Check ``events`` (one table's, any order) against the ``stored`` links around them (at
    least :func:`neighbours`) and against each other. A record is:

    - refused as ``bad_hash`` when its hash does not recompute from its content;
    - a duplicate (nothing to do) when its seq is stored with the same hash;
    - refused as ``rewritten`` when its seq is stored with another hash (the first one stays);
    - refused as ``break`` when its ``prev`` is not the stored hash of ``seq - 1``, when its hash
      is not the stored ``prev`` of ``seq + 1``, or when it is seq 1 and does not start the chain;
    - otherwise accepted (and a neighbour for the rest of the batch)."""
    known = dict(stored)
    verdict = Verdict()
    for event in sorted(events, key=lambda e: e.seq):
        seq = event.seq

        def refuse(kind: str, detail: str) -> None:
            verdict.refused.append((event, ChainProblem(kind, site, table, seq, detail)))

        digest = event_hash(event)
        if digest != event.hash:
            refuse("bad_hash", f"record {seq} carries hash {_short(event.hash)}… but its content hashes to "
                               f"{_short(digest)}…: refused")
            continue
        own = known.get(seq)
        if own is not None:
            if own.hash == digest:
                verdict.duplicates += 1
            else:
                refuse("rewritten", f"record {seq} came again with hash {_short(digest)}…, the archive holds it "
                                    f"with hash {_short(own.hash)}…: the first is kept, this one refused")
            continue
        before, after = known.get(seq - 1), known.get(seq + 1)
        if before is not None and before.hash != event.prev:
            refuse("break", f"record {seq} names {_short(event.prev)}… as the record before it, the archive's "
                            f"record {seq - 1} hashes to {_short(before.hash)}…: refused")
            continue
        if seq == 1 and event.prev != CHAIN_START:
            refuse("break", f"record 1 names {_short(event.prev)}… as the record before it, where the chain "
                            "starts: refused")
            continue
        if after is not None and after.prev != digest:
            refuse("break", f"record {seq} hashes to {_short(digest)}…, the archive's record {seq + 1} names "
                            f"{_short(after.prev)}… as the record before it: refused")
            continue
        known[seq] = Link(digest, event.prev)
        verdict.accepted.append((event, digest))
    return verdict


class Span(NamedTuple):
    """Where a table's stored chain stands: its lowest and highest stored seq (None, 0: none
    stored) and the missing ranges between them, each (first, last) inclusive, in order."""
    low: int | None
    head: int
    gaps: list[tuple[int, int]]


def extend(span: Span, seqs: Iterable[int]) -> Span:
    """``span`` with the newly stored ``seqs`` (none of them stored before): a seq past the head
    (or below the lowest) opens a gap up to it, a seq inside a gap shrinks or splits it."""
    low, head, gaps = span.low, span.head, list(span.gaps)
    for seq in sorted(seqs):
        if low is None:
            low = head = seq
        elif seq > head:
            if seq > head + 1:
                gaps.append((head + 1, seq - 1))
            head = seq
        elif seq < low:
            if seq < low - 1:
                gaps.insert(0, (seq + 1, low - 1))
            low = seq
        else:
            # (a seq in no gap is one the span did not know missing: nothing to change)
            for i, (first, last) in enumerate(gaps):
                if first <= seq <= last:
                    gaps[i:i + 1] = [g for g in ((first, seq - 1), (seq + 1, last)) if g[0] <= g[1]]
                    break
    return Span(low, head, gaps)


def check_anchor(site: str, table: str, seq: int, export_hash: str, stored: str | None) -> ChainProblem | None:
    """An anchor's ``export_hash`` against the stored record ``seq``'s hash: None when they agree
    or the record is not stored yet (the anchor then waits for it)."""
    if stored is None or stored == export_hash:
        return None
    return ChainProblem("anchor_mismatch", site, table, seq,
                        f"the anchor at record {seq} names export hash {_short(export_hash)}…, the archive's "
                        f"record {seq} hashes to {_short(stored)}…")


def check_session(site: str, table: str, last: int | None, session: int, head: int) -> ChainProblem | None:
    """A status's ``session`` against the last one seen: a table's connection counter only grows
    (it is kept in its journal), so a lower one is a journal restored or replaced, or another
    publisher. The problem names the table's head seq, where the archive stood."""
    if last is None or session >= last:
        return None
    return ChainProblem("session_backwards", site, table, head,
                        f"session {session} after session {last}: the table's connection counter went backwards")


def gap_problem(site: str, table: str, first: int, last: int) -> ChainProblem:
    """A gap that did not fill (the service decides when: after the table's backlog drained)."""
    what = f"record {first} is" if first == last else f"records {first}..{last} are"
    return ChainProblem("gap", site, table, first, f"{what} missing from the archive")
