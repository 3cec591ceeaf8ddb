"""``cardctl capture`` of a simulated shoe, then ``cardctl replay`` into a fresh daemon: the
daemon journals the same events as one that read the shoe itself (times aside). And
``monitor`` only listens unless told to talk."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tty
from pathlib import Path
from typing import Any


from cardd.journal import INPUT_KEY, Journal
from core.cards import Card, Orientation
from firmware_bridge.framing import Frame, FrameKind, encode_frame
from firmware_bridge.messages import CardRead, Event, encode
from simulators.rig import SimulatedTable
from tests.cli.cli_rig import CARDCTL, cardctl
from tests.daemon.daemon_rig import Daemon, write_config

STACK = ["AS", "KD", "7H", "2C", "9S", "TD", "3H", "5C", "QS", "4D", "8H", "6S"]
DEALT = 9
#: data keys that hold times or boot ids: a replay happens later, on another boot
VOLATILE = ("time", "boot", "ts_ns", "uptime", "elapsed", "at_ns")



def ended(proc: subprocess.Popen[str]) -> int:
    """SIGTERM to a ``cardctl replay`` and its exit code; one that is still there 10 s later is
    killed (a test that fails must not leave it serving ptys the next tests reuse) and fails."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{proc.args!r} still ran 10 s after SIGTERM") from None


def load_and_deal(sim: SimulatedTable) -> None:
    sim.shoe.call(sim.shoe.device.load, [Card.parse(c) for c in STACK], 10)
    sim.shoe.call(sim.shoe.device.deal, DEALT)


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if not any(word in k for word in VOLATILE)}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def table_events(journal_path: Path) -> list[tuple[Any, ...]]:
    """The events the daemon journaled (not the raw inputs, whose bytes carry the device's
    clock and boot id, nor the card read an event carries), times aside."""
    with Journal.open(journal_path, readonly=True) as journal:
        records = journal.query(limit=10_000)
    return [(r.source, r.reason, json.dumps(stable({k: v for k, v in r.data.items() if k != INPUT_KEY}), sort_keys=True))
            for r in records if r.kind == "event"]


def run_daemon(directory: Path, shoe_url: str) -> list[tuple[Any, ...]]:
    config = write_config(directory, shoe_url, None)
    daemon = Daemon(["--config", str(config)], directory / "cardd.sock")
    try:
        client = daemon.client()
        client.wait_state(lambda s: s["shoe"]["cards_out"] == DEALT, timeout=30)
        client.close()
    finally:
        assert daemon.stop()[0] == 0
    return table_events(directory / "journal.sqlite3")


