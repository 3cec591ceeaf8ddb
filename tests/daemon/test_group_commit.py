"""Group commit in the daemon: a big batch goes to the journal writer thread, a failed commit
keeps its records in front of what came since, and every record is published once, in seq
order, only after its commit returned."""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from cardd.config import RULES_DIR
import cardd.daemon.tracker_service as tracker_service
from cardd.api.protocol import ApiEvent
from cardd.daemon.tracker_service import TableService
from cardd.journal import KIND_START, Encoded, Entry, Journal, JournalCorrupt, JournalWriteError
from cardd.journal.writer import THREAD_COMMIT_RECORDS
from core.errors import CarddError
from cardd.api.peer import Caller
from cardd.daemon.backend import DaemonBackend
from cardd.daemon.commands import command_table
from devices.game.rules import load_rules
from devices.events import Role
from devices.tracker.inputs import ClearAlarm, LinkDown, LinkUp
from tests.support.aio import run
from tests.support.poll import until
from tests.support.recorders import FakeClock

RULES = load_rules(RULES_DIR / "casino-000.toml")


def test_a_failed_thread_commit_is_written_again_in_order_and_published_once(tmp_path: Path, mocker: MockerFixture,
                                                                             monkeypatch) -> None:
    monkeypatch.setattr(tracker_service, "RETRY_AFTER_S", 0.01)

    async def main() -> None:
        journal = Journal.open(tmp_path / "journal.sqlite3", create=True)
        published: list[ApiEvent] = []
        service = TableService(RULES, journal, published.append, clock=FakeClock())
        first = service.restore(Entry(kind=KIND_START, reason="TEST_START", source="test", data={}))
        assert [e.seq for e in published] == [first]
        published.clear()
        threads: list[str] = []
        real = journal.append_encoded

        def fails_once(encoded: Encoded) -> list[int]:
            threads.append(threading.current_thread().name)
            if len(threads) == 1:
                raise JournalWriteError("disk full")  # the boundary: a write that failed, nothing written
            return real(encoded)

        mocker.patch.object(journal, "append_encoded", side_effect=fails_once)
        for _ in range(THREAD_COMMIT_RECORDS):  # one loop turn: a batch big enough for the thread
            service.apply(LinkUp("shoe-reader"))
            service.apply(LinkDown("shoe-reader"))
        await until(lambda: threads, what="the writer thread's first commit")
        assert not published  # that commit failed: nothing may be published
        service.apply(LinkUp("shoe-reader"))  # added while the failed batch waits for its retry
        await until(lambda: journal.last_seq > first and not service._batch.entries, what="the retry")
        service.flush()
        records = journal.query(seq_from=first + 1, limit=None)
        assert [e.seq for e in published] == [r.seq for r in records] == list(range(first + 1, journal.last_seq + 1))
        inputs = [r.data["type"] for r in records if r.kind == "input"]
        assert inputs == ["LinkUp", "LinkDown"] * THREAD_COMMIT_RECORDS + ["LinkUp"]  # the failed batch first
        assert threads[0].startswith("journal-writer")
        journal.close()

    run(main())


def test_what_came_while_the_writer_thread_synced_goes_to_the_thread_too(tmp_path: Path, mocker: MockerFixture) -> None:
    """A burst arrives a few records per loop turn: the batch that filled during a thread commit
    is committed by the thread as well, however small, so the loop never waits for that fsync;
    a lone input with no commit under way is still committed on the loop."""

    async def main() -> None:
        journal = Journal.open(tmp_path / "journal.sqlite3", create=True)
        service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
        service.restore(Entry(kind=KIND_START, reason="TEST_START", source="test", data={}))
        threads: list[str] = []
        syncing = threading.Event()
        real = journal.append_encoded

        def slow_disk(encoded: Encoded) -> list[int]:  # the boundary: a commit that takes its time
            threads.append(threading.current_thread().name)
            if len(threads) == 1:
                syncing.wait(10)
            return real(encoded)

        mocker.patch.object(journal, "append_encoded", side_effect=slow_disk)
        for _ in range(THREAD_COMMIT_RECORDS):
            service.apply(LinkUp("shoe-reader"))
            service.apply(LinkDown("shoe-reader"))
        await until(lambda: threads, what="the writer thread's commit")
        service.apply(LinkUp("shoe-reader"))  # one record, while the disk syncs
        syncing.set()
        await until(lambda: len(threads) == 2 and not service._batch.entries and not service.writer.busy,
                    what="the second commit")
        assert [name.split("_")[0] for name in threads] == ["journal-writer"] * 2
        service.apply(LinkDown("shoe-reader"))  # nothing under way now: committed on the loop
        await until(lambda: len(threads) == 3, what="the loop's commit")
        assert threads[2] == threading.current_thread().name
        service.flush()
        inputs = [r.data["type"] for r in journal.query(kind="input", limit=None)]
        assert inputs == ["LinkUp", "LinkDown"] * THREAD_COMMIT_RECORDS + ["LinkUp", "LinkDown"]
        journal.close()

    run(main())


