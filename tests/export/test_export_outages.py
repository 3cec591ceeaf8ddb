"""The floor export through outages and hostile brokers, end to end: a real daemon dealing on
simulated devices, a real mosquitto stopped, killed, black-holed (SIGSTOP), refusing or behind
TLS, a journal whose disk fills, and a real floor subscriber with a persistent session. After
each, the floor has every journal record of the run exactly once after dedupe on seq, in order,
and no payload names a card; the table dealt on throughout.

CI restarts the broker 10 times at seeded random points; ``CARDD_FULL=1 .venv/bin/python -m
pytest tests/export/test_export_outages.py`` restarts it 100 times."""
from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cardd.journal import Journal
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import Client
from tests.export.export_rig import FLAT_OUT, SITE, ExportTable, Subscriber, export_chain, names_a_card
from tests.support.brokers import free_port
from tests.support.full_disk import PrivateTmpfs

FULL = os.environ.get("CARDD_FULL") == "1"
RESTARTS = 100 if FULL else 10
#: the exporter's backoff between broker attempts reaches 30 s (cardd/export/exporter.py BACKOFF),
#: a broker's answer then takes a few seconds more
DRAIN_TIMEOUT = 75.0


class Dealing:
    """Rounds dealt one after another in a thread of their own, with a client of their own, until
    :meth:`finish` or the shoe's cut card: the table deals while the test does things to its
    broker. ``pause`` between rounds keeps a shoe (about 35 rounds) going for the test's time."""

    def __init__(self, table: ExportTable, pause: float = 0.2) -> None:
        self.table, self.pause = table, pause
        self.rounds = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dealing", daemon=True)

    def _run(self) -> None:
        assert self.table.daemon is not None
        client = self.table.daemon.client()
        try:
            while not self._stop.is_set():
                if self.rounds and client.state()["shoe"]["state"] != "in_play":
                    self._stop.wait()  # the cut card is out: this shoe is dealt (a new one is no part of it)
                    break
                self.table.deal_rounds(1, client)
                self.rounds += 1
                self._stop.wait(self.pause)
        except BaseException as exc:  # said by finish(), in the test's thread
            self.error = exc
        finally:
            client.close()

    def __enter__(self) -> Dealing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def finish(self) -> int:
        """Stop after the round being dealt; the rounds dealt."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the dealing never ended"
        if self.error is not None:
            assert self.table.daemon is not None
            raise AssertionError(f"the dealing failed: {self.error!r}; the daemon's log: "
                                 f"{self.table.daemon.stderr()[-4000:]}") from self.error
        return self.rounds


def assert_floor_has_the_journal(floor: Subscriber, table: ExportTable, last: int) -> None:
    """Every record 1..last at the floor, once after dedupe, in order, the export chain whole
    (each resend as first sent), and no card named."""
    floor.wait_for_seq(table.table, last, timeout=DRAIN_TIMEOUT)
    assert floor.seqs(table.table) == list(range(1, last + 1))
    export_chain(floor, table.table)
    assert names_a_card(floor.received) == []


def stop_and_check(floor: Subscriber, table: ExportTable) -> int:
    """The daemon stopped cleanly (its stop record exported too); the floor checked; the last seq."""
    table.stop()
    last = table.last_seq()
    assert_floor_has_the_journal(floor, table, last)
    return last


def sessions(floor: Subscriber, table: str) -> set[int]:
    """The broker connections the floor heard of (the online status of each)."""
    return {m.payload["session"] for m in floor.messages("status", table) if m.payload["online"]}


def no_traceback(table: ExportTable) -> None:
    assert table.daemon is not None
    log = table.daemon.stderr()
    assert "Traceback" not in log and not table.daemon.log_lines("export_failed"), log[-3000:]


# ---- 1. the broker stopped and restarted, or killed ---------------------------------------------

@pytest.mark.timeout(600 if not FULL else 7200)
def test_broker_restarted_at_random_points_while_dealing_loses_nothing(directory, mosquitto):
    """SIGTERM: mosquitto saves its persistence, the subscriber's session keeps what was queued
    for it; the table sends again from its cursor whatever had no PUBACK."""
    user, password_file = mosquitto.add_table(SITE, "bj-01")
    rng = random.Random(3101)
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-01", user=user, password_file=password_file,
                        api=FLAT_OUT) as table:
        table.wait_export(lambda e: e["connected"], "a connection")
        cut = 0  # restarts that found the table connected (the others came while it backed off)
        with Dealing(table, pause=max(0.5, RESTARTS * 1.8 / 25)) as dealing:
            for _ in range(RESTARTS):
                time.sleep(rng.uniform(0.1, 2.5))  # a random point of the deal
                cut += table.export_state()["connected"]
                assert mosquitto.stop() == 0, mosquitto.process.last_words()
                time.sleep(rng.uniform(0.0, 1.0))
                mosquitto.start()
            rounds = dealing.finish()
        table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog", DRAIN_TIMEOUT)
        no_traceback(table)
        last = stop_and_check(floor, table)
    assert rounds >= 3 and last > 60
    assert cut >= 3 and len(sessions(floor, "bj-01")) > cut  # connections the restarts cut, and the one after
    print(f"\n{RESTARTS} restarts, {cut} of them cutting a live connection: {last} records, "
          f"{len(floor.events('bj-01')) - last} sent twice, {rounds} rounds")


@pytest.mark.timeout(300)
def test_a_killed_broker_never_had_more_than_the_table_sends_again(directory, mosquitto):
    """SIGKILL: what mosquitto acknowledged but had not saved is the broker's loss (docs/floor.md,
    "A broker that is killed"); the table's part is that its cursor never passes a PUBACK. Each
    kill comes to a broker black-holed for a moment, so records are in flight, unacknowledged:
    right after it, while no broker runs, a subscriber that was connected already holds every
    record the table counts as delivered, and after the restart the table sends the rest."""
    user, password_file = mosquitto.add_table(SITE, "bj-02")
    rng = random.Random(3102)
    with Subscriber(mosquitto.url, mosquitto.floor) as floor:
        # saved once (a clean stop): a killed mosquitto comes back with the floor's subscription
        assert mosquitto.stop() == 0
        mosquitto.start()
        with ExportTable(directory, [mosquitto.url], "bj-02", user=user, password_file=password_file,
                         api=FLAT_OUT) as table:
            in_flight = []  # the records sent and not acknowledged when each kill came
            with Dealing(table, pause=0.0) as dealing:
                for _ in range(3):
                    table.wait_export(lambda e: e["connected"] and e["backlog"] <= 2, "a live connection",
                                      DRAIN_TIMEOUT)
                    time.sleep(rng.uniform(0.3, 1.5))
                    # black-holed first, for less than timeout_s: what the table sends meanwhile is in
                    # flight, unacknowledged, when the kill comes
                    mosquitto.pause()
                    time.sleep(rng.uniform(0.5, 1.5))
                    in_flight.append(table.export_state()["backlog"])
                    mosquitto.kill()
                    export = table.wait_export(lambda e: not e["connected"], "the broker's loss noticed")
                    delivered = export["delivered_through"]
                    assert delivered > 0
                    floor.wait_for(lambda: set(range(1, delivered + 1)) <= set(floor.seqs("bj-02")),
                                   f"every record through the table's cursor {delivered} before the broker died",
                                   timeout=5)
                    mosquitto.start()
                dealing.finish()
            assert max(in_flight) > 0, in_flight
            table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog", DRAIN_TIMEOUT)
            no_traceback(table)
            stop_and_check(floor, table)


# ---- 2. the broker black-holed (SIGSTOP) for 30 s -------------------------------------------------

@pytest.mark.timeout(300)
def test_a_black_holed_broker_changes_nothing_at_the_table(directory, mosquitto):
    user, password_file = mosquitto.add_table(SITE, "bj-03")
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-03", user=user, password_file=password_file) as table:
        table.deal_rounds(1)
        table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog")
        seq_before = table.client.state()["seq"]
        mosquitto.pause()
        paused_at = time.monotonic()
        try:
            state = table.play_round()  # the round plays to settlement: every card journaled
            assert state["round"]["state"] == "complete" and state["seq"] > seq_before
            export = table.wait_export(lambda e: not e["connected"], "the silent broker given up", 20)
            assert re.fullmatch(re.escape(mosquitto.url) + r": (no PUBACK for seq \d+|no answer to CONNECT) within 2 s",
                                export["problem"] or ""), export["problem"]
            backlogs = [export["backlog"]]
            while time.monotonic() - paused_at < 30:
                table.client.ok("dealer_change")  # commands answered all along
                state = table.client.state()
                backlogs.append(state["export"]["backlog"])
                assert not state["export"]["connected"] and state["export"]["delivered_through"] <= seq_before
                time.sleep(1.0)
        finally:
            mosquitto.resume()
        assert backlogs == sorted(backlogs) and backlogs[-1] > backlogs[0] > 0  # a growing backlog
        resumed_at = time.monotonic()
        table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog", DRAIN_TIMEOUT)
        drained_after = time.monotonic() - resumed_at
        no_traceback(table)
        last = stop_and_check(floor, table)
    records = table.records()
    assert sum(1 for r in records if r.reason == "SETTLED") >= 4 and last == records[-1].seq
    print(f"drained {drained_after:.1f} s after the broker was resumed")


# ---- 3. the disk full on the cursor's write -------------------------------------------------------

#: in the journal's mount namespace: a read transaction held open until stdin closes, so no
#: checkpoint copies past it and every later write must grow the WAL (a full disk refuses it)
PIN_SNAPSHOT = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN")
conn.execute("SELECT count(*) FROM records").fetchone()
print("pinned", flush=True)
sys.stdin.read()
"""


