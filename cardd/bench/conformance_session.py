"""The conformance suite as a host: what it knows of the device under test, and the two
handshakes (1.1's HELLO/IDENT, 2.0's HELLO2/IDENT2/PROOF2 built from
:mod:`firmware_bridge.handshake2`'s pieces, so a refusal is a finding the suite reports
and the session goes on where it can)."""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from cardd.bench.conformance_wire import ANSWER_TIMEOUT, SEND_TRIES, Blocked, Failed, HostLink, Port
from firmware_bridge.errors import TagMismatch
from firmware_bridge.framing import FrameKind
from firmware_bridge.framing2 import Framing2, SessionKeys
from firmware_bridge.handshake2 import (
    CHALLENGE_LEN,
    PROTOCOL_2,
    SIGNATURE_LEN,
    Hello2,
    Ident2,
    TrustFailure,
    decode_ident,
    derive_session_keys,
    device_signed_bytes,
    encode_hello,
    encode_proof,
    host_signed_bytes,
    raw_public_key,
)
from firmware_bridge.messages import (
    Answer,
    Heartbeat,
    Hello,
    Ident,
    Message,
    MessageDecodeError,
    Refused,
    Request,
    ResumeEvents,
    decode,
    encode,
)

HOST_NAME = "cardbench conformance"
#: makes the device number some events (a shuffler: StartShuffle; a simulated shoe: cards dealt)
MakeEvents = Callable[[], Awaitable[None]]


@dataclass
class DeviceUnderTest:
    """What the suite is told or learns of the device: its protocol, the host identity it was
    enrolled with, the key enrolled for it, and how to make it number events."""

    url: str
    protocol: str = ""  # "1.1" or "2.0", found by the suite when not given
    host_identity: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    device_key: bytes | None = None  # the key enrolled for the device (None: not checked)
    enrolled_serial: str | None = None  # the serial it was enrolled under
    make_events: MakeEvents | None = None
    #: every 2.0 session's keys so far: a frame that verifies under an earlier one is a replay
    sessions: list[SessionKeys] = field(default_factory=list)
    port: Port | None = None
    link: HostLink | None = None  # the link reading the port now
    #: why no 2.0 session can be had with this device (its tags fail): the checks that need one are blocked
    no_session: str | None = None


@dataclass
class Handshake2:
    """One 2.0 handshake as the suite saw it."""

    hello: bytes
    ident_bytes: bytes
    ident: Ident2
    keys: SessionKeys
    proof_ok: bool
    refusal: TrustFailure | None  # what a host would refuse the device for (None: trusted)
    detail: str