def started_service(directory: Path) -> tuple[Journal, TableService, int]:
    """A service on a new journal, restored: (the journal, the service, its start record's seq)."""
    journal = Journal.open(directory / "journal.sqlite3", create=True)
    service = TableService(RULES, journal, lambda event: None, clock=FakeClock())
    return journal, service, service.restore(Entry(kind=KIND_START, reason="TEST_START", source="test", data={}))


def refused_by_a_full_disk() -> None:
    """A journal write of the journal's own (a prune) that the disk refused, nothing written: the
    boundary, as :meth:`Journal.prune` raises it."""
    raise JournalWriteError("journal x: prune failed, nothing written", "disk full: 0 bytes free in /x")


def test_a_failed_write_of_the_journals_own_opens_the_alarm_and_the_next_commit_resumes(
        tmp_path: Path, monkeypatch) -> None:
    """A prune or an export record that cannot be written (the disk full) is a failed write like a
    batch's: the JOURNAL_WRITE_FAILED alarm opens, and the open batch's next commit resumes the
    journal with a JOURNAL_WRITE_RESUMED record after it."""
    monkeypatch.setattr(tracker_service, "RETRY_AFTER_S", 0.01)

    async def main() -> None:
        journal, service, first = started_service(tmp_path)
        try:
            await service.journal_write(refused_by_a_full_disk)
        except JournalWriteError:
            pass
        assert service.write_failure == "disk full: 0 bytes free in /x"
        assert [a.reason for a in service.table.alarms.open.values()] == ["JOURNAL_WRITE_FAILED"]
        service.apply(LinkUp("shoe-reader"))
        await until(lambda: service.write_failure is None and journal.last_seq > first + 2, what="the resume")
        service.flush()
        reasons = [r.reason or r.data.get("type") for r in journal.query(seq_from=first + 1, limit=None)]
        assert reasons[0] == "JOURNAL_WRITE_FAILED" and reasons[-1] == "JOURNAL_WRITE_RESUMED" and "LinkUp" in reasons
        journal.close()

    run(main())


def test_a_journal_that_fails_and_resumes_again_and_again_keeps_one_alarm_open(tmp_path: Path, monkeypatch) -> None:
    """A nearly full disk: commits fail, one succeeds (a checkpoint freed WAL space), fail again.
    One JOURNAL_WRITE_FAILED alarm stays open (a supervisor clears it once); each episode ends in
    its own JOURNAL_WRITE_RESUMED record."""
    monkeypatch.setattr(tracker_service, "RETRY_AFTER_S", 0.01)

    async def main() -> None:
        journal, service, first = started_service(tmp_path)
        for episode in range(3):
            try:
                await service.journal_write(refused_by_a_full_disk)
            except JournalWriteError:
                pass
            assert [a.reason for a in service.table.alarms.open.values()] == ["JOURNAL_WRITE_FAILED"], episode
            service.apply(LinkUp("shoe-reader") if episode % 2 == 0 else LinkDown("shoe-reader"))
            await until(lambda: service.write_failure is None, what="the resume")
        service.flush()
        reasons = [r.reason for r in journal.query(seq_from=first + 1, limit=None)]
        assert reasons.count("JOURNAL_WRITE_FAILED") == 1 and reasons.count("JOURNAL_WRITE_RESUMED") == 3, reasons
        journal.close()

    run(main())