def copy_journal(disk: PrivateTmpfs, journal_path: Path, to: Path) -> Path:
    """The journal and its WAL copied out of the namespace (SQLite would resolve /proc/PID/root to
    this namespace's path), while nothing writes to them."""
    to.mkdir()
    for name in (journal_path.name, f"{journal_path.name}-wal"):
        if (disk.outside / name).exists():
            shutil.copyfile(disk.outside / name, to / name)
    return to / journal_path.name


@pytest.mark.timeout(300)
def test_a_full_disk_stops_the_cursor_not_the_export(directory, mosquitto):
    user, password_file = mosquitto.add_table(SITE, "bj-04")
    disk_dir = directory / "disk"
    disk_dir.mkdir()
    journal_path = disk_dir / "journal.sqlite3"
    with PrivateTmpfs(disk_dir) as disk, Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-04", user=user, password_file=password_file,
                        journal_path=journal_path, prefix=disk.enter) as table:
        table.deal_rounds(1)
        table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog")
        assert mosquitto.stop() == 0
        pin = subprocess.Popen([*disk.enter, sys.executable, "-c", PIN_SNAPSHOT, str(journal_path)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert pin.stdout is not None and pin.stdout.readline() == "pinned\n"
            table.play_round()  # journaled while there is room; waiting for a broker
            head = table.client.state()["seq"]
            disk.fill()
            mosquitto.start()  # the backlog goes out; the cursor's write after it cannot grow the WAL
            export = table.wait_export(lambda e: e["delivered_through"] == head and e["problem"] is not None,
                                       "the backlog delivered and the cursor unwritten", DRAIN_TIMEOUT)
            assert export["connected"]  # the export goes on
            assert re.fullmatch(r"the export's cursor cannot be written: disk full: \d+ bytes free in "
                                + re.escape(str(disk_dir)), export["problem"]), export["problem"]
            assert table.client.state()["seq"] == head  # the daemon answers (nothing new to journal)
            with Journal.open(copy_journal(disk, journal_path, directory / "full"), readonly=True) as journal:
                written = journal.delivery().delivered_through
            assert written < head  # what a restart now would send again from
            disk.free()
            export = table.wait_export(lambda e: e["problem"] is None, "the cursor written again")
            assert export["connected"] and export["delivered_through"] >= head
        finally:
            pin.communicate("")
        no_traceback(table)
        table.kill()  # no stop to write the cursor: the journal holds what was written as it went
        with Journal.open(copy_journal(disk, journal_path, directory / "freed"), readonly=True) as journal:
            written = journal.delivery().delivered_through
        assert written >= head  # the cursor moved again once there was room
        table.start()  # sends again from the cursor written (a duplicate or two is fine)
        table.deal_rounds(1)
        table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog", DRAIN_TIMEOUT)
        table.stop()
        with Journal.open(copy_journal(disk, journal_path, directory / "after"), readonly=True) as journal:
            last = journal.last_seq
            assert journal.verify().ok
        assert_floor_has_the_journal(floor, table, last)


# ---- 4. hostile or wrong brokers -------------------------------------------------------------------

@pytest.mark.timeout(180)
def test_a_table_publishing_under_another_tables_ids_is_refused_and_deals_on(directory, mosquitto):
    user_a, password_a = mosquitto.add_table(SITE, "bj-05")
    mosquitto.add_table(SITE, "bj-06")
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-06", user=user_a, password_file=password_a) as table:
        export = table.wait_export(lambda e: e["problem"] is not None, "a refusal")
        assert re.fullmatch(re.escape(mosquitto.url) + r": the broker refused a publish to .*: Not authorized",
                            export["problem"]), export["problem"]
        table.deal_rounds(1)  # the table deals on
        export = table.export_state()
        assert not export["connected"] and export["delivered_through"] == 0 and export["backlog"] > 0
        no_traceback(table)
        table.stop()
    assert floor.messages("events", "bj-06") == [] and [m for m in floor.received if "bj-06" in m.topic] == []


@pytest.mark.timeout(120)
def test_a_wrong_password_is_one_problem_line(directory, mosquitto):
    user, password_file = mosquitto.add_table(SITE, "bj-07")
    password_file.write_text("not-the-password\n")
    with ExportTable(directory, [mosquitto.url], "bj-07", user=user, password_file=password_file) as table:
        export = table.wait_export(lambda e: e["problem"] is not None, "a refusal")
        # mosquitto 2 answers a wrong password with CONNACK 0x87 (Not authorized), others 0x86
        assert re.fullmatch(re.escape(mosquitto.url) + r": the broker refused the connection: "
                            r"(Not authorized|Bad user name or password)", export["problem"]), export["problem"]
        table.deal_rounds(1)
        assert table.export_state()["delivered_through"] == 0
        no_traceback(table)
        table.stop()


@pytest.mark.timeout(180)
def test_tls_with_the_ca_delivers_and_without_it_names_the_certificate_check(directory, mosquitto_tls):
    broker = mosquitto_tls
    assert broker.tls is not None
    user, password_file = broker.add_table(SITE, "bj-08")
    untrusting = directory / "untrusting"
    untrusting.mkdir()
    with ExportTable(untrusting, [broker.tls_url], "bj-08", user=user, password_file=password_file) as table:
        export = table.wait_export(lambda e: e["problem"] is not None, "a TLS failure")
        assert re.fullmatch(re.escape(broker.tls_url) + r": cannot connect: TLS: the broker's certificate did not "
                            r"pass the check \([^()]+\); is ca_file the CA that signed it\?", export["problem"]), \
            export["problem"]
        no_traceback(table)
        table.stop()
    with Subscriber(broker.url, broker.floor) as floor, \
            ExportTable(directory, [broker.tls_url], "bj-08", user=user, password_file=password_file,
                        ca_file=str(broker.tls.ca)) as table:
        table.deal_rounds(1)
        table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog")
        assert table.export_state()["broker"] == broker.tls_url
        stop_and_check(floor, table)


@pytest.mark.timeout(180)
def test_a_dead_broker_listed_first_fails_over_to_the_next(directory, mosquitto):
    user, password_file = mosquitto.add_table(SITE, "bj-09")
    dead = f"mqtt://127.0.0.1:{free_port()}"
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [dead, mosquitto.url], "bj-09", user=user, password_file=password_file) as table:
        table.deal_rounds(1)
        export = table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog")
        assert export["broker"] == mosquitto.url
        no_traceback(table)
        stop_and_check(floor, table)


# ---- 5. the backlog alarm ----------------------------------------------------------------------------

def floor_export_line(table: ExportTable) -> str:
    run = cardctl(table.directory / "cardd.sock", "status")
    assert run.code == 0, run.err
    joined = " ".join(run.out.split())  # a narrow terminal wraps it
    found = re.search(r"floor export .*?waiting(?: \(oldest [\d.]+ s\))?", joined)
    assert found, run.out
    return found.group(0)


def backlog_alarms(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in state["alarms"] if a["reason"] == "EXPORT_BACKLOG"]


@pytest.mark.timeout(240)
def test_a_backlog_older_than_its_limit_is_an_alarm_until_it_drains(directory, mosquitto):
    user, password_file = mosquitto.add_table(SITE, "bj-10")
    with Subscriber(mosquitto.url, mosquitto.floor) as floor:
        assert mosquitto.stop() == 0  # down from the start (the floor's session saved)
        with ExportTable(directory, [mosquitto.url], "bj-10", user=user, password_file=password_file,
                         backlog_alarm_s=10) as table:
            table.deal_rounds(1)
            client: Client = table.client
            state = client.wait_state(lambda s: bool(backlog_alarms(s)), timeout=40)
            [alarm] = backlog_alarms(state)
            assert alarm["source"] == "export" and state["export"]["oldest_undelivered_s"] > 10
            line = floor_export_line(table)
            assert re.fullmatch(rf"floor export {SITE}/bj-10: NOT CONNECTED \({re.escape(mosquitto.url)}: cannot "
                                r"connect: Connection refused\), delivered through seq 0, \d+ waiting "
                                r"\(oldest [\d.]+ s\)", line), line
            mosquitto.start()
            state = client.wait_state(lambda s: not backlog_alarms(s), timeout=DRAIN_TIMEOUT)
            export = table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog")
            line = floor_export_line(table)
            assert re.fullmatch(rf"floor export {SITE}/bj-10: connected to {re.escape(mosquitto.url)}, delivered "
                                rf"through seq \d+, 0 waiting", line), line
            no_traceback(table)
            last = stop_and_check(floor, table)
        records = table.records()
    drained = [r for r in records if r.reason == "EXPORT_DRAINED"]
    raised = [r for r in records if r.reason == "EXPORT_BACKLOG"]
    assert len(raised) == 1 and len(drained) == 1 and raised[0].seq < drained[0].seq <= last
    assert drained[0].data["alarm"] == alarm["id"] and export["delivered_through"] >= raised[0].seq
