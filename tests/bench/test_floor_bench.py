"""``cardbench floor``: simulated tables publishing through cardd's own export to a real mosquitto,
a real floor subscriber counting what arrives."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cardd.export.payloads import CARD_TOKEN
from cardd.journal import Journal, Record
from tests.export.export_rig import Subscriber, names_a_card
from tests.support.brokers import Mosquitto, free_port

ROOT = Path(__file__).resolve().parents[2]
SITE = "floor1"
TABLES = ["t0001", "t0002", "t0003"]


class Bench:
    """``cardbench floor`` as a child, its stdout read line by line as it comes."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen([str(Path(sys.executable).with_name("cardbench")), "floor", *args], cwd=ROOT,
                                        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, check: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if check in line:
                    return line
            assert self.process.poll() is None or self._reader.is_alive(), (self.lines, self.stderr())
            time.sleep(0.05)
        raise AssertionError(f"cardbench floor never printed {check!r}: {self.lines}")

    def end(self, timeout: float = 30.0) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        self._reader.join(5)
        return code

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return "" if self.process.poll() is None else self.process.stderr.read()


def credentials(broker: Mosquitto) -> list[str]:
    """Each table a broker user of its own, as the floor's ACL wants: ``{table}`` in the options."""
    password_file = None
    for table in TABLES:
        _, password_file = broker.add_table(SITE, table)
    assert password_file is not None
    return ["--site", SITE, "--username", f"{SITE}.{{table}}",
            "--password-file", str(password_file).replace(TABLES[-1], "{table}")]


def journal_records(path: Path) -> list[Record]:
    with Journal.open(path, readonly=True) as journal:
        return journal.query(seq_from=1, limit=None)


def test_every_tables_records_reach_the_floor_once_in_order_with_status_state_and_anchor(
        tmp_path: Path, mosquitto: Mosquitto) -> None:
    journals = tmp_path / "journals"
    options = credentials(mosquitto)
    with Subscriber(mosquitto.url, mosquitto.floor) as floor:
        bench = Bench("--tables", "3", "--broker", mosquitto.url, *options, "--duration", "6", "--every", "2",
                      "--backlog-hours", "0.05", "--fault-rate", "0.5", "--journals", str(journals))
        assert bench.end() == 0, bench.stderr()
        records = {table: journal_records(journals / f"{table}.sqlite3") for table in TABLES}
        for table in TABLES:
            floor.wait_for_seq(table, records[table][-1].seq, timeout=10)
        floor.wait_for(lambda: sum(not m.payload["online"] for m in floor.messages("status")) == 3,
                       "every table's offline status", timeout=10)
    assert "3 tables in 1 process(es)" in bench.lines[0] and bench.lines[-1].startswith("stopped: 3 tables")
    assert any("3/3 tables online" in line for line in bench.lines)
    started_ns = min(r.ts_ns for table in TABLES for r in records[table] if r.kind == "start")
    for table in TABLES:
        kept = records[table]
        last = kept[-1].seq
        assert floor.seqs(table) == list(range(1, last + 1))  # each once after dedupe, in order
        assert kept[-1].reason == "DAEMON_STOP"  # each stopped as a daemon stops
        events = {e["seq"]: e for e in floor.events(table)}
        for record in kept:
            event = events[record.seq]
            assert (event["site"], event["kind"], event["source"], event["reason"], event["severity"]) == \
                   (SITE, record.kind, record.source, record.reason, record.severity)
            assert event["time"] == record.time_iso[:23] + "Z"  # the commit time the floor measures from
        # three minutes of records not yet delivered at the start: sent as a replay
        backlog = [r for r in kept if r.ts_ns < started_ns and r.kind != "start"]
        assert len(backlog) > 20 and all(events[r.seq]["replay"] for r in backlog)
        reasons = {r.reason for r in kept}
        assert {"ROUND_STATE", "ACTION", "CARD_ASSIGNED", "SETTLED", "SHOE_STATE", "SHOE_VERIFIED", "BURN"} <= reasons
        statuses = [m.payload for m in floor.messages("status", table)]
        assert statuses[0]["online"] and statuses[0]["site"] == SITE
        assert statuses[-1] == {"schema": "cardd.floor/1", "site": SITE, "table": table, "online": False,
                                "session": statuses[0]["session"]}
        states = [m.payload for m in floor.messages("state", table)]
        assert states and {d["role"] for d in states[-1]["devices"]} == {"shoe", "shuffler"}
        assert states[-1]["export"]["delivered_through"] <= last
        anchors = [m.payload for m in floor.messages("anchor", table)]
        hashes = {r.seq: r.hash.hex() for r in kept}
        assert anchors and anchors[-1]["seq"] == last and all(hashes[a["seq"]] == a["hash"] for a in anchors)
    assert any(CARD_TOKEN.search(r.data_json) for table in TABLES for r in records[table])  # cards journaled...
    assert names_a_card(floor.received) == []  # ...none sent with the default filter
    faults = {r.reason for table in TABLES for r in records[table]} & {"FACE_UP_CARD", "ROUND_HELD"}
    assert faults, "a fault rate of one round in two made no fault in three minutes of rounds"


def test_ctrl_c_ends_it_in_one_line_and_every_table_stops_as_a_daemon_does(tmp_path: Path,
                                                                            mosquitto: Mosquitto) -> None:
    journals = tmp_path / "journals"
    bench = Bench("--tables", "3", "--broker", mosquitto.url, *credentials(mosquitto), "--every", "1",
                  "--journals", str(journals))
    bench.wait_for_line("3/3 tables online")
    workers = [int(pid) for pid in Path(f"/proc/{bench.process.pid}/task/{bench.process.pid}/children")
               .read_text().split()]
    bench.process.send_signal(signal.SIGINT)
    assert bench.end() == 130
    assert bench.stderr().splitlines() == ["cardbench: interrupted (SIGINT); what it started is stopped"]
    assert bench.lines[-1].startswith("stopped: 3 tables")
    assert workers and not any(Path(f"/proc/{pid}").exists() and "spawn_main" in _cmdline(pid) for pid in workers)
    for table in TABLES:
        assert journal_records(journals / f"{table}.sqlite3")[-1].reason == "DAEMON_STOP"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_a_broker_down_at_start_is_one_line_and_every_table_keeps_trying(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)  # its port chosen, not yet listening
    options = credentials(broker)
    bench = Bench("--tables", "3", "--broker", broker.url, *options, "--every", "1", "--timeout", "1")
    try:
        line = bench.wait_for_line("no table is connected")
        assert line == (f"no table is connected: {broker.url}: cannot connect: Connection refused "
                        "(every table keeps trying, with its backoff)")
        with broker:
            bench.wait_for_line("3/3 tables online")
            bench.process.send_signal(signal.SIGINT)
            assert bench.end() == 130
    finally:
        if bench.process.poll() is None:
            bench.process.kill()
    assert sum("no table is connected" in line for line in bench.lines) == 1
    assert not any("Traceback" in line for line in bench.lines)


def test_a_bad_broker_url_is_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    bench = Bench("--tables", "3", "--broker", url)
    assert bench.end() != 0
    assert bench.stderr().splitlines() == [f"cardbench: --broker {url}: expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"]