def test_an_entry_the_journal_refuses_is_journaled_made_storable_and_holds_nothing_back(tmp_path: Path) -> None:
    """A text with a control character that slipped past the API's checks (the journal's hash uses
    0x1F as its separator) would fail its batch's commit, and every retry, holding every later card
    and command back for good. It is journaled made storable, with why, and the rest goes on."""

    async def main() -> None:
        journal, service, first = started_service(tmp_path)
        at = service.journal_command("dealer_change", {"note": "x"}, "dana\x1fevil", 1001)
        answer = service.commit_of(at)
        service.apply(LinkUp("shoe-reader"))
        seq = await answer
        service.apply(LinkDown("shoe-reader"))
        await until(lambda: journal.last_seq > seq + 1, what="the next commit")
        assert service.write_failure is None and not service.table.alarms.open
        service.flush()
        records = journal.query(seq_from=first + 1, limit=None)
        repaired = next(r for r in records if r.seq == seq)
        assert repaired.who == "dana\\x1fevil" and repaired.data["note"] == "x"
        assert "entry who 'dana\\x1fevil'" in repaired.data["journal_repaired"]
        assert "control characters" in repaired.data["journal_repaired"]
        types = [r.data.get("type") for r in records]
        assert types.index("LinkUp") < types.index("LinkDown")
        assert journal.verify().ok
        journal.close()

    run(main())


@pytest.mark.parametrize("entry", [
    Entry(kind="command", reason="X\x00", source="api", who="a" * 300, data={"n": 1}),
    Entry(kind="export", reason="R", data={"bad": {1, 2}}, severity="loud", ts_ns=-5),
])
def test_storable_keeps_what_an_entry_says_in_a_form_the_journal_takes(tmp_path: Path, entry: Entry) -> None:
    storable = entry.storable("why")
    storable.check()
    with Journal.open(tmp_path / "journal.sqlite3", create=True) as journal:
        [seq] = journal.append([storable])
        [record] = journal.query(seq_from=seq, limit=None)
    assert record.data["journal_repaired"] == "why"
    assert record.reason.startswith(entry.reason[:1]) and len(record.who) <= 256


def test_the_alarm_cleared_while_the_journal_still_cannot_write_opens_again(tmp_path: Path, monkeypatch) -> None:
    """A supervisor who clears JOURNAL_WRITE_FAILED while the disk is still full has not made it
    writable: the next failed retry opens the alarm again, so STATE never hides the failure."""
    monkeypatch.setattr(tracker_service, "RETRY_AFTER_S", 0.01)

    async def main() -> None:
        journal, service, first = started_service(tmp_path)
        full = {"yes": True}
        real_append = journal.append_encoded

        def append_encoded(encoded: Encoded) -> list[int]:  # the boundary: the disk refuses while full
            if full["yes"]:
                raise JournalWriteError("journal x: append failed, nothing written", "disk full: 0 bytes free in /x")
            return real_append(encoded)

        monkeypatch.setattr(journal, "append_encoded", append_encoded)
        service.apply(LinkUp("shoe-reader"))
        await until(lambda: bool(service.table.alarms.open), what="the alarm")
        [alarm_id] = service.table.alarms.open
        service.apply(ClearAlarm(alarm_id=alarm_id, who="sam", role=Role.SUPERVISOR))
        assert not service.table.alarms.open
        await until(lambda: bool(service.table.alarms.open), what="the alarm again")
        assert [a.reason for a in service.table.alarms.open.values()] == ["JOURNAL_WRITE_FAILED"]
        full["yes"] = False
        await until(lambda: service.write_failure is None, what="the resume")
        service.flush()
        reasons = [r.reason for r in journal.query(seq_from=first + 1, limit=None)]
        assert reasons.count("JOURNAL_WRITE_FAILED") == 2 and "ALARM_CLEARED" in reasons, reasons
        assert reasons.index("ALARM_CLEARED") < len(reasons) - 1 - reasons[::-1].index("JOURNAL_WRITE_FAILED")
        journal.close()

    run(main())


def test_flush_publishes_everything_journaled_in_seq_order_with_a_thread_commit_under_way(tmp_path: Path) -> None:
    """Shutdown's flush with the writer thread's commit under way and more records behind it: every
    record is published by the time flush returns, none left in a thread commit written but unpublished."""

    async def main() -> None:
        journal = Journal.open(tmp_path / "journal.sqlite3", create=True)
        published: list[int] = []
        service = TableService(RULES, journal, lambda event: published.append(event.seq), clock=FakeClock())
        service.restore(Entry(kind=KIND_START, reason="TEST_START", source="test", data={}))
        published.clear()
        for n in range(THREAD_COMMIT_RECORDS + 4):
            service.add(Entry(kind="note", reason="BURST", data={"n": n}, ts_ns=time.time_ns()))
        await asyncio.sleep(0)  # the group commit's turn: a burst, to the writer thread
        assert service.writer.busy
        for n in range(3):
            service.add(Entry(kind="note", reason="BEHIND", data={"n": n}, ts_ns=time.time_ns()))
        service.flush()
        journaled = [r.seq for reason in ("BURST", "BEHIND") for r in journal.query(reason=reason, limit=None)]
        assert published == sorted(journaled) and len(journaled) == THREAD_COMMIT_RECORDS + 7
        journal.close()

    run(main())


