"""The disk holding the journal fills up under a running daemon, then has room again: nothing is
lost and everyone is told. A real full disk: the journal on a 2 MiB tmpfs in a mount namespace of
its own (tests/support/full_disk.py), the daemon run inside it, a filler file written from outside.

While the journal cannot be written: the JOURNAL_WRITE_FAILED alarm is in STATE at once, STATUS=
starts with JOURNAL CANNOT WRITE and the cause, ``journal_commit_failed`` is logged once (not once
per retry), a command gets one line saying it is not journaled yet but kept, and no round opens.
Once there is room: every card and command is journaled in order, the chain verifies, and a
JOURNAL_WRITE_RESUMED record says how long it failed and how many records waited. A daemon started
on the full disk exits with one line saying so (not that its journal is corrupt)."""
from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cardd.journal import Journal
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.daemon.daemon_rig import CARDD, Client, Daemon, journaled_reads, wait_until, write_config
from tests.support.full_disk import PrivateTmpfs

FREE = r"disk full: \d+ bytes free in {disk}"


#: journald's default LineMax: a longer log line reaches the journal split into pieces
JOURNALD_LINE_MAX = 48 * 1024
#: open_round's refusal while the journal's disk is full (a regular expression; ``free``: the cause)
REFUSED_OPEN = (r"open_round refused: the journal cannot write \({free}\): no round opens until a technician frees "
                r"space on its disk")


def journal_alarms(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in state["alarms"] if a["reason"] == "JOURNAL_WRITE_FAILED"]


