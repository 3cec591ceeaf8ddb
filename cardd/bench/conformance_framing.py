"""Conformance checks of framing (docs/protocol.md §1, §7) and of the link (§2): frames the
suite damages on purpose, and the device's answers to gaps, repeats, silence and resets."""
from __future__ import annotations

import os
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from cardd.bench.conformance_requirements import BOTH, ONLY_1_1, ONLY_2_0, requirement
from cardd.bench.conformance_session import DeviceUnderTest, new_link
from cardd.bench.conformance_wire import ANSWER_TIMEOUT, Failed, HostLink, Segment
from firmware_bridge.crc import crc16
from firmware_bridge.crc32c import crc32c
from firmware_bridge.framing import FrameKind, cobs_decode, cobs_encode, wire_frame
from firmware_bridge.framing2 import VERSION_2
from firmware_bridge.messages import Heartbeat, StatusRequest, encode

#: how long the suite listens for an answer a conforming device must not give
NO_ANSWER_WAIT = 0.4
#: a device's retransmit timer is at most this long (LinkConfig.max_rto, with room)
RETRANSMIT_WAIT = 3.0
STATUS_REQUEST = encode(StatusRequest())
HEARTBEAT_TYPE = Heartbeat.TYPE


@asynccontextmanager
async def linked(dut: DeviceUnderTest, *, reset: bool = True, auto_ack: bool = True) -> AsyncIterator[HostLink]:
    """A fresh link; ``auto_ack`` off from before its reset, so no frame of the new link is acknowledged."""
    link = await new_link(dut, reset=reset, auto_ack=auto_ack)
    try:
        yield link
    finally:
        await link.stop()


def raw_frame(link: HostLink, kind: int, seq: int, ack: int, payload: bytes, *, length: int | None = None,
              damage_check: bool = False) -> bytes:
    """A plain frame of the link's protocol on the wire, built field by field so it may break the
    rules: any kind byte (1.x kinds are given as in §1.3, 2.0's bit is added), a length field
    that lies, a check that does not hold, a frame longer than allowed."""
    v2 = link.framing is not None
    kind_byte = kind | VERSION_2 if v2 and kind < VERSION_2 else kind
    body = struct.pack(">BBBH", kind_byte, seq, ack, len(payload) if length is None else length) + payload
    check = struct.pack(">I", crc32c(body)) if v2 else struct.pack(">H", crc16(body))
    if damage_check:
        check = bytes([check[0] ^ 0x01]) + check[1:]
    return b"\x00" + cobs_encode(body + check) + b"\x00"


def replies(link: HostLink, since: int = 0) -> list[Segment]:
    """The device's DATA frames from segment ``since`` on, heartbeats left out."""
    return [s for s in link.segments[since:]
            if s.kind is FrameKind.DATA and s.payload[:1] != bytes([HEARTBEAT_TYPE])]


def reset_bytes(link: HostLink, nonce: bytes) -> bytes:
    return link.frame(FrameKind.RESET, 0, 0, nonce)


async def answered(link: HostLink, data: bytes, nonce: bytes, wait: float = NO_ANSWER_WAIT) -> bool:
    """Whether ``data`` (a RESET with ``nonce``, or what carries one) gets its RESET_ACK."""
    since = len(link.segments)
    link.write(data)
    got = await link.wait_for(lambda s: s.kind is FrameKind.RESET_ACK and s.payload == nonce, wait, since)
    return got is not None


async def must_answer(link: HostLink, data: bytes, nonce: bytes, what: str) -> None:
    if not await answered(link, data, nonce, wait=ANSWER_TIMEOUT):
        raise Failed(f"no RESET_ACK after {what}", data)


async def must_not_answer(link: HostLink, data: bytes, nonce: bytes, what: str) -> None:
    if await answered(link, data, nonce):
        raise Failed(f"the device answered {what} (it must be refused)", data)


def first_bad(link: HostLink) -> Segment | None:
    return next((s for s in link.segments if s.error is not None), None)


# ---- §1 framing ---------------------------------------------------------------------------

@requirement("1.4-delimited", "1.4", "every device frame is 00 COBS(frame) 00, COBS in its shortest form, "
             "and its check holds")