def test_capture_then_replay_into_a_fresh_daemon_journals_the_same_events(directory):
    live_dir, replay_dir = directory / "live", directory / "replay"
    live_dir.mkdir()
    replay_dir.mkdir()
    with SimulatedTable.over_ptys() as sim:  # the original: the daemon reads the shoe itself
        config = write_config(live_dir, sim.shoe.url, None)
        daemon = Daemon(["--config", str(config)], live_dir / "cardd.sock")
        try:
            client = daemon.client()
            client.wait_state(lambda s: s["devices"]["shoe-reader"]["link"] == "up")
            load_and_deal(sim)
            client.wait_state(lambda s: s["shoe"]["cards_out"] == DEALT)
            client.close()
        finally:
            assert daemon.stop()[0] == 0
    live = table_events(live_dir / "journal.sqlite3")

    trace = directory / "shoe.trace"
    with SimulatedTable.over_ptys() as sim:  # the same shoe again, captured by cardctl
        capturing = subprocess.Popen([str(CARDCTL), "capture", sim.shoe.url, str(trace), "--count", str(DEALT + 1)],
                                     stderr=subprocess.PIPE, text=True)
        assert capturing.stderr is not None
        assert "capturing OS-1 sim SHOE0001" in capturing.stderr.readline()
        load_and_deal(sim)
        assert capturing.wait(30) == 0
    header = json.loads(trace.read_text().splitlines()[0])
    assert header["cardd_trace"] == 2 and header["devices"]["shoe"]["serial"] == "SHOE0001"
    assert header["link"]["serial_settings"]["baud"] == 115200
    assert header["started"]

    link = directory / "replayed-shoe"
    replaying = subprocess.Popen([str(CARDCTL), "replay", str(trace), "--link", str(link), "--json"],
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert replaying.stdout is not None
        served = json.loads(replaying.stdout.readline())
        assert served["url"] == f"serial://{link}" and served["messages"] == DEALT + 1
        replayed = run_daemon(replay_dir, served["url"])
    finally:
        assert ended(replaying) == 0
    assert replayed == live
    assert sum('"card"' in e[2] for e in live) >= DEALT


def test_a_trace_that_is_not_one_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "x.trace"
    bad.write_text('{"hello": 1}\n')
    run = cardctl(None, "replay", str(bad))
    assert run.code == 2 and "not a cardd trace" in run.one_line_error()


def test_monitor_only_listens_unless_told_to_talk(tmp_path):
    with SimulatedTable.over_ptys() as sim:
        quiet = cardctl(None, "monitor", sim.shoe.url, "--json", "--duration", "1")
        assert quiet.code == 0, quiet.err
        lines = [json.loads(line) for line in quiet.out.splitlines()]
        assert lines[0]["link"] == "open" and all("frame" not in line for line in lines)
        assert sim.shoe.state()["link_stats"].frames_received == 0  # the device heard nothing
        talk = cardctl(None, "monitor", sim.shoe.url, "--talk", "--json", "--duration", "1.5")
        assert talk.code == 0, talk.err
        events = [json.loads(line) for line in talk.out.splitlines()]
        assert any(e.get("link") == "connected" for e in events)


def test_the_read_only_monitor_shows_an_events_card_and_marks_a_resent_frame():
    """A device nobody acknowledges (the monitor only listens) resends its frame: the monitor
    shows the event's card as ``4H`` (as --talk does) and marks the copies, so one card read
    does not look like several. A fresh link (RESET) numbers from 0 again: not a resend."""
    master, slave = os.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    monitor = subprocess.Popen([str(CARDCTL), "monitor", f"serial://{os.ttyname(slave)}", "--json", "--duration", "3"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert monitor.stdout is not None
        assert json.loads(monitor.stdout.readline())["link"] == "open"
        read = Event(index=5, message=CardRead(index=5, card=Card.parse("4H"), orientation=Orientation.FACE_DOWN,
                                                device_time_ms=1200))
        data = encode_frame(Frame(FrameKind.DATA, 7, 0, encode(read)))
        os.write(master, data * 3 + encode_frame(Frame(FrameKind.RESET, payload=b"NEW!")) + data)
        out, err = monitor.communicate(timeout=30)
    finally:
        if monitor.poll() is None:
            monitor.kill()
            monitor.wait()
        os.close(master)
        os.close(slave)
    assert monitor.returncode == 0, err
    frames = [line for line in map(json.loads, out.splitlines()) if "frame" in line]
    assert [(f["frame"], f.get("retransmitted", False)) for f in frames] == [
        ("DATA", False), ("DATA", True), ("DATA", True), ("RESET", False), ("DATA", False)]
    assert frames[0]["message"] == {"type": "Event", "index": 5, "message": {
        "type": "CardRead", "index": 5, "card": "4H", "orientation": "FACE_DOWN", "device_time_ms": 1200}}


def test_a_device_with_another_protocol_major_is_incompatible_firmware_in_one_line(tmp_path):
    header = {"cardd_trace": 1, "started": "2026-11-23T10:00:00+00:00",
              "device": {"url": "serial:///dev/x", "role": "shoe", "model": "OS-9", "serial": "SHOE0009",
                         "firmware": "9.0.0", "protocol": "9.0"},
              "link": {"url": "serial:///dev/x", "scheme": "serial", "serial_settings": None}}
    trace = tmp_path / "future.trace"
    trace.write_text(json.dumps(header) + "\n")
    link = tmp_path / "future-shoe"
    replaying = subprocess.Popen([str(CARDCTL), "replay", str(trace), "--link", str(link), "--json"],
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert replaying.stdout is not None
        url = json.loads(replaying.stdout.readline())["url"]
        run = cardctl(None, "probe", url)
    finally:
        ended(replaying)
    assert run.code == 1
    assert "incompatible firmware" in run.one_line_error() and "9" in run.one_line_error()


def test_replay_serves_every_device_of_a_recorded_bench_trace(tmp_path):
    trace = Path(__file__).resolve().parents[1] / "traces" / "casino-000-clean-round.trace"
    replaying = subprocess.Popen([str(CARDCTL), "replay", str(trace), "--json"], stdout=subprocess.PIPE, text=True)
    try:
        assert replaying.stdout is not None
        served = [json.loads(replaying.stdout.readline()) for _ in range(2)]
        probes = [cardctl(None, "probe", device["url"], "--json") for device in served]
    finally:
        assert ended(replaying) == 0
    assert {d["device"]["role"] for d in served} == {"shoe", "shuffler"}
    assert all(p.code == 0 for p in probes), [p.err for p in probes]
    assert {json.loads(p.out)["serial"] for p in probes} == {"SHOE0001", "SHUF0001"}
    one_link = cardctl(None, "replay", str(trace), "--link", str(tmp_path / "x"))
    assert one_link.code == 2 and "--link serves one" in one_link.one_line_error()
