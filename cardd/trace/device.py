"""The device a replay serves: a simulated device that is a traced one (``cardctl replay`` serves
it on a pty, ``cardbench replay`` plays a recorded scenario through it into a fresh daemon)."""
from __future__ import annotations

import asyncio
import collections

from cardd.config import rules_file
from cardd.trace.format import Answered, Said, Trace, switches
from core.errors import CarddError
from devices.game.rules import load_rules
from firmware_bridge.messages import (EVENT_MESSAGES, CardRead, CountersRequest, DeviceRole, Heartbeat, Hello, Ident,
                                      Message, SelfTest, ShoeLoaded, ShuffleComplete, StatusRequest, UnreadableCard)
from simulators.device import SimulatedDevice
from simulators.faults import Faults

#: what a host asks that the replaying device answers itself (its identity, status, counters,
#: self-test, heartbeats): the answers to every other request are recorded
ANSWERED_BY_REPLAY = (Hello, StatusRequest, Heartbeat, CountersRequest, SelfTest)
#: the longest a replay waits for the host to take one traced message
TAKE_TIMEOUT_S = 10.0


class TraceDevice(SimulatedDevice):
    """A simulated device that is a traced one: its identity as captured (protocol version
    included), and the recorded answer to each request the host sends (once each, in order).

    ``play(speed)`` sends the traced messages by itself once a host has said HELLO (at the
    recorded pace times ``speed``; None: as fast as the link acknowledges them); without it
    the caller sends each one with ``say`` (cardbench replay, which interleaves the devices and
    the API commands)."""

    ROLE = DeviceRole.SHOE  # the traced device's, in the class ``traced`` makes
    MODEL = "trace"

    @classmethod
    def traced(cls, trace: Trace, role: str) -> TraceDevice:
        """The device ``role`` of ``trace`` (a class of its own: role, model and firmware are class-wide)."""
        info = trace.devices[role]
        kind = type(f"Traced{role.title()}", (cls,), {"ROLE": DeviceRole[info["role"].upper()],
                                                       "MODEL": str(info["model"]),
                                                       "DEFAULT_FIRMWARE": str(info["firmware"])})
        return kind(trace, role)

    def __init__(self, trace: Trace, role: str) -> None:
        info = trace.devices[role]
        self.major, self.minor = (int(part) for part in str(info["protocol"]).split(".", 1))
        self.said = [(e.t, e.message) for e in trace.entries if isinstance(e, Said) and e.device == role]
        self.answers: dict[str, collections.deque[Answered]] = {}
        for entry in trace.entries:
            if isinstance(entry, Answered) and entry.device == role:
                self.answers.setdefault(entry.request, collections.deque()).append(entry)
        self.speed: float | None = None
        self.playing = self.autoplay = False
        #: the cards each load of this shoe held (its Status counts them, as the traced shoe's did)
        self.loads = collections.deque(_load_sizes(trace, role))
        self.load_size: int | None = None
        self.out = 0  # the last card index said since the load
        faults = Faults(**switches(str(info.get("faults", "")))).replace(legacy_1_0=self.minor == 0)
        super().__init__(str(info["serial"]), faults=faults, heartbeat_s=1.0)

    def ident(self) -> Ident:
        return Ident(self.ROLE, self.MODEL, self.serial, self.firmware_version, self.major, self.minor, self.boot_id)

    def handle(self, msg: Message) -> list[Message]:
        queue = self.answers.get(type(msg).__name__)
        if queue and not isinstance(msg, ANSWERED_BY_REPLAY):
            answer = queue.popleft()
            for emitted in answer.emitted:
                self.emit(emitted)
            return list(answer.replies)
        if isinstance(msg, Hello) and self.autoplay and not self.playing:
            self.playing = True
            self.spawn(self._play())
        return super().handle(msg)

    def play(self, speed: float | None) -> None:
        self.autoplay, self.speed = True, speed

    async def _play(self) -> None:
        await asyncio.sleep(0.05)  # the host's session is up once it has our IDENT
        last = 0.0
        for at, msg in self.said:
            if self.speed is not None and at > last:
                await asyncio.sleep((at - last) / self.speed)
            last = at
            self.emit(msg)
            await self.flush()

    async def say(self, msg: Message, wait: bool = True) -> bool:
        """Send one traced message; with ``wait``, until the host has it (an event of protocol 1.1:
        until the host confirms it journaled). False when that took longer than TAKE_TIMEOUT_S."""
        self.emit(msg)
        if not wait:
            return True
        try:
            async with asyncio.timeout(TAKE_TIMEOUT_S):
                while True:  # polled: the endpoint's flush wakes on what the host sends, not on its ACKs
                    try:
                        await asyncio.wait_for(self.flush(), 0.005)
                        break
                    except TimeoutError:
                        continue
                if type(msg) in EVENT_MESSAGES and self.speaks_1_1:
                    index = self.events.last_index
                    while self.events.confirmed < index:
                        await asyncio.sleep(0.002)
        except TimeoutError:
            return False
        return True

    def emit(self, msg: Message) -> None:
        if isinstance(msg, ShoeLoaded):
            self.load_size, self.out = (self.loads.popleft() if self.loads else None), 0
        elif isinstance(msg, (CardRead, UnreadableCard)):
            self.out = max(self.out, msg.index)
        super().emit(msg)

    def cards_held(self) -> int:
        """What the traced shoe held as the replay stands: the load less the cards it said left it
        (the daemon asks every device's Status after each handshake and checks a shoe's count)."""
        return 0 if self.load_size is None else max(0, self.load_size - self.out)


def _load_sizes(trace: Trace, role: str) -> list[int | None]:
    """The cards of each ShoeLoaded ``role`` said in ``trace``: the stack the shuffler counted last
    (ShuffleComplete) before it; when none did, the full decks of the trace's rules if they have the
    dealer shuffle by hand (the shoe is loaded with them: docs/deal-tracking.md), else None (not known)."""
    counted: int | None = _hand_shuffled_cards(trace)
    sizes: list[int | None] = []
    for entry in trace.entries:
        if isinstance(entry, Said) and isinstance(entry.message, ShuffleComplete):
            counted = entry.message.card_count
        elif isinstance(entry, Said) and entry.device == role and isinstance(entry.message, ShoeLoaded):
            sizes.append(counted)
    return sizes


def _hand_shuffled_cards(trace: Trace) -> int | None:
    """The cards of a shoe shuffled by hand under the trace's rules (its ``rules``: a seed casino's name or
    a path beside the trace); None when they have a shuffler count the shoe, or are not known."""
    name = trace.header.get("rules")
    if not isinstance(name, str):
        return None
    try:
        rules = load_rules(rules_file(name, trace.path.parent))
    except CarddError:
        return None
    return 52 * rules.decks if rules.shoe.shuffle == "hand" else None


def trace_device(trace: Trace, speed: float | None, role: str | None = None) -> TraceDevice:
    """The traced device ``role`` (default: the trace's first) playing its messages by itself."""
    device = TraceDevice.traced(trace, role or next(iter(trace.devices)))
    device.play(speed)
    return device
