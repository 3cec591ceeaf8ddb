"""The feed: a device connection's messages and events reach the tracker as input records.

The card path end to end: a simulated shoe behind a real pty -> serial driver -> link ->
DeviceSession -> DeviceConnection -> Feed.message -> Table.apply -> the hand the round dealt it to.
"""
from __future__ import annotations

import asyncio
from typing import Callable

import pytest
from structlog.testing import capture_logs

from devices.events import Event, Reason
from devices.game.rules import HouseRules
from devices.tracker.feed import Feed
from devices.tracker.inputs import DeviceMessage, NoMoreBets, OpenRound, PlaceBet, ShuffleStarted, TableInput, Tick
from devices.tracker.table import Table
from firmware_bridge.messages import DeviceRole, FaultCleared, FaultCode, Heartbeat, Ident, StartShuffle, Status
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.session import SessionConfig, SessionEvent, SessionEventKind
from simulators.faults import Faults
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable
from simulators.shuffler import SimulatedShuffler

from tests.support.poll import until
from tests.support.recorders import FakeClock

pytestmark = pytest.mark.usefixtures("no_leaks")


def ident(role: DeviceRole, name: str, boot: int = 7) -> Ident:
    return Ident(role, "sim", f"{name}-1", "1.0.0", 1, 0, boot)


@pytest.mark.timeout(60)
def test_a_card_from_the_pty_lands_in_the_hand_the_round_deals_it_to() -> None:
    rules = HouseRules.default()
    journal: list[Event] = []
    table = Table(rules, journal.append)
    applied: list[type] = []
    feed = Feed(table, on_applied=lambda inp, caused: applied.append(type(inp)))

    async def main(sim: SimulatedTable) -> None:
        sessions = []
        try:
            for name, endpoint in (("shuffler", sim.shuffler), ("shoe-reader", sim.shoe)):
                on_message, on_event = feed.callbacks(name)
                session = DeviceConnection(endpoint.url, on_message, on_event, SessionConfig(host_name="feed-test"))
                sessions.append(session)
                await session.open()
            assert table.shuffler.state == "idle" and table.reader.state == "idle"  # CONNECTED -> LinkUp + IDENT
            table.apply(ShuffleStarted("dealer-1"))
            await sessions[0].send(StartShuffle(rules.decks))
            await until(lambda: table.shoe.state == "verified", what="the shoe verified from the shuffler's count")
            stack = await asyncio.to_thread(sim.shuffler.call, sim.shuffler.device.unload)
            await asyncio.to_thread(sim.shoe.call, sim.shoe.device.load, stack, len(stack) - 10)
            await until(lambda: table.shoe.state == "burning", what="the shoe loaded")
            burn = rules.shoe.burn_after_shuffle
            await asyncio.to_thread(sim.shoe.call, sim.shoe.device.deal, burn)
            await until(lambda: table.shoe.state == "in_play", what="the burn done")
            assert table.burn_pile == stack[:burn]

            table.apply(OpenRound())
            table.apply(PlaceBet(1, "p1", rules.table.min_per_player))
            table.apply(NoMoreBets("dealer-1"))
            await asyncio.to_thread(sim.shoe.call, sim.shoe.device.deal, 1)
            round_ = table.round
            assert round_ is not None
            await until(lambda: len(round_.assignments) == 1, what="the first card of the round assigned")
            assert round_.box_hands[1][0].cards == [stack[burn]]  # the next card of the stack, on box 1
            assert DeviceMessage in applied
        finally:
            for session in sessions:
                await session.close()

    with SimulatedTable.over_ptys(shuffle_time_s=0) as sim:
        asyncio.run(main(sim))
    assert any(e.reason is Reason.CARD_ASSIGNED and e.data["target"] == "box 1 hand 1" for e in journal)


@pytest.mark.timeout(60)
def test_a_shoe_that_goes_away_takes_the_reader_offline() -> None:
    table = Table(HouseRules.default(), lambda e: None)
    feed = Feed(table)

    async def main(sim: SimulatedTable) -> None:
        on_message, on_event = feed.callbacks("shoe-reader")
        session = DeviceConnection(sim.shoe.url, on_message, on_event, SessionConfig(host_name="feed-test"))
        try:
            await session.open()
            assert table.reader.state == "idle"
            await asyncio.to_thread(sim.shoe.stop)  # the device and its pty go away
            await until(lambda: table.reader.state == "offline", what="DISCONNECTED -> LinkDown -> reader offline")
        finally:
            await session.close()

    with SimulatedTable.over_ptys(shuffle_time_s=0) as sim:
        asyncio.run(main(sim))


