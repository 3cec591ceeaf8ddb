"""The host's side of protocol 2.0 over a real pty, against the simulated devices speaking it:
a DeviceConnection given a HostTrust proves the device, then runs 1.1's session over tagged
frames (ResumeEvents, numbered events, request ids, Status after the handshake); each attack
is refused as DeviceNotTrusted naming what failed, with nothing handed on, and the refusal
stands until retry_trust (docs/protocol.md §8.1)."""
from __future__ import annotations

import asyncio

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from drivers.reconnect import Backoff
from firmware_bridge.connection import DeviceConnection
from drivers.errors import PortClosed
from firmware_bridge.errors import DeviceNotTrusted
from firmware_bridge.framing2 import Decoder2Stats
from firmware_bridge.handshake2 import TrustFailure, raw_public_key
from firmware_bridge.host_trust import HostTrust
from firmware_bridge.messages import CardRead, Message, Status, StatusRequest
from firmware_bridge.session import SessionConfig, SessionEvent
from firmware_bridge.session import SessionEventKind as K
from simulators.faults import Faults
from simulators.protocol2 import Protocol2
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(60)

HOST_IDENTITY = Ed25519PrivateKey.from_private_bytes(bytes([9]) * 32)
HOST_KEY = raw_public_key(HOST_IDENTITY.public_key())
RETRY = Backoff(initial=0.05, cap=0.2)


def shoe_endpoint(faults: str = "", *, protocol2: bool = True) -> PtyEndpoint:
    shoe = SimulatedShoe(heartbeat_s=0, faults=Faults.parse(faults))
    return PtyEndpoint(shoe, protocol2=Protocol2(enrolled_host_key=HOST_KEY) if protocol2 else None)


def trust_store(*shoes: SimulatedShoe) -> dict[tuple[str, str, str], bytes]:
    return {("shoe", s.MODEL, s.serial): raw_public_key(s.identity_key.public_key()) for s in shoes}


def config(enrolled: dict[tuple[str, str, str], bytes], tag_failures_refused: int = 16) -> SessionConfig:
    return SessionConfig(stale_after=10.0, trust=HostTrust(HOST_IDENTITY, enrolled.get, tag_failures_refused))


class Host:
    """A DeviceConnection speaking 2.0, and what it reported."""

    def __init__(self, url: str, session_config: SessionConfig) -> None:
        self.indexed: list[tuple[int, Message]] = []
        self.messages: list[Message] = []
        self.events: list[SessionEvent] = []
        self.conn = DeviceConnection(url, self.messages.append, self.events.append, session_config,
                                     journaled_index=lambda: 0, backoff=RETRY,
                                     on_indexed=lambda i, m: self.indexed.append((i, m)))

    def refusals(self) -> list[SessionEvent]:
        return [e for e in self.events if e.kind is K.NOT_TRUSTED]

    def handed_on(self) -> int:
        return len(self.indexed) + len(self.messages)


def test_an_enrolled_shoe_runs_the_1_1_session_over_tagged_frames() -> None:
    endpoint = shoe_endpoint()
    shoe = endpoint.device

    async def main() -> None:
        host = Host(endpoint.url, config(trust_store(shoe)))
        try:
            ident = await host.conn.open()
            assert (ident.serial, ident.protocol_major, ident.protocol_minor) == (shoe.serial, 2, 0)
            session = host.conn.session
            assert session is not None and session.authenticated and session.speaks_1_1
            assert host.conn.resumed_from == 0  # ResumeEvents said
            await until(lambda: any(isinstance(m, Status) for m in host.messages))  # asked after the handshake
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 3)
            await until(lambda: sum(isinstance(m, CardRead) for _, m in host.indexed) == 3)
            assert [i for i, _ in host.indexed] == sorted(i for i, _ in host.indexed)
            status = await host.conn.request(StatusRequest(), Status)  # a request id, answered by it
            assert status.cards_held == 52 - 3
            stats = session.link.framing_stats
            assert isinstance(stats, Decoder2Stats) and stats.tagged_frames > 5 and stats.errors == 0
            assert endpoint.protocol2 is not None and endpoint.protocol2.host_enrolled
            assert host.refusals() == []
        finally:
            await host.conn.close()

    with endpoint:
        run(main())


@pytest.mark.parametrize(("switch", "failure"), [
    ("unknown_key", TrustFailure.UNKNOWN_KEY),
    ("cloned_serial", TrustFailure.KEY_MISMATCH),
    ("downgrade_offer", TrustFailure.DOWNGRADE),
])
def test_each_identity_attack_is_refused_by_name_and_open_says_so(switch: str, failure: TrustFailure) -> None:
    endpoint = shoe_endpoint(switch)

    async def main() -> None:
        host = Host(endpoint.url, config(trust_store(endpoint.device)))
        with pytest.raises(DeviceNotTrusted) as refused:
            await host.conn.open()
        assert refused.value.failure is failure
        [event] = host.refusals()
        assert event.failure is failure and failure.value in event.detail
        # the key a technician may enrol is given only when the device proved it holds it
        proven = failure in (TrustFailure.UNKNOWN_KEY, TrustFailure.KEY_MISMATCH)
        assert (event.proven_key is not None) is proven
        assert host.handed_on() == 0

    with endpoint:
        run(main())


