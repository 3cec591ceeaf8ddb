"""A host as small as a link benchmark needs, for protocol 1.1 and 2.0 alike: the serial driver,
the Link (with 2.0's Framing2, or 1.x frames), the typed messages, and the handshake that
opens a session, with no DeviceConnection or DeviceSession above it.

Why: the host's session (firmware_bridge/session.py) speaks 1.x only so far, so 2.0 is measured
here, through the same code as 1.1 beside it. The 2.0 handshake is handshake2's HostHandshake
against the simulated shoe's 2.0 side; the shoe's key is taken as it is offered (trust on first
use: this measures what the protocol costs, not whom it trusts)."""
from __future__ import annotations

import asyncio
import itertools
from typing import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from drivers.serial_port import SerialTransport
from firmware_bridge.framing2 import Framing2
from firmware_bridge.handshake2 import IDENT2_TYPE, HostHandshake, decode_ident
from firmware_bridge.link import Link, LinkEvent, LinkState, discard_outcome
from firmware_bridge.messages import (
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Answer,
    Event,
    Hello,
    Ident,
    Message,
    Request,
    ResumeEvents,
    Status,
    StatusRequest,
    decode,
    encode,
)

HANDSHAKE_TIMEOUT = 5.0
REQUEST_TIMEOUT = 2.0


class LinkHost:
    """One device over a pty: :meth:`open` (link up, handshake, ResumeEvents(0)), :meth:`status`
    (a Request/Answer round trip), every other message handed to ``on_message`` (numbered
    events unwrapped, as the session does)."""

    def __init__(self, url: str, on_message: Callable[[Message], None], protocol: str) -> None:
        self.protocol = protocol
        self.framing = Framing2() if protocol == "2.0" else None
        self.wire_bytes = 0  # bytes the driver handed the link
        self._url = url
        self._on_message = on_message
        self._transport = SerialTransport(url)
        self._link: Link | None = None
        self._up = asyncio.Event()
        self._next_payload: asyncio.Future[bytes] | None = None  # the handshake waits for a reply
        self._answers: dict[int, asyncio.Future[Status]] = {}
        self._request_ids = itertools.count(1)

    async def open(self) -> None:
        host = self

        class Listener:
            def bytes_received(self, data: bytes) -> None:
                host.wire_bytes += len(data)
                assert host._link is not None
                host._link.bytes_received(data)

            def connection_lost(self, exc: Exception | None) -> None:
                pass

        await self._transport.open(Listener())
        self._link = Link(self._transport.write, self._payload, self._event, name=f"bench-{self.protocol}",
                          framing=self.framing)
        self._link.start()
        await asyncio.wait_for(self._up.wait(), HANDSHAKE_TIMEOUT)
        if self.framing is None:
            reply = await self._exchange(encode(Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR, "benchmarks/link.py")))
            if not isinstance(decode(reply), Ident):
                raise RuntimeError(f"{self._url}: Hello answered with {decode(reply)!r}")
        else:
            await self._shake_hands_2_0()
        await self._link.send(encode(ResumeEvents(0)))  # nothing journaled: the device forgets nothing

    async def _shake_hands_2_0(self) -> None:
        assert self._link is not None and self.framing is not None
        offered: list[bytes] = []

        def enrolled(unit: tuple[str, str, str]) -> bytes | None:  # trust on first use (see the module)
            return offered[0] if offered else None

        handshake = HostHandshake(Ed25519PrivateKey.generate(), "benchmarks/link.py", enrolled)
        ident_bytes = await self._exchange(handshake.hello())
        if ident_bytes[:1] != bytes([IDENT2_TYPE]):
            raise RuntimeError(f"{self._url}: HELLO2 answered with {ident_bytes[:16].hex(' ')}: not a 2.0 device")
        offered.append(decode_ident(ident_bytes).device_key)
        _, keys, proof = handshake.on_ident(ident_bytes)
        self.framing.install(keys)  # PROOF2 is the session's first sealed frame
        await self._link.send(proof)

    async def _exchange(self, payload: bytes) -> bytes:
        assert self._link is not None
        self._next_payload = asyncio.get_running_loop().create_future()
        await self._link.send(payload)
        reply = await asyncio.wait_for(self._next_payload, HANDSHAKE_TIMEOUT)
        self._next_payload = None
        return reply

    async def status(self) -> Status:
        assert self._link is not None
        request_id = next(self._request_ids) % 0x10000
        answer: asyncio.Future[Status] = asyncio.get_running_loop().create_future()
        self._answers[request_id] = answer
        self._link.send(encode(Request(request_id, StatusRequest()))).add_done_callback(discard_outcome)
        try:
            return await asyncio.wait_for(answer, REQUEST_TIMEOUT)
        finally:
            self._answers.pop(request_id, None)

    def close(self) -> None:
        if self._link is not None:
            self._link.close()
        self._transport.close()

    def _event(self, event: LinkEvent, detail: str) -> None:
        assert self._link is not None
        if self._link.state is LinkState.UP:
            self._up.set()

    def _payload(self, payload: bytes) -> None:
        if self._next_payload is not None and not self._next_payload.done():
            self._next_payload.set_result(payload)
            return
        msg = decode(payload)
        if isinstance(msg, Answer):
            answer = self._answers.get(msg.request_id)
            if answer is not None and not answer.done() and isinstance(msg.message, Status):
                answer.set_result(msg.message)
            return
        self._on_message(msg.message if isinstance(msg, Event) else msg)

