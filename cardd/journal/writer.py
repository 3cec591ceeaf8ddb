"""Group commit: a journal writer commits its owner's batches in order, each in one transaction,
and owns the journal's writer thread, which takes the big ones (and any that come while it
syncs) so the owner's loop goes on meanwhile. docs/journal.md, "Group commit", says when."""
from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import JournalError
from .journal import Encoded, Journal

#: a batch of this many records or more is committed by the writer thread
THREAD_COMMIT_RECORDS = 16
#: the writer thread's name (its prefix: the executor numbers it)
THREAD_NAME = "journal-writer"

#: the owner's batch: handed back to it with the commit's outcome
_B = TypeVar("_B")


class JournalWriter(Generic[_B]):
    """Commits what its owner has waiting, at the end of a loop turn (:meth:`schedule`): ``take``
    closes the owner's open batch (None: nothing waits), ``encode`` fixes its text, then the
    outcome goes back on the loop, in commit order, to ``committed`` (with the seqs) or
    ``failed`` (nothing was written). One commit at a time: what comes while one is under way
    waits for it. Used on one asyncio loop; only the journal's append runs on the thread."""

    def __init__(self, journal: Journal, *, take: Callable[[], _B | None], encode: Callable[[_B], Encoded],
                 committed: Callable[[_B, list[int]], None], failed: Callable[[_B, JournalError], None],
                 thread_from: int = THREAD_COMMIT_RECORDS) -> None:
        self.journal = journal
        self._take, self._encode, self._committed, self._failed = take, encode, committed, failed
        self._thread_from = thread_from
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        #: the writer thread's commit under way: its future and its batch
        self._in_flight: tuple[concurrent.futures.Future[list[int]], _B] | None = None
        self._turn: asyncio.Handle | asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        """A commit is under way on the writer thread."""
        return self._in_flight is not None

    def schedule(self) -> None:
        """Commit what waits at the end of this loop turn (unless that is arranged already)."""
        if self._turn is None:
            self._turn = asyncio.get_running_loop().call_soon(self._scheduled)

    def retry_after(self, delay_s: float) -> None:
        """Commit what waits ``delay_s`` from now, instead of when arranged before (a failed commit's retry)."""
        self._cancel_turn()
        self._turn = asyncio.get_running_loop().call_later(delay_s, self._scheduled)

    def commit_now(self) -> list[int]:
        """Commit what waits now, on the caller's thread, and return its seqs; raises the
        journal's error after ``failed`` had it. Not while a thread commit is under way."""
        batch = self._take()
        return [] if batch is None else self._commit(batch, self._encoded(batch))

    async def write(self, commit: Callable[[], list[int]], batch: _B) -> None:
        """``commit`` (a write of the journal's own, returning the seqs it made) on the writer
        thread as one more commit in line: after the one under way, before what waits meanwhile;
        its outcome goes to ``committed`` or ``failed`` with ``batch`` like any commit's, and
        its error is raised here too."""
        while self._in_flight is not None:
            try:
                await asyncio.wrap_future(self._in_flight[0])
            except JournalError:
                pass  # that batch's own failure: ``failed`` had it
            await asyncio.sleep(0)  # its outcome is handed over on the loop (and may start the next commit)
        await asyncio.wrap_future(self._submit(commit, batch))

    def flush(self) -> None:
        """Commit everything waiting now, after the thread's commit under way (shutdown): when
        this returns, every outcome was handed over, in commit order, and the thread is gone."""
        if self._in_flight is not None:  # done here, starting no other thread commit
            future, batch = self._in_flight
            concurrent.futures.wait([future])
            self._in_flight = None
            try:
                self._committed(batch, future.result())
            except JournalError as exc:
                self._failed(batch, exc)  # its records back in front of what waits, written below
        self._cancel_turn()
        if self._thread is not None:
            self._thread.shutdown()
            self._thread = None
        try:
            while (waiting := self._take()) is not None:
                self._commit(waiting, self._encoded(waiting))
        finally:  # no retry of a failed one after this: the caller closes the journal
            self._cancel_turn()

    # ---- internals ------------------------------------------------------------------------

    def _scheduled(self) -> None:
        self._turn = None
        if self._in_flight is not None:
            return  # the commit under way takes what waits when it is done
        batch = self._take()
        if batch is None:
            return
        try:
            encoded = self._encoded(batch)  # on the loop: the owner's objects go on changing meanwhile
        except JournalError:
            return
        if len(encoded.entries) >= self._thread_from:
            self._submit(lambda: self.journal.append_encoded(encoded), batch)
            return
        try:
            self._commit(batch, encoded)
        except JournalError:
            pass  # ``failed`` had it

    def _encoded(self, batch: _B) -> Encoded:
        try:
            return self._encode(batch)
        except JournalError as exc:
            self._failed(batch, exc)
            raise

    def _commit(self, batch: _B, encoded: Encoded) -> list[int]:
        try:
            seqs = self.journal.append_encoded(encoded)
        except JournalError as exc:
            self._failed(batch, exc)
            raise
        self._committed(batch, seqs)
        return seqs

    def _submit(self, commit: Callable[[], list[int]], batch: _B) -> concurrent.futures.Future[list[int]]:
        """``commit`` on the writer thread, as the commit under way; :meth:`_thread_done` after it."""
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=THREAD_NAME)
        future = self._thread.submit(commit)
        self._in_flight = (future, batch)
        loop = asyncio.get_running_loop()
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._thread_done, future))
        return future

    def _thread_done(self, future: concurrent.futures.Future[list[int]]) -> None:
        if self._in_flight is None or self._in_flight[0] is not future:
            return  # flush() took care of it already
        _, batch = self._in_flight
        self._in_flight = None
        try:
            seqs = future.result()
        except JournalError as exc:
            self._failed(batch, exc)
            return
        self._committed(batch, seqs)
        waiting = self._take()  # came while the disk synced: a burst, however small this batch
        if waiting is None:
            return
        try:
            encoded = self._encoded(waiting)
        except JournalError:
            return
        self._submit(lambda: self.journal.append_encoded(encoded), waiting)

    def _cancel_turn(self) -> None:
        if self._turn is not None:
            self._turn.cancel()
            self._turn = None