async def refused_while_the_disk_is_full(directory: Path, mocker: MockerFixture,
                                         refuse: Callable[[TableService], Awaitable[None]]) -> list[str]:
    """``refuse`` run on a service whose journal's commits fail (the disk full: the boundary), then
    the disk freed: the reasons journaled after the start, once writing resumed."""
    journal, service, first = started_service(directory)
    real_append = journal.append_encoded
    mocker.patch.object(journal, "append_encoded", side_effect=JournalWriteError(
        "journal x: append failed, nothing written", "disk full: 0 bytes free in /x"))
    await refuse(service)
    assert service.write_failure == "disk full: 0 bytes free in /x"
    mocker.patch.object(journal, "append_encoded", side_effect=real_append)
    await until(lambda: service.write_failure is None, what="the resume")
    service.flush()
    reasons = [r.reason for r in journal.query(seq_from=first + 1, limit=None)]
    journal.close()
    return reasons


def test_a_command_refused_while_the_journal_cannot_write_is_told_its_refusal(
        tmp_path: Path, monkeypatch, mocker: MockerFixture) -> None:
    """A command the table refuses changed nothing: while commits fail its caller must hear the
    refusal, not "not journaled yet ... it is kept" (which says it was applied: do not send it
    again). Its refusal record is kept and journaled with the rest."""
    monkeypatch.setattr(tracker_service, "RETRY_AFTER_S", 0.01)

    async def refuse(service: TableService) -> None:
        with pytest.raises(CarddError) as refused:
            await service.command(ClearAlarm(alarm_id=999, who="sam", role=Role.SUPERVISOR), "sam", 1001,
                                  "clear_alarm")
        assert not isinstance(refused.value, JournalWriteError), str(refused.value)

    assert "COMMAND_REFUSED" in run(refused_while_the_disk_is_full(tmp_path, mocker, refuse))


def test_a_command_refused_for_its_role_while_the_journal_cannot_write_returns_to_be_refused(
        tmp_path: Path, monkeypatch, mocker: MockerFixture) -> None:
    """The API's role refusal waits on its refusal record's commit, then answers REFUSED: while
    commits fail that wait must not raise "not journaled yet ... it is kept" instead (which says
    the command was applied)."""
    monkeypatch.setattr(tracker_service, "RETRY_AFTER_S", 0.01)

    async def refuse(service: TableService) -> None:
        backend = DaemonBackend(service, command_table(simulated=False), dict, {})
        caller = Caller(pid=1, uid=1001, gid=1001, user="dana", groups=frozenset(), roles=frozenset({Role.DEALER}))
        await backend.command_refused("clear_alarm", {"alarm_id": 1}, caller, frozenset({Role.SUPERVISOR}))

    assert "COMMAND_REFUSED" in run(refused_while_the_disk_is_full(tmp_path, mocker, refuse))


def test_a_journal_write_of_its_own_failing_for_damage_opens_no_write_alarm(tmp_path: Path) -> None:
    """A prune that reads a damaged page fails for its caller (the retention task logs it); it says
    nothing of whether the journal can be written: no JOURNAL_WRITE_FAILED, rounds still open."""

    async def main() -> None:
        journal, service, first = started_service(tmp_path)

        def damaged() -> None:  # the boundary: what Journal.prune raises on a damaged page
            raise JournalCorrupt(journal.path, 3, "damaged SQLite file while pruning")

        with pytest.raises(JournalCorrupt):
            await service.journal_write(damaged)
        assert service.write_failure is None and not service.table.alarms.open
        service.apply(LinkUp("shoe-reader"))
        await until(lambda: journal.last_seq > first, what="the next commit")
        service.flush()
        reasons = [r.reason for r in journal.query(seq_from=first + 1, limit=None)]
        assert not [r for r in reasons if r.startswith("JOURNAL_WRITE")], reasons
        journal.close()

    run(main())