class Session:
    """A link to the device and the messages on it."""

    def __init__(self, dut: DeviceUnderTest, link: HostLink) -> None:
        self.dut = dut
        self.link = link
        self.ident: Ident | Ident2 | None = None
        self.handshake2: Handshake2 | None = None
        self.seen: list[Message] = []  # every message the device sent, in order
        self.request_id = 0x0100

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.link.stop()  # its reader would take the next link's frames off the port

    @property
    def v2(self) -> bool:
        return self.link.framing is not None

    async def send(self, msg: Message | bytes) -> bytes:
        return await self.link.send(msg if isinstance(msg, bytes) else encode(msg))

    async def next_message(self, timeout: float = ANSWER_TIMEOUT) -> Message | None:
        payload = await self.link.receive(timeout)
        if payload is None:
            return None
        try:
            msg = decode(payload)
        except MessageDecodeError as exc:
            raise Failed(f"the device sent a payload that is no message: {exc.reason}", payload) from None
        self.seen.append(msg)
        return msg

    async def expect(self, want: type[Message] | tuple[type[Message], ...], timeout: float = ANSWER_TIMEOUT,
                     what: str = "") -> Message:
        """The next message of type ``want`` (others are kept in :attr:`seen`), or Failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            msg = await self.next_message(left)
            if isinstance(msg, want):
                return msg
        names = want.__name__ if isinstance(want, type) else "/".join(t.__name__ for t in want)
        raise Failed(f"no {names} within {timeout:g} s{what}")

    async def request(self, msg: Message, want: type[Message], timeout: float = ANSWER_TIMEOUT) -> Answer:
        """``msg`` as a Request with a new id; the Answer carrying that id."""
        if isinstance(self.ident, Ident) and self.ident.protocol_minor == 0:
            return await self._bare_request(msg, want, timeout)
        self.request_id += 1
        rid = self.request_id
        await self.send(Request(rid, msg))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            got = await self.next_message(left)
            if isinstance(got, Answer) and got.request_id == rid:
                return got
        raise Failed(f"no Answer with request id {rid:#06x} to {type(msg).__name__} within {timeout:g} s",
                     encode(Request(rid, msg)))


    async def _bare_request(self, msg: Message, want: type[Message], timeout: float) -> Answer:
        """A 1.0 device's request: the bare message, its answer the next of its type (§3, step 3),
        given as an Answer with id 0 so callers read one shape."""
        await self.send(msg)
        got = await self.expect((want, Refused), timeout, what=f" to {type(msg).__name__} (protocol 1.0)")
        return Answer(0, got)


async def open_port(dut: DeviceUnderTest) -> Port:
    if dut.port is None:
        dut.port = Port()
        await dut.port.open(dut.url)
    return dut.port


async def new_link(dut: DeviceUnderTest, *, reset: bool = True, auto_ack: bool = True) -> HostLink:
    """A fresh host link in the device's framing, reset (both sequences at 0) unless told not to."""
    port = await open_port(dut)
    if dut.link is not None:  # one reader on the port: a link a check left behind would take the frames
        await dut.link.stop()
    link = dut.link = HostLink(port, Framing2() if dut.protocol == "2.0" else None, auto_ack=auto_ack)
    link.start()
    if reset:
        await link.reset()
    return link


async def detect_protocol(dut: DeviceUnderTest) -> str:
    """2.0 when the device answers a 2.0 RESET, 1.1 when it answers a 1.1 one."""
    port = await open_port(dut)
    for protocol, framing in (("2.0", Framing2()), ("1.1", None)):
        link = HostLink(port, framing)
        link.start()
        try:
            await link.reset(timeout=0.5)
            return protocol
        except Failed:
            continue
        finally:
            await link.stop()
    raise Failed("the device answers neither a 2.0 nor a 1.1 RESET")


async def session(dut: DeviceUnderTest, *, resume: int | None = 0, identity: Ed25519PrivateKey | None = None) -> Session:
    """A link reset and the handshake of the device's protocol; then ResumeEvents(``resume``)
    unless None. 2.0: as ``identity`` (default: the enrolled host's)."""
    link = await new_link(dut)
    s = Session(dut, link)
    try:
        await _shake_hands(s, resume, identity)
    except BaseException:
        await link.stop()  # its reader would take the next link's frames off the port
        raise
    return s


async def _shake_hands(s: Session, resume: int | None, identity: Ed25519PrivateKey | None) -> None:
    dut = s.dut
    if dut.protocol == "2.0" and dut.no_session is not None:
        raise Blocked(dut.no_session)  # found once: each further handshake would only wait as long again
    if dut.protocol == "2.0":
        hs = await handshake2(s, identity or dut.host_identity)
        if hs.refusal is TrustFailure.BAD_PROOF:
            raise Blocked(f"no session: {hs.detail} (8-device-proof)")
    else:
        await s.send(Hello(1, 1, HOST_NAME))
        s.ident = await s.expect(Ident, what=" after HELLO")  # type: ignore[assignment]
    if resume is not None and not (isinstance(s.ident, Ident) and s.ident.protocol_minor == 0):
        await s.send(ResumeEvents(resume))  # a 1.0 device numbers no events: never asked