async def refused_while_kept_up(host: Host, failure: TrustFailure) -> SessionEvent:
    await host.conn.start()
    await until(lambda: host.refusals(), timeout=30)
    [event] = host.refusals()
    assert event.failure is failure, event
    with pytest.raises(PortClosed, match="not trusted"):
        await host.conn.request(StatusRequest(), Status)
    return event


def test_forged_tags_are_refused_and_no_read_is_handed_on() -> None:
    endpoint = shoe_endpoint("forged_tag")
    shoe = endpoint.device

    async def main() -> None:
        host = Host(endpoint.url, config(trust_store(shoe)))
        try:
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 2)
            await refused_while_kept_up(host, TrustFailure.BAD_TAG)
            assert not any(isinstance(m, CardRead) for _, m in host.indexed)
            assert host.handed_on() == 0
        finally:
            await host.conn.close()

    with endpoint:
        run(main())


def test_a_replayed_capture_of_the_session_before_is_refused() -> None:
    endpoint = shoe_endpoint()
    shoe = endpoint.device

    async def main() -> None:
        # the session before is a few frames long: its replay is shorter than the default run
        host = Host(endpoint.url, config(trust_store(shoe), tag_failures_refused=4))
        try:
            await host.conn.open()
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 2)
            await until(lambda: len(host.indexed) >= 3)  # ShoeLoaded and two reads
            taken = len(host.indexed)
            endpoint.set_faults(replayed_capture=True)
            session = host.conn.session
            assert session is not None
            session.link.reset("a new session")  # the device replays the old one into the new
            await until(lambda: host.refusals(), timeout=30)
            assert host.refusals()[0].failure is TrustFailure.BAD_TAG
            assert len(host.indexed) == taken  # nothing of the capture handed on
        finally:
            await host.conn.close()

    with endpoint:
        run(main())


def test_a_device_speaking_only_1_1_is_refused_as_a_downgrade_naming_it() -> None:
    endpoint = shoe_endpoint(protocol2=False)
    shoe = endpoint.device

    async def main() -> None:
        host = Host(endpoint.url, config(trust_store(shoe)))
        try:
            endpoint.call(shoe.load, full_shoe(1))
            event = await refused_while_kept_up(host, TrustFailure.DOWNGRADE)
            assert shoe.serial in event.detail and "enrolled with a 2.0 identity key" in event.detail
            assert event.ident is None and host.handed_on() == 0  # its 1.1 IDENT is not taken as who answers
        finally:
            await host.conn.close()

    with endpoint:
        run(main())


def test_an_unenrolled_1_1_device_is_refused_too() -> None:
    endpoint = shoe_endpoint(protocol2=False)

    async def main() -> None:
        host = Host(endpoint.url, config({}))
        try:
            event = await refused_while_kept_up(host, TrustFailure.DOWNGRADE)
            assert "not enrolled, and this device is not configured for protocol 1.x" in event.detail
        finally:
            await host.conn.close()

    with endpoint:
        run(main())


def test_the_refusal_stands_until_retry_trust_and_an_enrolled_device_then_connects() -> None:
    endpoint = shoe_endpoint()
    shoe = endpoint.device
    enrolled: dict[tuple[str, str, str], bytes] = {}

    async def main() -> None:
        host = Host(endpoint.url, config(enrolled))
        try:
            event = await refused_while_kept_up(host, TrustFailure.UNKNOWN_KEY)
            await asyncio.sleep(0.5)  # several backoff periods: no handshake asked again meanwhile
            assert len(host.refusals()) == 1 and not host.conn.connected
            assert event.ident is not None and event.proven_key is not None
            enrolled[(event.ident.role.name.lower(), event.ident.model, event.ident.serial)] = event.proven_key
            host.conn.retry_trust()
            ident = await host.conn.wait_connected(timeout=10)
            assert ident.serial == shoe.serial and host.conn.refusal is None
            assert (await host.conn.request(StatusRequest(), Status)).cards_held == 0
        finally:
            await host.conn.close()

    with endpoint:
        run(main())


def test_a_reboot_mid_session_is_a_new_2_0_handshake_and_events_resume_after_the_journaled() -> None:
    endpoint = shoe_endpoint()
    shoe = endpoint.device

    async def main() -> None:
        host = Host(endpoint.url, config(trust_store(shoe)))
        try:
            await host.conn.open()
            endpoint.call(shoe.load, full_shoe(1))
            endpoint.call(shoe.deal, 2)
            await until(lambda: len(host.indexed) >= 3)
            endpoint.call(shoe.reboot)
            await until(lambda: any(e.kind is K.REBOOTED for e in host.events))
            await until(lambda: host.conn.connected)
            endpoint.call(shoe.deal, 1)
            await until(lambda: sum(isinstance(m, CardRead) for _, m in host.indexed) == 3)
            assert host.refusals() == [] and [e.kind for e in host.events].count(K.CONNECTED) == 2
            session = host.conn.session
            assert session is not None and session.authenticated
        finally:
            await host.conn.close()

    with endpoint:
        run(main())
