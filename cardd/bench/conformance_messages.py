"""Conformance checks of the session (docs/protocol.md §3): HELLO/IDENT, request ids, numbered
events kept and resent, the Status after them, heartbeats and the status budget; and of the
firmware transfer (§5). In 2.0 each runs in a session the 2.0 handshake opened."""
from __future__ import annotations

import asyncio
import hashlib
import os
import zlib
from collections.abc import Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cardd.bench.conformance_requirements import BOTH, ONLY_1_1, requirement
from cardd.bench.conformance_session import DeviceUnderTest, Session, new_link, session
from cardd.bench.conformance_wire import Blocked, Failed
from firmware_bridge.firmware import sign_image
from firmware_bridge.messages import (
    Answer,
    DropReason,
    Event,
    EventsDropped,
    EventsJournaled,
    FirmwareAbort,
    FirmwareBegin,
    FirmwareChunk,
    FirmwareCommit,
    FirmwareResult,
    FirmwareStage,
    Heartbeat,
    Hello,
    Ident,
    Message,
    Refused,
    Request,
    StartShuffle,
    Status,
    StatusRequest,
    encode,
)
from firmware_bridge.session import SessionConfig

#: a host takes a device for stale after this long without a message (§3, step 4)
STALE_AFTER = SessionConfig().stale_after
#: what a device may send unasked in a second (§3.1)
STATUS_BUDGET = SessionConfig().status_budget
#: how long the suite waits for the device's events to stop coming
EVENTS_QUIET = 0.5
#: the longest the suite listens for them (a device that never goes quiet)
COLLECT_LIMIT = 5.0


async def _collect(s: Session, quiet: float = EVENTS_QUIET) -> list[Message]:
    """What the device sends until it is quiet for ``quiet`` seconds (heartbeats and unasked
    Status do not count), at most :data:`COLLECT_LIMIT` seconds."""
    got: list[Message] = []
    loop = asyncio.get_running_loop()
    last = start = loop.time()
    while loop.time() - last < quiet and loop.time() - start < COLLECT_LIMIT:
        msg = await s.next_message(quiet)
        if msg is not None:
            got.append(msg)
        if msg is not None and not isinstance(msg, (Heartbeat, Status)):
            last = loop.time()
    return got


def _role(s: Session) -> str:
    role = getattr(s.ident, "role", "")
    return role if isinstance(role, str) else role.name.lower()


def _events(msgs: Sequence[Message]) -> list[Event]:
    return [m for m in msgs if isinstance(m, Event)]


# ---- §3 HELLO/IDENT ------------------------------------------------------------------------

@requirement("3-hello-ident", "3", "HELLO is answered by one IDENT naming protocol 1.x, the same boot id "
             "at every HELLO of one boot", ONLY_1_1)
async def hello_ident(dut: DeviceUnderTest) -> str:
    link = await new_link(dut)
    async with Session(dut, link) as s:
        boots = []
        for _ in range(2):
            await s.send(Hello(1, 1, "cardbench conformance"))
            got = [m for m in await _collect(s, 0.3) if isinstance(m, Ident)]
            if len(got) != 1:
                raise Failed(f"HELLO answered by {len(got)} IDENTs, expected one",
                             b"".join(encode(m) for m in got))
            ident = got[0]
            if ident.protocol_major != 1:
                raise Failed(f"a 1.x device's IDENT names protocol {ident.protocol_major}.{ident.protocol_minor}",
                             encode(ident))
            boots.append(ident.boot_id)
        if boots[0] != boots[1]:
            raise Failed(f"boot id {boots[0]:#010x} then {boots[1]:#010x} without a reboot", encode(ident))
        return f"{ident.role.name.lower()} {ident.model} {ident.serial}, firmware {ident.firmware_version}"


@requirement("3-version", "3", "to a HELLO of another major the device answers with its own version", ONLY_1_1)
async def version(dut: DeviceUnderTest) -> str:
    link = await new_link(dut)
    async with Session(dut, link) as s:
        await s.send(Hello(9, 0, "cardbench conformance"))
        ident = await s.expect(Ident, what=" after HELLO 9.0")
        assert isinstance(ident, Ident)
        if ident.protocol_major == 9:
            raise Failed("the device echoed the host's major version instead of its own", encode(ident))
        return f"answers {ident.protocol_major}.{ident.protocol_minor}"


# ---- §3.3 request ids ---------------------------------------------------------------------

