"""Two ``cardd --simulate`` started together on one --state-dir: the first holds the journal's
writer's lock from its check (before its devices' ptys go into the directory) until its journal is
open, so the second is refused there. The check once took the lock and let it go at once: both
passed it, and the second replaced the first's pty links."""
from __future__ import annotations

from pathlib import Path

import pytest

from cardd.daemon.simulation import Simulation
from cardd.journal import Journal, JournalBusy


@pytest.fixture(autouse=True)
def _no_leaks(no_leaks):
    yield


def test_a_second_simulation_on_the_directory_is_refused_while_the_first_starts(tmp_path: Path) -> None:
    first, second = Simulation(tmp_path), Simulation(tmp_path)
    config = first.start()
    try:
        with pytest.raises(JournalBusy):
            second.start()
        # the daemon opens the journal with the lock the check took: still held, by the journal now
        with Journal.open(config.journal.path, create=True, writer_lock=first.take_writer_lock()) as journal:
            assert journal.last_seq == 0
            with pytest.raises(JournalBusy):
                Journal.hold_writer_lock(config.journal.path)
    finally:
        second.stop()
        first.stop()
    Journal.hold_writer_lock(config.journal.path).release()  # all let go


def test_a_simulation_stopped_before_its_daemon_opened_the_journal_lets_the_lock_go(tmp_path: Path) -> None:
    first = Simulation(tmp_path)
    config = first.start()
    first.stop()
    Journal.hold_writer_lock(config.journal.path).release()
