"""A simulated device asked to speak protocol 2.0, over a real pty: it proves its identity key
(the one in its memory), and each of its attack switches is refused by a host speaking 2.0
(docs/protocol.md §7-§9); a device not asked to still speaks 1.1."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from drivers.serial_port import SerialTransport
from firmware_bridge.errors import DeviceNotTrusted
from firmware_bridge.framing2 import Decoder2Stats, Framing2
from firmware_bridge.handshake2 import HostHandshake, TrustFailure, raw_public_key
from firmware_bridge.link import Link, LinkState, discard_outcome
from firmware_bridge.messages import (
    Answer,
    ClearFault,
    FaultCode,
    Refused,
    Request,
    ResumeEvents,
    Status,
    StatusRequest,
    decode,
    encode,
)
from simulators.faults import Faults
from simulators.protocol2 import Protocol2
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe

from tests.support.poll import until

pytestmark = pytest.mark.timeout(60)

HOST_IDENTITY = Ed25519PrivateKey.from_private_bytes(bytes([7]) * 32)
HOST_KEY = raw_public_key(HOST_IDENTITY.public_key())


@dataclass
class Host:
    """A host that speaks 2.0 on a real serial port: a Link with 2.0 framing and a handshake."""

    link: Link
    framing: Framing2
    transport: SerialTransport
    received: list[bytes] = field(default_factory=list)

    async def send_and_wait(self, payload: bytes, count: int) -> bytes:
        before = len(self.received)
        await self.link.send(payload)
        await until(lambda: len(self.received) >= before + count)
        return self.received[before + count - 1]

    @property
    def framing_stats(self) -> Decoder2Stats:
        stats = self.link.stats.framing
        assert isinstance(stats, Decoder2Stats)
        return stats

    def close(self) -> None:
        self.link.close()
        self.transport.close()


async def open_host(url: str) -> Host:
    framing = Framing2()
    transport = SerialTransport(url)
    received: list[bytes] = []
    link: Link

    class Listener:
        def bytes_received(self, data: bytes) -> None:
            link.bytes_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            pass

    await transport.open(Listener())
    link = Link(transport.write, received.append, name="host", framing=framing)
    link.start()
    await until(lambda: link.state is LinkState.UP)
    return Host(link, framing, transport, received)


async def shake_hands(host: Host, enrolled: dict, *, acknowledged: bool = True) -> None:
    """HELLO2, IDENT2 checked against ``enrolled``, keys installed, PROOF2; then ResumeEvents
    (``acknowledged``: waiting for the device's ACK of each)."""
    host.framing.clear()
    handshake = HostHandshake(HOST_IDENTITY, "table-7", enrolled.get)
    ident_bytes = await host.send_and_wait(handshake.hello(), 1)
    _, keys, proof = handshake.on_ident(ident_bytes)
    host.framing.install(keys)
    sent = [host.link.send(proof), host.link.send(encode(ResumeEvents(0)))]
    if acknowledged:
        await asyncio.gather(*sent)
    else:
        for future in sent:
            future.add_done_callback(discard_outcome)


def endpoint(faults: str = "", enrolled_host: bytes | None = HOST_KEY) -> PtyEndpoint:
    shoe = SimulatedShoe(heartbeat_s=0, faults=Faults.parse(faults))
    return PtyEndpoint(shoe, protocol2=Protocol2(enrolled_host_key=enrolled_host))


def enrolled_as(shoe: SimulatedShoe) -> dict:
    return {("shoe", shoe.MODEL, shoe.serial): raw_public_key(shoe.identity_key.public_key())}


def run_with_host(ep: PtyEndpoint, body) -> None:
    async def main() -> None:
        host = await open_host(ep.url)
        try:
            await body(host)
        finally:
            host.close()

    with ep:
        asyncio.run(main())


def status_of(payload: bytes) -> Status:
    msg = decode(payload)
    inner = msg.message if isinstance(msg, Answer) else msg
    assert isinstance(inner, Status), inner
    return inner


def test_an_enrolled_2_0_shoe_proves_itself_and_speaks_in_tagged_frames() -> None:
    ep = endpoint()

    async def body(host: Host) -> None:
        await shake_hands(host, enrolled_as(ep.device))
        answer = await host.send_and_wait(encode(Request(7, StatusRequest())), 1)
        assert status_of(answer).cards_held == 0
        stats = host.framing_stats
        assert stats.tagged_frames > 0 and stats.tag_errors == stats.replayed == 0
        assert ep.protocol2 is not None and ep.protocol2.host_enrolled

    run_with_host(ep, body)


@pytest.mark.parametrize(("switch", "failure"), [
    ("unknown_key", TrustFailure.UNKNOWN_KEY),
    ("cloned_serial", TrustFailure.KEY_MISMATCH),
    ("downgrade_offer", TrustFailure.DOWNGRADE),
])
def test_each_identity_attack_is_refused_by_name(switch: str, failure: TrustFailure) -> None:
    ep = endpoint(switch)

    async def body(host: Host) -> None:
        with pytest.raises(DeviceNotTrusted) as refused:
            await shake_hands(host, enrolled_as(ep.device))
        assert refused.value.failure is failure

    run_with_host(ep, body)


def test_forged_tags_are_refused_and_nothing_is_taken() -> None:
    ep = endpoint("forged_tag")

    async def body(host: Host) -> None:
        await shake_hands(host, enrolled_as(ep.device), acknowledged=False)  # its ACKs are forged too
        host.link.send(encode(Request(7, StatusRequest()))).add_done_callback(discard_outcome)
        await until(lambda: host.framing_stats.tag_errors >= 3)
        assert len(host.received) == 1  # the IDENT2 (plain, before the session): nothing after it

    run_with_host(ep, body)


def test_a_replayed_capture_of_the_session_before_is_refused() -> None:
    ep = endpoint()

    async def body(host: Host) -> None:
        enrolled = enrolled_as(ep.device)
        await shake_hands(host, enrolled)
        await host.send_and_wait(encode(Request(7, StatusRequest())), 1)
        ep.set_faults(replayed_capture=True)
        host.link.reset("new session")
        await until(lambda: host.link.state is LinkState.UP)
        taken = len(host.received)
        await shake_hands(host, enrolled)
        await until(lambda: host.framing_stats.tag_errors >= 2)  # the old session's frames, under the new keys
        answer = await host.send_and_wait(encode(Request(8, StatusRequest())), 1)
        assert status_of(answer).cards_held == 0
        assert len(host.received) == taken + 2  # IDENT2 and the answer: nothing of the capture

    run_with_host(ep, body)


@pytest.mark.parametrize(("faults", "enrolled_host"), [("rogue_host", HOST_KEY), ("", None), ("", bytes(32))],
                         ids=["rogue_host", "no host enrolled", "another host enrolled"])
def test_a_host_the_device_was_not_enrolled_with_gets_no_technician_command(faults: str,
                                                                            enrolled_host: bytes | None) -> None:
    ep = endpoint(faults, enrolled_host=enrolled_host)

    async def body(host: Host) -> None:
        await shake_hands(host, enrolled_as(ep.device))
        answer = decode(await host.send_and_wait(encode(Request(9, ClearFault(FaultCode.JAM))), 1))
        assert isinstance(answer, Answer) and isinstance(answer.message, Refused)
        assert answer.message.reason == "host not enrolled with this device"
        status = await host.send_and_wait(encode(Request(10, StatusRequest())), 1)
        assert status_of(status).cards_held == 0  # the session itself goes on

    run_with_host(ep, body)


def test_nothing_is_taken_before_the_host_proves_itself() -> None:
    ep = endpoint()

    async def body(host: Host) -> None:
        answer = decode(await host.send_and_wait(encode(Request(1, StatusRequest())), 1))
        assert isinstance(answer, Refused) and "HELLO2 first" in answer.reason

    run_with_host(ep, body)
