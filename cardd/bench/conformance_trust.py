"""Conformance checks of protocol 2.0's trust (docs/protocol.md §7.3, §8, §9): the device's
tagged frames and identity proof checked as a host checks them, and the refusals a device owes
a host: a forged, replayed or plain frame in a session, a HELLO2 of another major, a rogue
host's proof, firmware from a host it was not enrolled with."""
from __future__ import annotations

import asyncio
import os

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cardd.bench.conformance_requirements import ONLY_2_0, requirement
from cardd.bench.conformance_session import (
    DeviceUnderTest,
    Session,
    handshake2,
    new_link,
    session,
)
from cardd.bench.conformance_wire import Blocked, Failed, HostLink, Segment
from firmware_bridge.errors import TagMismatch
from firmware_bridge.framing import FrameKind, cobs_decode, cobs_encode
from firmware_bridge.framing2 import TAG_LEN, TAGGED, opens_under, plain_frame_bytes
from firmware_bridge.handshake2 import PROTOCOL_2, SIGNATURE_LEN, TrustFailure, fingerprint
from firmware_bridge.messages import Answer, FirmwareAbort, FirmwareResult, Refused, Request, Status, StatusRequest, encode

NO_ANSWER_WAIT = 0.5


def _earlier_session(dut: DeviceUnderTest, s: Session, segment: Segment) -> bool:
    """Whether a frame this session's keys refuse verifies under the keys of a session before it: a replay."""
    try:
        raw = cobs_decode(segment.raw)
    except Exception:  # noqa: BLE001 - not even COBS: no replay
        return False
    if len(raw) < 9 + TAG_LEN or not raw[0] & TAGGED:
        return False
    current = s.handshake2.keys if s.handshake2 else None
    return any(keys is not current and opens_under(keys, raw) for keys in dut.sessions)


def _forged(dut: DeviceUnderTest, s: Session) -> list[Segment]:
    return [seg for seg in s.link.segments if isinstance(seg.error, TagMismatch) and not _earlier_session(dut, s, seg)]


async def _status_exchange(s: Session) -> None:
    answer = await s.request(StatusRequest(), Status, timeout=2.0)
    if not isinstance(answer.message, Status):
        raise Failed(f"StatusRequest answered by {type(answer.message).__name__}", encode(answer))


@requirement("7.3-tagged", "7.3", "after the handshake every device frame but RESET is tagged, its tag "
             "verifies under the session, its counter rises", ONLY_2_0)
async def tagged(dut: DeviceUnderTest) -> str:
    link = await new_link(dut)
    async with Session(dut, link) as s:
        hs = await handshake2(s, dut.host_identity, expect_ack=False)
        await link.quiet(0.3)
        if not _forged(dut, s):
            await _status_exchange(s)
        forged = _forged(dut, s)
        if forged:
            raise Failed(f"{len(forged)} device frames fail their tag under session {hs.keys.session_id.hex()}",
                         forged[0].raw)
        after_proof = [seg for seg in link.segments if seg.kind in (FrameKind.DATA, FrameKind.ACK, FrameKind.NAK)]
        tagged_seen = [seg for seg in after_proof if seg.tagged]
        if not tagged_seen:
            raise Failed("no tagged frame from the device after PROOF2")
        plain_after = [seg for seg in after_proof[after_proof.index(tagged_seen[0]):] if not seg.tagged]
        if plain_after:
            raise Failed("a plain frame after the device's first tagged one", plain_after[0].raw)
        return f"{len(tagged_seen)} tagged frames verified"


