"""A device's budget of status messages at the connection (firmware_bridge.flooding): status past it
is left out and counted, one FLOODING event says so until the device stays within budget
``Backoff.stable``; events and the answers the host waits for always get through."""
from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from core.cards import Card, Orientation
from drivers.reconnect import Backoff
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.messages import CardRead, DeviceState, Heartbeat, Message, Refused, Status, StatusRequest
from firmware_bridge.session import SessionConfig, SessionEvent
from firmware_bridge.session import SessionEventKind as K

from tests.firmware_bridge.fb_device import FAST, DeviceLine, session_of
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)
CONFIG = SessionConfig(link=FAST, handshake_timeout=0.5, stale_after=5.0, status_window_s=0.25)
BUDGET = CONFIG.status_budget
STABLE_S = 1.0  # longer than a window, as the daemon's (5 s against 1 s)
#: the Status messages the device sends unasked in a flood
FLOOD = 300
SAYS = re.compile(rf"sent (\d+) status messages within 0\.25 s, past its budget of {BUDGET}: (\d+) left out "
                  r"\((\d+) Status\); .* until it stays within budget 1 s; a technician looks at the device")


def flooding(events: list[SessionEvent]) -> list[SessionEvent]:
    return [e for e in events if e.kind is K.FLOODING]


@dataclass
class Connected:
    """A connection to a simulated device line, handshaken; ``start``: the messages handed on by then."""
    line: DeviceLine
    conn: DeviceConnection
    messages: list[Message] = field(default_factory=list)
    events: list[SessionEvent] = field(default_factory=list)
    start: int = 0


@asynccontextmanager
async def connected(name: str) -> AsyncIterator[Connected]:
    line = DeviceLine(name)
    messages: list[Message] = []
    events: list[SessionEvent] = []
    conn = DeviceConnection(line.url, messages.append, events.append, CONFIG,
                            backoff=Backoff(initial=0.01, cap=0.05, stable=STABLE_S))
    try:
        await conn.open()
        await until(lambda: any(isinstance(m, Status) for m in messages), what="the handshake's Status")
        yield Connected(line, conn, messages, events, len(messages))
    finally:
        await conn.close()
        line.close()


def test_status_past_the_budget_is_left_out_counted_and_one_flooding_event_events_and_answers_never() -> None:
    async def main() -> None:
        async with connected("flood") as up:
            conn, device, messages, events, start = up.conn, up.line.device, up.messages, up.events, up.start

            def statuses() -> list[Status]:
                """The Status messages handed on since the flood began (the request's answer among them)."""
                return [m for m in messages[start:] if isinstance(m, Status)]

            for n in range(1, FLOOD + 1):
                device.send(Status(DeviceState.IDLE, 0, n, 0))
                if n % 6 == 0:  # a 1.0 device's card read among them: an event
                    device.send(CardRead(n // 6, Card.parse("AS"), Orientation.FACE_DOWN, n))
            # an answer the host waits for is never left out (a 1.0 device's: the next Status, §3 step 3)
            assert isinstance(await conn.request(StatusRequest(), Status), Status)
            await until(lambda: flooding(events), what="FLOODING")
            [event] = flooding(events)
            said = SAYS.search(event.detail)
            assert said is not None, event.detail
            sent, left_out, of_status = map(int, said.groups())
            assert sent - BUDGET == left_out == of_status > 0
            await until(lambda: sum(isinstance(m, CardRead) for m in messages) == FLOOD // 6, what="every read")
            assert [m.index for m in messages if isinstance(m, CardRead)] == list(range(1, FLOOD // 6 + 1))
            stats = conn.stats
            assert len(statuses()) + stats.status_left_out == FLOOD + 1 and stats.status_left_out >= left_out
            assert session_of(conn).stats.status_left_out == stats.status_left_out and stats.floods == 1

            for n in range(FLOOD + 1, 2 * FLOOD + 1):  # again at once: the same flood, no second event
                device.send(Status(DeviceState.IDLE, 0, n, 0))
            await until(lambda: len(statuses()) + conn.stats.status_left_out == 2 * FLOOD + 1, what="taken")
            await asyncio.sleep(CONFIG.status_window_s * 1.5)  # its window ends
            assert len(flooding(events)) == 1 and conn.stats.floods == 1

            delivered_before, left_before = len(statuses()), conn.stats.status_left_out
            for n in range(2 * FLOOD + 1, 2 * FLOOD + 9):  # within budget for longer than STABLE_S
                device.send(Status(DeviceState.IDLE, 0, n, 0))
                await asyncio.sleep(STABLE_S / 4)
            await until(lambda: len(statuses()) == delivered_before + 8, what="the calm ones")
            assert conn.stats.status_left_out == left_before  # none of them left out
            for n in range(2 * FLOOD + 9, 3 * FLOOD + 9):  # a new flood: reported again
                device.send(Status(DeviceState.IDLE, 0, n, 0))
            await until(lambda: len(flooding(events)) == 2, what="the second FLOODING")
            assert conn.stats.floods == 2 and conn.stats.status_left_out > left_before

    run(main())


def test_every_kind_of_status_shares_the_budget_an_unasked_ident_of_the_same_boot_included() -> None:
    """Heartbeats, a Refused nobody asked for and the same boot's IDENT again, unasked, share the one
    budget: each would otherwise be handed on (and journaled by the daemon) however many came."""
    async def main() -> None:
        async with connected("mixed") as up:
            conn, device, messages, events, start = up.conn, up.line.device, up.messages, up.events, up.start
            for n in range(100):
                device.send(Heartbeat(n))
                device.send(Refused(0x7F, "nobody asked"))
                device.send(device.ident())  # the same boot: nothing to shake hands again for
            await until(lambda: flooding(events), what="FLOODING")
            await until(lambda: len(messages) - start + conn.stats.status_left_out == 300, what="all taken")
            [event] = flooding(events)
            for name in ("Heartbeat", "Refused", "Ident"):
                assert re.search(rf"\d+ {name}\b", event.detail), event.detail
            assert session_of(conn).stats.handshakes == 1  # the same boot's IDENT asked for no handshake

    run(main())