class Statuses:
    """What the daemon says to systemd in STATUS=, from a socket standing in for systemd's."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.said: list[str] = []

    def latest(self) -> str:
        """The last STATUS= sent so far ("" before the first)."""
        while True:
            try:
                datagram = self.listener.recv(4096).decode()
            except BlockingIOError:
                return self.said[-1] if self.said else ""
            self.said += [line.removeprefix("STATUS=") for line in datagram.splitlines() if line.startswith("STATUS=")]


@pytest.mark.timeout(180)
def test_a_full_disk_holds_the_journal_back_loses_nothing_and_says_so(directory: Path) -> None:
    disk_dir = directory / "disk"
    disk_dir.mkdir()
    journal_path = disk_dir / "journal.sqlite3"
    free = FREE.format(disk=re.escape(str(disk_dir)))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener, PrivateTmpfs(disk_dir) as disk, \
            PtyEndpoint(SimulatedShoe()) as shoe:
        listener.bind(str(directory / "notify.sock"))
        listener.setblocking(False)
        status = Statuses(listener)
        shoe.call(shoe.device.load, full_shoe(6))
        config = write_config(directory, shoe.url, None, journal={"path": str(journal_path)})
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock", prefix=disk.enter,
                        env={"NOTIFY_SOCKET": str(directory / "notify.sock")})
        client = daemon.client()
        wait_until(lambda: shoe.state()["events_confirmed"] == shoe.state()["event_index"] == 1, "ShoeLoaded journaled")

        wal = disk.outside / f"{journal_path.name}-wal"
        disk.fill()
        # a burst of cards: more than the WAL's room (SQLite writes over a WAL it has checkpointed,
        # which needs no more disk), so their commit cannot be written
        dealt = 200
        shoe.call(shoe.device.deal, dealt)
        state = client.wait_state(lambda s: bool(journal_alarms(s)) and s["shoe"]["cards_out"] == dealt)
        seq_at_failure, confirmed_at_failure = state["seq"], shoe.state()["events_confirmed"]
        [alarm] = journal_alarms(state)
        assert alarm["source"] == "journal"
        assert re.fullmatch(rf"the journal cannot be written \({free}\): its records are kept and written again "
                            r"every 1 s; no new round opens until it can", alarm["message"]), alarm

        # cards go on leaving the shoe: the table follows them, the journal keeps them
        shoe.call(shoe.device.deal, 5)
        dealt += 5
        client.wait_state(lambda s: s["shoe"]["cards_out"] == dealt)
        error = client.command("dealer_change")
        assert error["class"] == "ERROR" and error["code"] == "failed", error
        assert re.fullmatch(rf"not journaled yet: {free}; it is kept and written again every 1 s",
                            error["message"]), error
        refused = client.command("open_round")
        assert refused["class"] == "ERROR", refused
        assert re.fullmatch(REFUSED_OPEN.format(free=free), refused["message"]), \
            refused
        wait_until(lambda: status.latest().startswith("JOURNAL CANNOT WRITE"), "STATUS= says the journal cannot write")
        assert re.match(rf"JOURNAL CANNOT WRITE \({free}\); shoe ", status.latest()), status.latest()
        time.sleep(3.5)  # a few retries, one a second
        state = client.state()
        assert state["seq"] == seq_at_failure and shoe.state()["events_confirmed"] == confirmed_at_failure
        assert len(daemon.log_lines("journal_commit_failed")) == 1  # not once per retry

        disk.free()
        wait_until(lambda: shoe.state()["events_confirmed"] == dealt + 1, "every card journaled and confirmed")
        state = client.wait_state(lambda s: s["seq"] > seq_at_failure)
        assert journal_alarms(state) == [alarm]  # open until a supervisor clears it
        wait_until(lambda: bool(daemon.log_lines("journal_commit_resumed")), "the log says writing resumed")
        wait_until(lambda: status.latest().startswith("shoe "), "STATUS= back to the table alone")
        client.ok("clear_alarm", alarm_id=alarm["id"])
        verified = client.command("verify_journal")
        assert verified["class"] == "ACK", verified
        client.close()
        code, err = daemon.stop()
        assert code == 0, err

        [failed] = daemon.log_lines("journal_commit_failed")
        assert failed["level"] == "error" and re.search(free, failed["error"]), failed
        [resumed_line] = daemon.log_lines("journal_commit_resumed")
        retries = resumed_line["retries"]
        assert retries >= 2
        [summary] = [line for line in daemon.log_lines("log_rate_limited") if line["line"] == "journal_commit_failed"]
        assert summary["suppressed"] == retries  # every retry after the first, counted, not written

        # SQLite would resolve /proc/PID/root to this namespace's path: read a copy
        copy = directory / "copy.sqlite3"
        shutil.copyfile(disk.outside / journal_path.name, copy)
        assert not (disk.outside / f"{journal_path.name}-wal").exists()  # a clean stop left it whole

        # a daemon started on the full disk says so in one line (systemd restarts it)
        disk.fill()
        start = subprocess.run([*disk.enter, str(CARDD), "--config", str(config)], capture_output=True, text=True,
                               timeout=60)
        assert start.returncode == 1, start.stderr  # EXIT_STARTUP
        last = start.stderr.strip().splitlines()[-1]
        assert re.fullmatch(rf"cardd: journal {re.escape(str(journal_path))}: the disk holding it is full \(\d+ bytes "
                            rf"free in {re.escape(str(disk_dir))}; SQLite SQLITE_\w+: [^;()]+\): free space there; the "
                            r"journal is not damaged", last), start.stderr

    with Journal.open(copy, readonly=True) as journal:
        assert journal.verify().ok
        assert journaled_reads(journal) == list(range(1, dealt + 1))  # no card lost, none twice
        records = journal.query(seq_from=seq_at_failure + 1, limit=None)
    reasons = [r.reason for r in records]
    failed_record = records[reasons.index("JOURNAL_WRITE_FAILED")]
    resumed = records[reasons.index("JOURNAL_WRITE_RESUMED")]
    assert (failed_record.severity, failed_record.source, failed_record.data["message"]) == (
        "alarm", "journal", alarm["message"])
    assert (resumed.severity, resumed.source) == ("info", "journal")
    waited = [r for r in records if r.seq < resumed.seq]
    assert resumed.data["records"] == len(waited) and resumed.data["retries"] == retries
    assert resumed.data["failed_for_s"] >= 3
    assert re.fullmatch(rf"the journal is written again after [\d.]+ s of failed commits \({free}\): "
                        rf"{len(waited)} record\(s\) had waited", resumed.data["message"]), resumed.data["message"]
    # what came while it failed is there, in the order it came: the cards, the command, the refusal
    dealer_change = next(r for r in waited if r.data.get("type") == "DealerChange")
    refusal = next(r for r in waited if r.reason == "COMMAND_REFUSED")
    assert dealer_change.seq < refusal.seq and refusal.data["command"] == "open_round"
    assert re.fullmatch(REFUSED_OPEN.format(free=free), refusal.data["refused"])
    assert [r.data["alarm_reason"] for r in records if r.reason == "ALARM_CLEARED"] == ["JOURNAL_WRITE_FAILED"]


@pytest.mark.timeout(120)
def test_a_stop_that_cannot_write_the_journal_logs_every_record_it_held(directory: Path) -> None:
    """A stop while the disk is full must not lose what it holds without a word (a command applied
    meanwhile was told its record is kept): the stop tries its last commit a few times, then logs
    every record it could not write, as it would have been journaled."""
    disk_dir = directory / "disk"
    disk_dir.mkdir()
    free = FREE.format(disk=re.escape(str(disk_dir)))
    with PrivateTmpfs(disk_dir) as disk, PtyEndpoint(SimulatedShoe()) as shoe:
        shoe.call(shoe.device.load, full_shoe(6))
        config = write_config(directory, shoe.url, None, journal={"path": str(disk_dir / "journal.sqlite3")})
        daemon = Daemon(["--config", str(config)], directory / "cardd.sock", prefix=disk.enter)
        client = daemon.client()
        wait_until(lambda: shoe.state()["events_confirmed"] == shoe.state()["event_index"] == 1, "ShoeLoaded journaled")
        disk.fill()
        dealt = 200
        shoe.call(shoe.device.deal, dealt)
        client.wait_state(lambda s: bool(journal_alarms(s)) and s["shoe"]["cards_out"] == dealt)
        kept = client.command("dealer_change")
        assert kept["class"] == "ERROR" and kept["message"].startswith("not journaled yet"), kept
        client.close()
        code, err = daemon.stop()
        assert code == 0, err

    # journald (LineMax, 48 KiB) splits a longer line into pieces that are no JSON
    assert max(map(len, daemon.stderr().splitlines())) < JOURNALD_LINE_MAX
    [lost] = daemon.log_lines("records_not_journaled_at_stop")
    assert lost["level"] == "error" and re.search(free, lost["error"]) and lost["tries"] == 3, lost
    lines = daemon.log_lines("record_not_journaled_at_stop")
    records = [line["record"] for line in lines]
    assert lost["count"] == lost["logged"] == len(records) and lost["left_out"] == 0
    assert [(line["n"], line["of"]) for line in lines] == [(n, len(records)) for n in range(1, len(records) + 1)]
    assert [r["data"]["type"] for r in records if r["kind"] == "input"] == ["DealerChange"]
    assert [r["data"]["input"]["message"][:2] for r in records if "input" in r["data"]] == ["30"] * dealt  # card reads
    assert records[-1]["kind"] == "stop" and records[-1]["reason"] == "DAEMON_STOP"
    assert "JOURNAL_WRITE_FAILED" in [r["reason"] for r in records]