@requirement("7.3-forged-refused", "7.3", "a host frame whose tag does not verify is refused", ONLY_2_0)
async def forged_refused(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        link = s.link
        assert link.framing is not None
        raw = link.framing.frame_bytes(FrameKind.DATA, link.tx_seq, link.rx_next, encode(Request(0x7001, StatusRequest())))
        bad = b"\x00" + cobs_encode(raw[:-1] + bytes([raw[-1] ^ 0x01])) + b"\x00"
        await _refused(s, bad, 0x7001, "a DATA frame with a damaged tag")
        await _status_exchange(s)
        return "forged frame refused; the session goes on"


@requirement("7.3-replay-refused", "7.3", "a host frame whose counter is not above the last taken is refused "
             "(a replay)", ONLY_2_0)
async def replay_refused(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        link = s.link
        assert link.framing is not None
        await s.link.quiet(0.2)
        # a frame one ahead of the expected seq: its tag and counter are taken, the frame NAKed
        ahead = link.framing.wire_frame(FrameKind.DATA, (link.tx_seq + 1) % 256, link.rx_next,
                                        encode(Request(0x7002, StatusRequest())))
        link.write(ahead)
        await link.quiet(0.1)
        await s.send(Request(0x7003, StatusRequest()))  # the seq it waited for, a higher counter
        await link.quiet(0.2)
        await _refused(s, ahead, 0x7002, "a replayed frame (its counter already passed)")
        return "replayed counter refused"


@requirement("7.3-plain-refused", "7.3", "a plain DATA frame in a session is refused", ONLY_2_0)
async def plain_refused(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        link = s.link
        raw = plain_frame_bytes(FrameKind.DATA, link.tx_seq, link.rx_next, encode(Request(0x7004, StatusRequest())))
        await _refused(s, b"\x00" + cobs_encode(raw) + b"\x00", 0x7004, "a plain DATA frame in the session")
        return "plain DATA refused"


async def _refused(s: Session, data: bytes, request_id: int, what: str) -> None:
    """Write ``data`` (a Request with ``request_id``); Failed if its Answer comes."""
    s.link.write(data)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + NO_ANSWER_WAIT
    while (left := deadline - loop.time()) > 0:
        msg = await s.next_message(left)
        if isinstance(msg, Answer) and msg.request_id == request_id:
            raise Failed(f"the device took {what}", data)


@requirement("8-device-proof", "8", "the device's IDENT2 signature over the host's HELLO2 verifies with the "
             "key it names", ONLY_2_0)
async def device_proof(dut: DeviceUnderTest) -> str:
    link = await new_link(dut)
    async with Session(dut, link) as s:
        hs = await handshake2(s, dut.host_identity, expect_ack=False)
        if not hs.proof_ok:
            raise Failed("the IDENT2's signature does not verify with the key it names", hs.ident_bytes)
        ident = hs.ident
        return (f"{ident.role} {ident.model} {ident.serial}, firmware {ident.firmware}, "
                f"key {fingerprint(ident.device_key)}")


@requirement("8-version-refused", "8", "a HELLO2 of another major is not answered by an IDENT2", ONLY_2_0)
async def version_refused(dut: DeviceUnderTest) -> str:
    link = await new_link(dut)
    async with Session(dut, link) as s:
        try:
            hs = await handshake2(s, dut.host_identity, hello_version=(3, 0), expect_ack=False)
        except Blocked:
            return "no IDENT2 to HELLO2 3.0"
        raise Failed("the device answered a HELLO2 offering protocol 3.0 with an IDENT2", hs.ident_bytes)


async def _trust(dut: DeviceUnderTest) -> tuple[TrustFailure | None, str, bytes]:
    link = await new_link(dut)
    async with Session(dut, link) as s:
        hs = await handshake2(s, dut.host_identity, expect_ack=False)
        return hs.refusal, hs.detail, hs.ident_bytes


@requirement("9-downgrade", "9", "a 2.0 device never offers 1.x in its IDENT2 (a host refuses it: downgrade offered)",
             ONLY_2_0)
async def no_downgrade(dut: DeviceUnderTest) -> str:
    refusal, detail, data = await _trust(dut)
    if refusal is TrustFailure.DOWNGRADE:
        raise Failed(detail, data)
    return f"IDENT2 names {data[1]}.{data[2]}"


@requirement("9-unknown-key", "9", "the device proves a key enrolled for it (a host refuses it: unknown key)", ONLY_2_0)
async def unknown_key(dut: DeviceUnderTest) -> str:
    refusal, detail, data = await _trust(dut)
    if refusal is TrustFailure.UNKNOWN_KEY:
        raise Failed(detail, data)
    return detail if dut.device_key is None else "its key and serial are the enrolled ones"


@requirement("9-cloned-serial", "9", "the device's serial comes with the key enrolled under it (a host refuses "
             "it: key does not match the enrolled one)", ONLY_2_0)
async def cloned_serial(dut: DeviceUnderTest) -> str:
    refusal, detail, data = await _trust(dut)
    if refusal is TrustFailure.KEY_MISMATCH:
        raise Failed(detail, data)
    return detail if dut.device_key is None else "the enrolled key for its serial"


@requirement("9-replayed-capture", "9", "the device sends no frame of a session before the current one", ONLY_2_0)
async def replayed_capture(dut: DeviceUnderTest) -> str:
    for _ in range(2):  # a session with traffic, then one after it where a replay would show
        async with await session(dut) as s:
            await _status_exchange(s)
            await s.link.quiet(0.3)
            replayed = [seg for seg in s.link.segments if seg.error is not None and _earlier_session(dut, s, seg)]
            if replayed:
                raise Failed(f"{len(replayed)} frames of a session before this one sent again", replayed[0].raw)
    return "none"


@requirement("8-rogue-host-proof", "8", "a PROOF2 whose signature does not verify gives the host no session", ONLY_2_0)
async def rogue_host_proof(dut: DeviceUnderTest) -> str:
    link = await new_link(dut)
    async with Session(dut, link) as s:
        await handshake2(s, dut.host_identity, proof=os.urandom(SIGNATURE_LEN), expect_ack=False)
        await link.quiet(0.2)
        request = link.frame(FrameKind.DATA, link.tx_seq, link.rx_next, encode(Request(0x7005, StatusRequest())))
        await _refused(s, request, 0x7005, "a request after a PROOF2 that does not verify")
        return "no session after a bad proof"


async def _firmware_abort(s: Session) -> FirmwareResult | Refused:
    answer = await s.request(FirmwareAbort("conformance"), FirmwareResult, timeout=2.0)
    if not isinstance(answer.message, (FirmwareResult, Refused)):
        raise Failed(f"FirmwareAbort answered by {type(answer.message).__name__}", encode(answer))
    return answer.message


@requirement("8-unenrolled-host", "8", "a host proven but not enrolled gets firmware commands refused", ONLY_2_0)
async def unenrolled_host(dut: DeviceUnderTest) -> str:
    async with await session(dut, identity=Ed25519PrivateKey.generate()) as s:
        result = await _firmware_abort(s)
        if not isinstance(result, Refused):
            raise Failed("a host the device was not enrolled with had FirmwareAbort taken", encode(result))
        return f"refused: {result.reason}"


@requirement("8-enrolled-host", "8", "the host the device was enrolled with gets firmware commands answered", ONLY_2_0)
async def enrolled_host(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        result = await _firmware_abort(s)
        if isinstance(result, Refused):
            raise Failed(f"the enrolled host's FirmwareAbort refused: {result.reason}", encode(result))
        return "FirmwareAbort answered"


__all__ = ["HostLink", "PROTOCOL_2"]
