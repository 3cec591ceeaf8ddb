"""The journal writer's group commit on a real journal: what one loop turn adds is one commit, a
big batch goes to the writer thread, what waits behind it follows it there, and every outcome
comes back on the loop in commit order."""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from cardd.journal import Encoded, Entry, Journal
from cardd.journal.writer import THREAD_COMMIT_RECORDS, THREAD_NAME, JournalWriter
from tests.support.aio import run


class Owner:
    """A writer's owner: its open batch, and what came back (batch, seqs, the thread that heard it)."""

    def __init__(self, journal: Journal) -> None:
        self.open: list[Entry] = []
        self.outcomes: list[tuple[list[Entry], list[int], str]] = []
        self.committing: list[str] = []  # the thread of each append
        real = journal.append_encoded

        def append_encoded(encoded: Encoded) -> list[int]:
            self.committing.append(threading.current_thread().name)
            return real(encoded)

        journal.append_encoded = append_encoded  # type: ignore[method-assign]
        self.writer: JournalWriter[list[Entry]] = JournalWriter(
            journal, take=self.take, encode=lambda batch: journal.encode(batch), committed=self.committed,
            failed=lambda batch, exc: self.outcomes.append((batch, [], repr(exc))))

    def add(self, count: int) -> None:
        self.open += [Entry(kind="note", reason="N", data={"n": n}, ts_ns=time.time_ns()) for n in range(count)]
        self.writer.schedule()

    def take(self) -> list[Entry] | None:
        batch, self.open = self.open, []
        return batch or None

    def committed(self, batch: list[Entry], seqs: list[int]) -> None:
        self.outcomes.append((batch, seqs, threading.current_thread().name))


def test_a_loop_turn_is_one_commit_on_the_loop_or_on_the_writer_thread(tmp_path: Path) -> None:
    async def main() -> None:
        with Journal.open(tmp_path / "journal.sqlite3", create=True) as journal:
            owner = Owner(journal)
            owner.add(2)
            owner.add(1)  # the same loop turn: the same commit
            await asyncio.sleep(0)
            assert owner.committing == [threading.current_thread().name]
            assert [seqs for _, seqs, _ in owner.outcomes] == [[1, 2, 3]]
            owner.add(THREAD_COMMIT_RECORDS)
            await asyncio.sleep(0)
            assert owner.writer.busy
            owner.add(1)  # waits for the thread's commit, then follows it there
            while owner.writer.busy:
                await asyncio.sleep(0.001)
            assert [name.split("_")[0] for name in owner.committing[1:]] == [THREAD_NAME, THREAD_NAME]
            assert [seqs[-1] for _, seqs, _ in owner.outcomes] == [3, 3 + THREAD_COMMIT_RECORDS, 4 + THREAD_COMMIT_RECORDS]
            assert {heard for _, _, heard in owner.outcomes} == {threading.current_thread().name}
            owner.writer.flush()

    run(main())


def test_flush_hands_over_the_thread_commit_under_way_then_commits_what_waits(tmp_path: Path) -> None:
    async def main() -> None:
        with Journal.open(tmp_path / "journal.sqlite3", create=True) as journal:
            owner = Owner(journal)
            owner.add(THREAD_COMMIT_RECORDS)
            await asyncio.sleep(0)
            assert owner.writer.busy
            owner.add(2)
            owner.writer.flush()
            assert not owner.writer.busy
            assert [len(seqs) for _, seqs, _ in owner.outcomes] == [THREAD_COMMIT_RECORDS, 2]
            assert journal.last_seq == THREAD_COMMIT_RECORDS + 2

    run(main())