@pytest.mark.timeout(60)
def test_a_1_0_shuffler_whose_fault_cleared_was_lost_in_a_link_reset_is_idle_after_the_handshake() -> None:
    """A 1.0 device keeps nothing across a link reset: its FaultCleared lost with the link's
    reset left the table's shuffler in fault until a replug. The host now asks for its Status
    after every handshake with a 1.0 device, and a Status without a fault ends the fault."""
    journal: list[Event] = []
    table = Table(HouseRules.default(), journal.append)
    heard: list[type] = []
    feed = Feed(table, on_applied=lambda inp, caused: heard.append(type(getattr(inp, "message", inp))))
    shuffler = SimulatedShuffler(faults=Faults(legacy_1_0=True))

    def close_door_unheard(endpoint: PtyEndpoint) -> None:  # on the device's loop, all at once
        shuffler.set_faults(drop_rate=1.0)  # the FaultCleared frame goes nowhere
        shuffler.close_door()
        shuffler.set_faults(drop_rate=0.0)
        assert endpoint.link is not None
        endpoint.link.reset("firmware gave up on the FaultCleared")  # no unplug, no reboot

    async def main(endpoint: PtyEndpoint) -> None:
        on_message, on_event = feed.callbacks("shuffler")
        conn = DeviceConnection(endpoint.url, on_message, on_event, SessionConfig(host_name="feed-test"))
        try:
            await conn.open()
            await asyncio.to_thread(endpoint.call, shuffler.raise_fault, FaultCode.DOOR_OPEN)
            await until(lambda: table.shuffler.state == "fault", what="the Fault event")
            session = conn.session
            assert session is not None and session.stats.handshakes == 1
            await asyncio.to_thread(endpoint.call, close_door_unheard, endpoint)
            await until(lambda: session.stats.handshakes == 2, what="the handshake after the device's reset")
            await until(lambda: table.shuffler.state == "idle", what="the Status asked for after it")
            assert conn.session is session  # the same port all along: no LinkDown, nothing replugged
        finally:
            await conn.close()

    with PtyEndpoint(shuffler) as endpoint:
        asyncio.run(main(endpoint))
    assert FaultCleared not in heard and Status in heard  # the host learnt it from the Status alone
    recovered = [e for e in journal if e.reason is Reason.DEVICE_RECOVERED and e.source == "shuffler"]
    assert [(e.data["from"], e.data["to"]) for e in recovered] == [("fault", "idle")]


def test_connection_events_bring_a_device_up_and_down() -> None:
    table = Table(HouseRules.default(), lambda e: None, clock=FakeClock())
    feed = Feed(table)
    url = "serial:///dev/pts/9"
    shoe = ident(DeviceRole.SHOE, "shoe-reader")
    caused = feed.connection_event("shoe-reader", SessionEvent(SessionEventKind.CONNECTED, url, "", shoe))
    assert table.reader.state == "idle" and table.reader.ident == shoe
    assert [e.data["to"] for e in caused] == ["connecting", "idle"]
    for kind in (SessionEventKind.IDENT, SessionEventKind.STALE, SessionEventKind.FRESH, SessionEventKind.REBOOTED,
                 SessionEventKind.BAD_MESSAGE):
        assert feed.connection_event("shoe-reader", SessionEvent(kind, url, "", shoe)) == []
        assert table.reader.state == "idle"
    for kind in (SessionEventKind.LINK_FAILED, SessionEventKind.DISCONNECTED, SessionEventKind.INCOMPATIBLE):
        feed.connection_event("shoe-reader", SessionEvent(SessionEventKind.CONNECTED, url, "", shoe))
        feed.connection_event("shoe-reader", SessionEvent(kind, url))
        assert table.reader.state == "offline", kind


def test_nothing_the_tracker_raises_reaches_the_connection() -> None:
    table = Table(HouseRules.default(), lambda e: None, clock=FakeClock())
    feed = Feed(table)
    on_message, _ = feed.callbacks("no-such-device")
    with capture_logs() as logs:
        on_message(Heartbeat(1))  # refused by the table (unknown device): logged, not raised
    assert [(entry["event"], entry.get("input")) for entry in logs] == [("tracker_input_refused", "DeviceMessage")]
    assert "unknown device 'no-such-device'" in logs[0]["error"]

    def broken_sink(event: Event) -> None:
        raise RuntimeError("journal disk full")

    feed = Feed(Table(HouseRules.default(), broken_sink, clock=FakeClock()))
    with capture_logs() as logs:
        assert feed.message("shuffler", ident(DeviceRole.SHUFFLER, "shuffler")) == []
    failed = [entry for entry in logs if entry["event"] == "tracker_input_failed"]
    assert len(failed) == 1 and failed[0]["input"] == "DeviceMessage" and failed[0]["log_level"] == "error"


def test_run_ticks_makes_a_silent_device_stale() -> None:
    clock = FakeClock()
    table = Table(HouseRules.default(), lambda e: None, clock=clock, stale_after_s=3.0)
    applied: list[TableInput] = []
    feed = Feed(table, on_applied=lambda inp, caused: applied.append(inp))
    feed.connection_event("shuffler", SessionEvent(SessionEventKind.CONNECTED, "x", "",
                                                   ident(DeviceRole.SHUFFLER, "shuffler")))

    async def main() -> None:
        ticks = asyncio.create_task(feed.run_ticks(interval=0.001))
        try:
            await until(lambda: sum(isinstance(i, Tick) for i in applied) >= 3, what="three ticks applied")
            assert table.shuffler.state == "idle"  # ticking, but not silent for long yet
            clock.now += 3.5
            await until(lambda: table.shuffler.state == "stale", what="the shuffler stale after 3.5 s of silence")
        finally:
            ticks.cancel()
            await asyncio.gather(ticks, return_exceptions=True)

    asyncio.run(main())


def test_a_card_read_through_the_feed_is_the_same_input_as_a_recorded_one() -> None:
    """The feed adds nothing of its own: its records are the ones a recording replays."""
    table = Table(HouseRules.default(), lambda e: None, clock=FakeClock())
    seen: list[object] = []
    feed = Feed(table, on_applied=lambda inp, caused: seen.append(inp))
    msg = ident(DeviceRole.SHOE, "shoe-reader")
    feed.message("shoe-reader", msg)
    assert seen == [DeviceMessage("shoe-reader", msg)]