@requirement("3.3-request-ids", "3.3", "every Request is answered inside an Answer carrying its request id")
async def request_ids(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        await _collect(s, 0.2)
        s.request_id = 0xFFF0
        first, second = s.request_id + 1, s.request_id + 2
        for rid in (first, second):
            await s.send(Request(rid, StatusRequest()))
        got = [m for m in await _collect(s, 0.3) if isinstance(m, (Answer, Status, Refused))]
        answers = {m.request_id: m for m in got if isinstance(m, Answer)}
        for rid in (first, second):
            answer = answers.get(rid)
            if answer is None or not isinstance(answer.message, Status):
                raise Failed(f"no Answer({rid:#06x}, Status) to Request({rid:#06x}, StatusRequest)",
                             b"".join(encode(m) for m in got))
        return "two requests, two answers by id"


# ---- §3.2 numbered events -------------------------------------------------------------------

async def _with_events(dut: DeviceUnderTest) -> list[Message]:
    """A session's resent events after ResumeEvents(0); made first when the device keeps none."""
    async with await session(dut) as s:
        got = await _collect(s)
        if _events(got) or any(isinstance(m, EventsDropped) for m in got):
            return got
        if _role(s) == "shuffler":  # a shuffler numbers what a shuffle reports: asked from the cable
            await s.send(StartShuffle(1))  # its effect is events: no Answer (§3.3)
        elif dut.make_events is not None:
            await dut.make_events()
        else:
            raise Blocked("the device keeps no events and cannot be made to number one from the cable "
                          "(a shoe numbers the cards dealt from it)")
        await _collect(s)
    async with await session(dut) as s:
        return await _collect(s)


@requirement("3.2-events-kept", "3.2", "numbered events are kept until journaled and sent again, in index "
             "order, after every handshake")
async def events_kept(dut: DeviceUnderTest) -> str:
    first = _events(await _with_events(dut))
    if not first:
        raise Failed("no numbered Event after ResumeEvents(0): the device numbers nothing")
    async with await session(dut) as s:
        again = _events(await _collect(s))
    indexes = [e.index for e in again]
    if indexes != sorted(set(indexes)):
        raise Failed(f"events resent out of order or twice: {indexes[:20]}", b"".join(encode(e) for e in again))
    missing = sorted({e.index for e in first} - set(indexes))
    if missing:
        raise Failed(f"events {missing[:10]} not journaled and not resent after a link reset",
                     b"".join(encode(e) for e in first if e.index in missing))
    return f"events {indexes[0]}..{indexes[-1]} kept and resent"


@requirement("3.2-overflow", "3.2", "events the device no longer has are reported (EventsDropped), never "
             "skipped silently")
async def overflow(dut: DeviceUnderTest) -> str:
    got = await _with_events(dut)
    expected, reported = 1, 0
    for msg in got:
        if isinstance(msg, EventsDropped):
            if msg.first_index != expected:
                raise Failed(f"EventsDropped from {msg.first_index}, expected from {expected}", encode(msg))
            expected, reported = msg.first_index + msg.count, reported + (msg.reason is DropReason.OVERFLOW) * msg.count
        elif isinstance(msg, Event):
            if msg.index != expected:
                raise Failed(f"event {msg.index} came where {expected} was due, and no EventsDropped said "
                             f"{expected}..{msg.index - 1} are gone", encode(msg))
            expected += 1
    return f"{reported} overflowed events reported" if reported else "no overflow seen; every index accounted for"


@requirement("3.2-status-after-events", "3.2", "a Status asked after the handshake comes after every event "
             "numbered before it")
async def status_after_events(dut: DeviceUnderTest) -> str:
    await _with_events(dut)
    async with await session(dut) as s:
        answer = await s.request(StatusRequest(), Status, timeout=2.0)
        after = _events(await _collect(s))
        if after:
            raise Failed(f"event {after[0].index} came after the Status asked for behind it", encode(answer))
        before = len(_events(s.seen))
        return f"Status after {before} resent events"


@requirement("3.2-resume-index", "3.2", "ResumeEvents(k) resends from k+1; after EventsJournaled(k) events up "
             "to k are let go (EventsDropped CONFIRMED)")
async def resume_index(dut: DeviceUnderTest) -> str:
    events = _events(await _with_events(dut))
    if len(events) < 2:
        raise Blocked("fewer than two events kept: nothing to resume from")
    k = events[-2].index
    async with await session(dut, resume=k) as s:
        got = _events(await _collect(s))
        if not got or got[0].index != k + 1:
            raise Failed(f"after ResumeEvents({k}) the first event resent is "
                         f"{got[0].index if got else 'none'}, expected {k + 1}",
                         b"".join(encode(e) for e in got[:3]))
        await s.send(EventsJournaled(k))
        await _collect(s, 0.2)
    async with await session(dut) as s:
        after = await _collect(s)
    dropped = [m for m in after if isinstance(m, EventsDropped) and m.reason is DropReason.CONFIRMED]
    if not dropped or dropped[-1].first_index + dropped[-1].count - 1 != k:
        raise Failed(f"after EventsJournaled({k}) and ResumeEvents(0) no EventsDropped(CONFIRMED) up to {k}",
                     b"".join(encode(m) for m in after[:3]))
    resent = _events(after)
    if resent and resent[0].index != k + 1:
        raise Failed(f"after EventsJournaled({k}) the first event resent is {resent[0].index}", encode(resent[0]))
    return f"resumed from {k + 1}; 1..{k} let go once journaled"


# ---- §3 heartbeats and the status budget ------------------------------------------------------

@requirement("3-heartbeat", "3", f"after the handshake the device sends a Heartbeat at least every "
             f"{STALE_AFTER:g} s (stale_after)")
async def heartbeat(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for n in range(2):
            await s.expect(Heartbeat, timeout=STALE_AFTER, what=f": the host takes the device for stale ({n} seen)")
        return f"two heartbeats in {loop.time() - start:.1f} s"


@requirement("3.1-status-budget", "3.1", f"a device sends at most {STATUS_BUDGET} unasked status messages a second")
async def status_budget(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        await _collect(s, 0.2)
        loop = asyncio.get_running_loop()
        start, count = loop.time(), 0
        while (left := start + 1.0 - loop.time()) > 0:
            msg = await s.next_message(left)
            if msg is not None and not isinstance(msg, (Event, EventsDropped, Answer)):
                count += 1
        if count > STATUS_BUDGET:
            raise Failed(f"{count} unasked status messages in one second", encode(s.seen[-1]))
        return f"{count} in one second"


# ---- §5 firmware ------------------------------------------------------------------------------

def _image(model: str, version: str, *, bad_signature: bool = False) -> tuple[FirmwareBegin, bytes]:
    data = os.urandom(64)
    signed = sign_image(model, version, data, Ed25519PrivateKey.generate())  # no device has this key
    signature = bytes([signed.signature[0] ^ 0xFF]) + signed.signature[1:] if bad_signature else signed.signature
    header = signed.header.to_bytes()
    return FirmwareBegin(len(data), 512, hashlib.sha256(data).digest(), signature, header), data


async def _firmware_step(s: Session, msg: Message) -> FirmwareResult | Refused:
    answer = await s.request(msg, FirmwareResult, timeout=2.0)
    inner = answer.message
    if not isinstance(inner, (FirmwareResult, Refused)):
        raise Failed(f"a {type(msg).__name__} answered by {type(inner).__name__}", encode(answer))
    return inner


async def _refused_transfer(dut: DeviceUnderTest, begin: FirmwareBegin, data: bytes, *, at_begin: bool) -> str:
    async with await session(dut) as s:
        ident = s.ident
        result = await _firmware_step(s, begin)
        if isinstance(result, Refused) or not result.ok:
            return f"refused at BEGIN: {result.reason if isinstance(result, Refused) else result.detail}"
        if at_begin:
            await _firmware_step(s, FirmwareAbort("conformance"))
            raise Failed("FirmwareBegin accepted where it must be refused", encode(begin))
        await _firmware_step(s, FirmwareChunk(0, zlib.crc32(data), data))
        result = await _firmware_step(s, FirmwareCommit())
        if isinstance(result, FirmwareResult) and result.ok:
            raise Failed(f"the device installed an image it must refuse (running {getattr(ident, 'firmware', '')})",
                         encode(begin))
        return "refused at COMMIT"


def _model(s: Session) -> str:
    ident = s.ident
    assert ident is not None
    return ident.model


@requirement("5.2-bad-signature", "5.2", "an image whose signature does not verify is never installed")
async def bad_signature(dut: DeviceUnderTest) -> str:
    model = await _device_model(dut)
    begin, data = _image(model, "99.0.0", bad_signature=True)
    return await _refused_transfer(dut, begin, data, at_begin=False)


@requirement("5.2-wrong-model", "5.2", "an image for another model is never installed")
async def wrong_model(dut: DeviceUnderTest) -> str:
    model = await _device_model(dut)
    begin, data = _image(f"not-{model}", "99.0.0")
    return await _refused_transfer(dut, begin, data, at_begin=False)


@requirement("5.2-downgrade", "5.2", "a lower version is refused at FirmwareBegin without FirmwareAllowDowngrade")
async def downgrade(dut: DeviceUnderTest) -> str:
    model = await _device_model(dut)
    begin, data = _image(model, "0.0.1")
    return await _refused_transfer(dut, begin, data, at_begin=True)


@requirement("5.2-abort", "5.2", "FirmwareAbort is answered and drops the transfer: a chunk after it is refused")
async def abort(dut: DeviceUnderTest) -> str:
    async with await session(dut) as s:
        result = await _firmware_step(s, FirmwareAbort("conformance"))
        if isinstance(result, Refused):
            if s.v2:
                raise Blocked(f"firmware refused to the enrolled host: {result.reason} (8-enrolled-host)")
            raise Failed(f"FirmwareAbort refused: {result.reason}", encode(result))
        if result.stage is not FirmwareStage.ABORT or not result.ok:
            raise Failed("FirmwareAbort not answered FirmwareResult(ABORT, ok)", encode(result))
        chunk = await _firmware_step(s, FirmwareChunk(0, 0, b""))
        if isinstance(chunk, FirmwareResult) and chunk.ok:
            raise Failed("a chunk after FirmwareAbort was taken", encode(chunk))
        return "aborted; the next chunk refused"


async def _device_model(dut: DeviceUnderTest) -> str:
    async with await session(dut, resume=None) as s:
        return _model(s)


__all__ = ["BOTH"]