async def delimited(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        await link.send(STATUS_REQUEST)
        await link.quiet(0.2)
        bad = first_bad(link)
        if bad is not None and bad.error is not None:
            raise Failed(f"a device segment is refused: {bad.error.reason}", bad.raw)
        for s in link.segments:
            if cobs_encode(cobs_decode(s.raw)) != s.raw:
                raise Failed("a device frame's COBS is not the canonical encoding", s.raw)
        return f"{len(link.segments)} device frames read"


@requirement("1.4-idle-fill", "1.4", "empty segments (delimiters in a row) are idle fill: the frame after them is taken")
async def idle_fill(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        nonce = os.urandom(4)
        await must_answer(link, b"\x00" * 16 + reset_bytes(link, nonce), nonce, "16 delimiters and a RESET")
        return "RESET after idle fill answered"


@requirement("1.4-resync", "1.4", "after line noise a frame that arrives whole is found whole")
async def resync(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        nonce = os.urandom(4)
        noise = bytes(range(1, 256)) + bytes(range(255, 0, -1))[:100]
        await must_answer(link, noise + reset_bytes(link, nonce), nonce, "355 bytes of noise and a RESET")
        return "RESET after noise answered"


@requirement("1.1-oversize", "1.1", "a run longer than MAX_ENCODED_LEN is dropped and decoding resumes; "
             "a frame over MAX_FRAME_LEN is refused")
async def oversize(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        nonce = os.urandom(4)
        await must_answer(link, b"\x55" * 1100 + reset_bytes(link, nonce), nonce, "a 1,100-byte run and a RESET")
        nonce = os.urandom(4)
        await must_not_answer(link, raw_frame(link, FrameKind.RESET, 0, 0, nonce + b"\x01" * 1016), nonce,
                              "a RESET frame of 1,029 bytes")
        return "over-long run dropped, over-long frame refused"


@requirement("1.1-length", "1.1", "a frame whose length field differs from the bytes present is refused")
async def length_field(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        nonce = os.urandom(4)
        await must_not_answer(link, raw_frame(link, FrameKind.RESET, 0, 0, nonce, length=5), nonce,
                              "a RESET whose length field says 5 for 4 bytes")
        await must_not_answer(link, raw_frame(link, FrameKind.RESET, 0, 0, nonce + b"\x00", length=4), nonce + b"\x00",
                              "a RESET with one byte more than its length field")
        return "both length lies refused"


@requirement("1.2-crc", "1.2", "a frame whose CRC-16/CCITT-FALSE does not hold is refused", ONLY_1_1)
async def crc16_refused(dut: DeviceUnderTest) -> str:
    return await _bad_check(dut, "CRC-16")


@requirement("7.2-crc32c", "7.2", "a plain frame whose CRC-32C does not hold is refused", ONLY_2_0)
async def crc32c_refused(dut: DeviceUnderTest) -> str:
    return await _bad_check(dut, "CRC-32C")


async def _bad_check(dut: DeviceUnderTest, name: str) -> str:
    async with linked(dut) as link:
        nonce = os.urandom(4)
        await must_not_answer(link, raw_frame(link, FrameKind.RESET, 0, 0, nonce, damage_check=True), nonce,
                              f"a RESET with a damaged {name}")
        return f"damaged {name} refused"


@requirement("1.3-unknown-kind", "1.3", "a frame of an unknown kind is refused and the link goes on")
async def unknown_kind(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        nonce = os.urandom(4)
        await must_not_answer(link, raw_frame(link, 0x0E, 0, 0, nonce), nonce, "a frame of kind 0x0e")
        nonce = os.urandom(4)
        await must_answer(link, reset_bytes(link, nonce), nonce, "a RESET after the unknown kind")
        return "unknown kind ignored"


@requirement("7.3-legacy-refused", "7.3", "a 1.x frame on a 2.0 link is refused", ONLY_2_0)
async def legacy_refused(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        nonce = os.urandom(4)
        await must_not_answer(link, wire_frame(FrameKind.RESET, 0, 0, nonce), nonce, "a 1.1 RESET")
        return "1.1 RESET refused"


# ---- §2 the link --------------------------------------------------------------------------

@requirement("2.1-ack", "2.1", "a DATA frame is acknowledged cumulatively: ack = its seq + 1")
async def ack(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        for _ in range(3):
            await link.send(STATUS_REQUEST)
        if link.device_acked != 3:
            raise Failed(f"after DATA 0, 1, 2 the device's ack is {link.device_acked}, not 3", link.segments[-1].raw)
        return "acks 1, 2, 3"


@requirement("2.1-duplicate", "2.1", "a repeated DATA frame is acknowledged again and delivered once")
async def duplicate(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        sent = await link.send(STATUS_REQUEST)
        await link.quiet(0.2)
        since = len(link.segments)
        link.write(sent)
        again = await link.wait_for(lambda s: s.kind in (FrameKind.ACK, FrameKind.DATA) and s.ack == 1, 1.0, since)
        if again is None:
            raise Failed("a repeated DATA frame was not acknowledged again", sent)
        await link.quiet(NO_ANSWER_WAIT)
        extra = [s for s in replies(link, since) if s.seq != 0]  # the first answer resent is no new delivery
        if extra:
            raise Failed("a repeated DATA frame was delivered again (answered twice)", extra[0].raw)
        return "re-acknowledged, answered once"


@requirement("2.1-nak", "2.1", "a DATA frame ahead of the expected seq is dropped and NAKed with the seq expected")
async def nak(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        since = len(link.segments)
        ahead = link.send_frame(FrameKind.DATA, 5, 0, STATUS_REQUEST)
        got = await link.wait_for(lambda s: s.kind is FrameKind.NAK, 1.0, since)
        if got is None:
            raise Failed("no NAK for DATA seq 5 when seq 0 was expected", ahead)
        if got.ack != 0:
            raise Failed(f"the NAK says ack {got.ack}, expected 0", got.raw)
        await link.quiet(NO_ANSWER_WAIT)
        if replies(link, since):
            raise Failed("a DATA frame ahead of a gap was delivered (answered)", ahead)
        return "NAK(0), nothing delivered"


@requirement("2.1-seq-wrap", "2.1", "both sequence numbers wrap from 255 to 0")
async def seq_wrap(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        for _ in range(260):
            await link.send(STATUS_REQUEST)
        await link.quiet(0.2)
        got = replies(link)
        seqs = [s.seq for s in got]
        if link.device_acked != 260 % 256:
            raise Failed(f"after 260 DATA frames the device's ack is {link.device_acked}, not 4", link.segments[-1].raw)
        if len(got) < 257 or link.rx_next >= 255 or 255 not in seqs:
            raise Failed(f"the device's own seq did not wrap: {len(got)} answers, next expected {link.rx_next}",
                         got[-1].raw if got else b"")
        return f"260 frames each way, device seq now {link.rx_next}"


@requirement("2.2-retransmit", "2.2", "an unacknowledged DATA frame is sent again, same seq and payload")
async def retransmit(dut: DeviceUnderTest) -> str:
    async with linked(dut, auto_ack=False) as link:
        since = len(link.segments)
        await link.send(STATUS_REQUEST)
        first = await link.wait_for(lambda s: s.kind is FrameKind.DATA, 1.0, since)
        if first is None:
            raise Failed("no answer to a StatusRequest")
        at = link.segments.index(first) + 1
        again = await link.wait_for(lambda s: s.kind is FrameKind.DATA and s.seq == first.seq
                                    and s.payload == first.payload, RETRANSMIT_WAIT, at)
        if again is None:
            raise Failed(f"DATA seq {first.seq} not resent within {RETRANSMIT_WAIT:g} s without an ACK", first.raw)
        return f"resent after {again.at - first.at:.3f} s"


@requirement("2.2-nak-resend", "2.2", "on NAK the device resends every unacknowledged frame from the NAK's ack (go-back-N)")
async def nak_resend(dut: DeviceUnderTest) -> str:
    async with linked(dut, auto_ack=False) as link:
        await link.send(STATUS_REQUEST)
        await link.send(STATUS_REQUEST)
        await link.quiet(0.1)
        first = next((s for s in link.segments if s.kind is FrameKind.DATA and s.seq == 0), None)
        if first is None:
            raise Failed("no answer to two StatusRequests")
        for wait in (0.5, 1.0):  # a NAK crossing the device's own resend is answered by the next
            since = len(link.segments)
            sent = link.send_frame(FrameKind.NAK, 0, first.seq)
            again = await link.wait_for(lambda s: s.kind is FrameKind.DATA and s.seq == first.seq, wait, since)
            if again is not None:
                break
        else:
            raise Failed(f"NAK(ack {first.seq}) did not make the device resend DATA seq {first.seq}", sent)
        return f"DATA seq {first.seq} resent on NAK"


@requirement("2.2-window", "2.2", "at most 127 DATA frames are unacknowledged at a time")
async def window(dut: DeviceUnderTest) -> str:
    async with linked(dut, auto_ack=False) as link:
        for _ in range(140):
            await link.send(STATUS_REQUEST)
        await link.quiet(0.3)
        seqs = {s.seq for s in link.segments if s.kind is FrameKind.DATA}
        if len(seqs) > 127:
            raise Failed(f"{len(seqs)} distinct DATA frames in flight unacknowledged", link.segments[-1].raw)
        return f"{len(seqs)} in flight at most"


@requirement("2.4-reset-ack", "2.4", "RESET(n) is answered RESET_ACK(n) and both sequences restart at 0")
async def reset_ack(dut: DeviceUnderTest) -> str:
    async with linked(dut) as link:
        await link.send(STATUS_REQUEST)
        await link.send(STATUS_REQUEST)
        await link.quiet(0.1)
        answer = await link.reset()
        if answer.seq or answer.ack:
            raise Failed("a RESET_ACK's seq and ack are not 0", answer.raw)
        since = len(link.segments)
        await link.send(STATUS_REQUEST)
        got = await link.wait_for(lambda s: s.kind is FrameKind.DATA, 1.0, since)
        if got is None or got.seq != 0:
            raise Failed("after a reset the device's first DATA frame is not seq 0", got.raw if got else b"")
        return "nonce echoed, seqs at 0"


@requirement("2.4-same-nonce", "2.4", "a RESET with the accepted nonce, once DATA went, is a new reset")
async def same_nonce(dut: DeviceUnderTest) -> str:
    async with linked(dut, reset=False) as link:
        nonce = os.urandom(4)
        await link.reset(nonce)
        await link.send(STATUS_REQUEST)
        await link.quiet(0.1)
        await link.reset(nonce)
        since = len(link.segments)
        sent = await link.send(STATUS_REQUEST)
        got = await link.wait_for(lambda s: s.kind is FrameKind.DATA and s.seq == 0
                                  and s.payload[:1] != bytes([HEARTBEAT_TYPE]), 1.0, since)
        if got is None:
            raise Failed("after a second RESET with the same nonce, DATA seq 0 was not taken as new", sent)
        return "taken as a new reset"


__all__ = ["BOTH", "linked", "raw_frame", "replies"]
