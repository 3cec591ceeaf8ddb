"""The diagnostics that talk to a device (``cardctl probe``, ``monitor --talk``, ``capture``) keep
no journal, so they never let it forget an event (protocol 1.1, docs/protocol.md §3.2): a shoe
that dealt while cardd was stopped, looked at with one of them, still has every card for the
daemon started after, which journals each once; and the tool itself is shown (or records) every
event the shoe kept, from the ShoeLoaded on, not only those after it connected."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardd.journal import Journal
from firmware_bridge.messages import CardRead, ShoeEmpty, ShoeLoaded
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.cli.cli_rig import Run, cardctl
from tests.daemon.daemon_rig import Daemon, journaled_events, wait_until, write_config

#: ShoeLoaded, the 52 cards of one deck, ShoeEmpty
EVENTS = 54
LOST_EVENTS = ("EVENT_GAP", "EVENTS_LOST", "DEVICE_DROPPED_EVENTS")


def tool(name: str, url: str, directory: Path) -> Run:
    if name == "probe":
        return cardctl(None, "probe", url, "--json")
    if name == "monitor --talk":
        return cardctl(None, "monitor", url, "--talk", "--json", "--duration", "2")
    return cardctl(None, "capture", url, str(directory / "shoe.trace"), "--count", str(EVENTS), "--duration", "20")


def shown_events(name: str, run: Run, directory: Path) -> list[str]:
    """The event types the tool showed or recorded, in order, a card as its index: what it was told."""
    if name == "monitor --talk":
        lines = [json.loads(line) for line in run.out.splitlines()]
        messages = [line["message"] for line in lines if "message" in line]
    else:
        messages = [json.loads(line)["fields"] for line in (directory / "shoe.trace").read_text().splitlines()[1:]
                    if "payload" in json.loads(line)]
    return [f"CardRead {m['index']}" if m["type"] == "CardRead" else m["type"] for m in messages
            if m["type"] in ("ShoeLoaded", "CardRead", "ShoeEmpty")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["probe", "monitor --talk", "capture"])
def test_a_diagnostic_between_dealing_and_the_daemon_loses_no_card(name: str, directory: Path) -> None:
    shoe = SimulatedShoe("SHOE-DIAG", heartbeat_s=0)
    with PtyEndpoint(shoe) as endpoint:
        endpoint.call(shoe.load, full_shoe(1))
        endpoint.call(shoe.deal, 52)  # cardd stopped: the shoe keeps every event
        wait_until(lambda: endpoint.state()["event_index"] == EVENTS, "the shoe numbered all its events")

        run = tool(name, endpoint.url, directory)
        assert run.code == 0, run.err
        assert endpoint.state()["events_confirmed"] == 0  # the tool let the shoe forget nothing
        if name != "probe":
            assert shown_events(name, run, directory) == (
                ["ShoeLoaded"] + [f"CardRead {i}" for i in range(1, 53)] + ["ShoeEmpty"])

        daemon = Daemon(["--config", str(write_config(directory, endpoint.url, None))], directory / "cardd.sock")
        wait_until(lambda: endpoint.state()["events_confirmed"] == EVENTS, "the daemon journaled them all")
        alarms = daemon.client().state()["alarms"]
        code, err = daemon.stop()
        assert code == 0, err
    assert [a for a in alarms if a["reason"] in LOST_EVENTS] == []
    with Journal.open(directory / "journal.sqlite3", readonly=True) as journal:
        assert journal.verify().ok
        dropped = journal.query(reason="DEVICE_DROPPED_EVENTS", limit=None)
        events = journaled_events(journal, "shoe-reader")
    assert dropped == []
    assert [index for index, _ in events] == list(range(1, EVENTS + 1))  # each once, in order
    assert isinstance(events[0][1], ShoeLoaded) and isinstance(events[-1][1], ShoeEmpty)
    assert [msg.index for _, msg in events if isinstance(msg, CardRead)] == list(range(1, 53))


@pytest.mark.timeout(60)
def test_a_capture_records_the_events_the_shoe_still_keeps_and_not_its_answer_to_the_resume(directory: Path) -> None:
    """The shoe's events a host confirmed are gone from it (it says so, EventsDropped CONFIRMED, in
    answer to the capture's ResumeEvents); those after are kept and recorded. The EventsDropped is
    not recorded: it answers the capture's own request, and a replaying device makes its own."""
    shoe = SimulatedShoe("SHOE-DIAG", heartbeat_s=0)
    with PtyEndpoint(shoe) as endpoint:
        endpoint.call(shoe.load, full_shoe(1))
        endpoint.call(shoe.deal, 3)
        wait_until(lambda: endpoint.state()["event_index"] == 4, "ShoeLoaded and cards 1..3 read")
        endpoint.call(shoe.events.confirm, 4)  # what the shoe does when a host says it journaled them
        endpoint.call(shoe.deal, 2)
        wait_until(lambda: endpoint.state()["event_index"] == 6, "cards 4 and 5 read")
        trace = directory / "shoe.trace"
        run = cardctl(None, "capture", endpoint.url, str(trace), "--count", "2", "--duration", "10")
        assert run.code == 0, run.err
        assert endpoint.state()["events_confirmed"] == 4
    recorded = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    assert [(line["type"], line["fields"].get("index")) for line in recorded if "payload" in line] == [
        ("CardRead", 4), ("CardRead", 5)]