async def handshake2(s: Session, identity: Ed25519PrivateKey, *, proof: bytes | None = None,
                     hello_version: tuple[int, int] = PROTOCOL_2, expect_ack: bool = True) -> Handshake2:
    """HELLO2, the device's IDENT2 checked as a host checks it, PROOF2 (``proof``: instead of
    the host's own signature, to play a rogue host). The session's keys go into the link."""
    link = s.link
    assert link.framing is not None
    ephemeral = X25519PrivateKey.generate()
    hello_msg = Hello2(hello_version, raw_public_key(identity.public_key()), os.urandom(CHALLENGE_LEN),
                       raw_public_key(ephemeral.public_key()), HOST_NAME)
    hello = encode_hello(hello_msg)
    await link.send(hello)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_TIMEOUT
    ident_bytes = None
    while ident_bytes is None and (left := deadline - loop.time()) > 0:
        ident_bytes = await link.receive(left)
        if ident_bytes is not None and ident_bytes[:1] == bytes([Heartbeat.TYPE]):
            ident_bytes = None  # proof of life, plain before the session: not the answer
    if ident_bytes is None or ident_bytes[:1] != b"\x41":
        shown = ident_bytes or b""
        raise Blocked(f"no IDENT2 after HELLO2 (got {shown[:1].hex() or 'nothing'}) (8-device-proof)")
    ident = decode_ident(ident_bytes)
    proof_ok = _verifies(ident.device_key, ident.signature,
                         device_signed_bytes(hello, ident_bytes[:-SIGNATURE_LEN]))
    refusal, detail = _trust(s.dut, ident, proof_ok)
    secret = ephemeral.exchange(X25519PublicKey.from_public_bytes(ident.ephemeral))
    to_device, to_host, session_id = derive_session_keys(secret, hello_msg, ident, hello, ident_bytes)
    keys = SessionKeys(to_device, to_host, session_id)
    link.framing.install(keys)
    s.dut.sessions.append(keys)
    signature = identity.sign(host_signed_bytes(hello, ident_bytes)) if proof is None else proof
    try:
        await link.send(encode_proof(signature), tries=2)
    except Failed:
        if not expect_ack:
            link.tx_seq = (link.tx_seq + 1) % 256
        elif any(isinstance(seg.error, TagMismatch) for seg in link.segments):
            s.dut.no_session = "no session: the device's tagged frames fail their tags (7.3-tagged)"
            raise Blocked(s.dut.no_session) from None
        else:
            await link.send(encode_proof(signature), tries=SEND_TRIES)
    s.ident = ident
    s.handshake2 = Handshake2(hello, ident_bytes, ident, keys, proof_ok, refusal, detail)
    return s.handshake2


def _verifies(key: bytes, signature: bytes, data: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(signature, data)
    except Exception:  # noqa: BLE001 - a bad key or signature: either way not verified
        return False
    return True


def _trust(dut: DeviceUnderTest, ident: Ident2, proof_ok: bool) -> tuple[TrustFailure | None, str]:
    """What a host holding ``dut.device_key`` enrolled for this unit would refuse, in §8's order."""
    who = f"{ident.role} {ident.model} {ident.serial}"
    if ident.version[0] < PROTOCOL_2[0]:
        return TrustFailure.DOWNGRADE, f"{who} answered HELLO2 with protocol {ident.version[0]}.{ident.version[1]}"
    if not proof_ok:
        return TrustFailure.BAD_PROOF, f"{who}: its signature over our challenge does not verify"
    if dut.device_key is None:
        return None, "no enrolled key given: enrolment not checked"
    if ident.device_key == dut.device_key:
        return None, "the enrolled key"
    return (TrustFailure.KEY_MISMATCH if dut.enrolled_serial == ident.serial else TrustFailure.UNKNOWN_KEY,
            f"{who} proved another key than the enrolled one")


__all__ = ["DeviceUnderTest", "FrameKind", "Handshake2", "Session", "detect_protocol", "handshake2",
           "new_link", "session"]
