"""The link over an impaired in-memory wire: exactly once, in order, retry cap, resets, RTO."""
from __future__ import annotations

import asyncio
from functools import partial

import pytest

from firmware_bridge.errors import LinkFailed, LinkReset
from firmware_bridge.framing import MAX_PAYLOAD, Frame, FrameKind, decode_frame, encode_frame
from firmware_bridge.link import LinkConfig, LinkEvent, LinkState

from tests.firmware_bridge.fb_wire import Wire, make_pair
from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)

# where a test counts resends, a fixed timeout well above any loop stall keeps the count exact
STEADY = LinkConfig(initial_rto=0.2, min_rto=0.2, max_rto=0.4)


def payloads(tag: str, n: int) -> list[bytes]:
    # include zeros and 0xff runs so COBS has work to do
    return [f"{tag}{i}".encode() + bytes([0, i % 256, 0xFF]) * (i % 7) for i in range(n)]


async def up_pair(a_to_b=None, b_to_a=None, config=None):
    a, b = make_pair(a_to_b, b_to_a, config)
    a.link.start()
    await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
    return a, b


def close(*ends):
    for end in ends:
        end.link.close()


def test_start_handshake_reports_up_and_peer_reset():
    async def main():
        a, b = await up_pair()
        assert a.events == [(LinkEvent.UP, "reset acknowledged")]
        assert [e for e, _ in b.events] == [LinkEvent.PEER_RESET]
        close(a, b)
        assert a.events[-1][0] is LinkEvent.CLOSED

    run(main())


def test_clean_wire_both_directions_in_order():
    async def main():
        # timeouts far above any loop stall: on a clean wire a resend would be a bug, not load
        a, b = await up_pair(config=LinkConfig(initial_rto=2.0, min_rto=2.0, max_rto=5.0))
        to_b, to_a = payloads("ab", 600), payloads("ba", 600)
        futs = [a.link.send(p) for p in to_b] + [b.link.send(p) for p in to_a]
        await asyncio.gather(*futs)
        await until(lambda: len(b.delivered) == 600 and len(a.delivered) == 600)
        assert b.delivered == to_b and a.delivered == to_a
        s = a.link.stats
        assert s.data_sent == 600 and s.retransmits == 0 and s.framing.errors == 0
        assert s.rtt_srtt is not None and s.rtt_min <= s.rtt_srtt <= s.rtt_max
        close(a, b)

    run(main())


@pytest.mark.parametrize("seed", range(6))
def test_impaired_wire_delivers_everything_exactly_once_in_order(seed):
    async def main():
        impaired = partial(Wire, drop=0.05, corrupt=0.05, duplicate=0.05, reorder=0.03)
        a, b = await up_pair(impaired(seed=seed), impaired(seed=seed + 100))
        to_b, to_a = payloads("ab", 300), payloads("ba", 300)
        futs = [a.link.send(p) for p in to_b] + [b.link.send(p) for p in to_a]
        await asyncio.gather(*futs)
        # one last payload each way, acknowledged: the wires keep order, so a late duplicate of
        # anything before it would have been delivered by now
        await asyncio.gather(a.link.send(b"last a->b"), b.link.send(b"last b->a"))
        assert b.delivered == [*to_b, b"last a->b"] and a.delivered == [*to_a, b"last b->a"]
        sa, sb = a.link.stats, b.link.stats
        assert sa.retransmits + sb.retransmits > 0
        assert sa.framing.crc_errors + sa.framing.cobs_errors + sb.framing.crc_errors + sb.framing.cobs_errors > 0
        assert sa.duplicates_dropped + sb.duplicates_dropped > 0
        assert sa.framing.bytes_discarded + sb.framing.bytes_discarded > 0
        for s in (sa, sb):
            assert 0.002 <= s.rto <= 0.2
        close(a, b)

    run(main())


def test_lost_data_frame_is_nakked_and_resent_before_any_timeout():
    async def main():
        cfg = LinkConfig(initial_rto=5.0, min_rto=5.0, max_rto=10.0)  # a timeout would hang the test
        a, b = await up_pair(config=cfg)
        a.wire_out.drop_next = 1
        await asyncio.gather(*(a.link.send(p) for p in payloads("x", 5)))
        assert b.delivered == payloads("x", 5)
        assert b.link.stats.naks_sent == 1 and a.link.stats.naks_received == 1
        assert a.link.stats.timeouts == 0 and a.link.stats.retransmits >= 4
        close(a, b)

    run(main())


def test_retransmitted_frame_gives_no_rtt_sample():
    async def main():
        a, b = await up_pair(config=STEADY)
        a.wire_out.drop_next = 1
        await a.link.send(b"once")
        assert b.delivered == [b"once"]
        assert a.link.stats.retransmits == 1 and a.link.stats.rtt_last is None
        close(a, b)

    run(main())


def test_duplicate_data_is_dropped_and_acked_again():
    async def main():
        a, b = await up_pair(config=STEADY)
        b.wire_out.drop_next = 1  # lose B's ACK: A resends, B must not deliver twice
        await a.link.send(b"card")
        assert b.delivered == [b"card"]
        assert b.link.stats.duplicates_dropped == 1 and b.link.stats.data_delivered == 1
        close(a, b)

    run(main())


def test_window_limits_frames_in_flight():
    async def main():
        cfg = LinkConfig(initial_rto=5.0, min_rto=5.0, max_rto=10.0, window=4)
        a, b = await up_pair(config=cfg)
        b.wire_out.cut = True  # no ACKs come back
        futs = [a.link.send(p) for p in payloads("w", 10)]
        await until(lambda: len(b.delivered) == 4)
        await asyncio.sleep(0.02)
        assert a.link.stats.data_sent == 4 and len(b.delivered) == 4
        b.wire_out.cut = False
        b.link.bytes_received(b"")  # nothing new: B's next ACK rides on the next frame it sends
        await b.link.send(b"wake")  # carries ack=4 to A, which opens the window
        await asyncio.gather(*futs)
        assert b.delivered == payloads("w", 10)
        close(a, b)

    run(main())


def test_retry_cap_fails_then_a_reset_recovers():
    async def main():
        cfg = LinkConfig(initial_rto=0.005, min_rto=0.001, max_rto=0.02, max_retries=5)
        a, b = await up_pair(config=cfg)
        a.wire_out.cut = True
        fut = a.link.send(b"lost")
        rtos = []
        while not fut.done():
            rtos.append(a.link.stats.rto)
            await asyncio.sleep(0.001)
        with pytest.raises(LinkFailed, match="after 5 retries"):
            fut.result()
        assert a.link.state is LinkState.FAILED and a.events[-1][0] is LinkEvent.FAILED
        assert a.link.stats.timeouts == 6
        assert all(0.001 <= r <= 0.02 for r in rtos) and max(rtos) == 0.02  # backed off up to the clamp
        with pytest.raises(LinkFailed, match="reset it first"):
            await a.link.send(b"refused while failed")

        a.wire_out.cut = False
        a.link.reset("test recovery")
        await until(lambda: a.link.state is LinkState.UP)
        assert b.events[-1][0] is LinkEvent.PEER_RESET
        await a.link.send(b"after")
        assert b.delivered == [b"after"]  # "lost" never arrived, sequence restarted at 0
        close(a, b)

    run(main())


def test_reset_retries_are_capped_too():
    async def main():
        cfg = LinkConfig(initial_rto=0.002, min_rto=0.001, max_rto=0.004, max_retries=3)
        a, b = make_pair(Wire(cut=True), config=cfg)
        a.link.start()
        await until(lambda: a.link.state is LinkState.FAILED)
        assert a.link.stats.resets_sent == 4
        assert "RESET" in a.events[-1][1]
        close(a, b)

    run(main())


def test_peer_reset_mid_stream_fails_unacked_and_is_reported():
    async def main():
        a, b = await up_pair()
        b.wire_out.cut = True  # A's frames stay unacknowledged
        fut = a.link.send(b"pending")
        await until(lambda: b.delivered == [b"pending"])
        b.wire_out.cut = False
        b.link.reset("device rebooted")  # what a rebooted device does first
        await until(lambda: a.events[-1][0] is LinkEvent.PEER_RESET)
        with pytest.raises(LinkReset, match="peer reset"):
            await fut
        await until(lambda: b.link.state is LinkState.UP)
        await b.link.send(b"hello again")
        assert a.delivered == [b"hello again"]
        close(a, b)

    run(main())


def test_repeated_reset_is_acknowledged_again_not_applied_twice():
    async def main():
        a, b = make_pair(config=STEADY)
        b.wire_out.drop_next = 1  # B's first RESET_ACK is lost: A resends the same RESET
        a.link.start()
        await until(lambda: a.link.state is LinkState.UP)
        assert a.link.stats.resets_sent == 2
        assert b.link.stats.peer_resets == 1 and len(b.events) == 1
        close(a, b)

    run(main())


def test_both_ends_resetting_at_once_settle_up():
    async def main():
        a, b = make_pair()
        a.link.start()
        b.link.start()
        await until(lambda: a.link.state is LinkState.UP and b.link.state is LinkState.UP)
        await asyncio.gather(a.link.send(b"1"), b.link.send(b"2"))
        assert b.delivered == [b"1"] and a.delivered == [b"2"]
        close(a, b)

    run(main())


def test_sequence_numbers_wrap():
    async def main():
        a, b = await up_pair(config=STEADY)
        data = payloads("s", 700)
        await asyncio.gather(*(a.link.send(p) for p in data))
        assert b.delivered == data
        # the seq each payload went out with (a retransmission, e.g. a tail loss probe on a
        # busy machine, repeats a payload with the same seq: it does not shift the check)
        frames = [decode_frame(w[1:-1]) for w in a.wire_out.written]
        seq_of = {f.payload: f.seq for f in frames if f.kind is FrameKind.DATA}
        assert [seq_of[p] for p in data] == [i % 256 for i in range(700)]  # 0..255, then 0 again
        close(a, b)

    run(main())


def test_close_fails_outstanding_and_stops_everything():
    async def main():
        a, b = await up_pair()
        b.wire_out.cut = True
        fut = a.link.send(b"x")
        a.link.close()
        a.link.close()  # idempotent
        with pytest.raises(LinkFailed, match="closed"):
            await fut
        written = len(a.wire_out.written)
        await asyncio.sleep(0.1)  # several RTOs: no timer may fire after close
        assert len(a.wire_out.written) == written
        assert [e for e, _ in a.events].count(LinkEvent.CLOSED) == 1
        with pytest.raises(LinkFailed):
            a.link.reset()
        b.link.close()

    run(main())


def test_bad_callbacks_and_writes_do_not_stop_the_link():
    async def main():
        a, b = await up_pair()
        calls = []

        def explode(payload):
            calls.append(payload)
            raise RuntimeError("receiver bug")

        b.link._on_payload = explode  # the receiver's own code is the boundary here
        await a.link.send(b"1")
        await a.link.send(b"2")
        assert calls == [b"1", b"2"]

        def broken_write(data):
            raise OSError(5, "EIO")

        a.link._write_bytes = broken_write
        fut = a.link.send(b"3")
        await until(lambda: a.link.stats.write_errors >= 2)
        assert not fut.done()
        close(a, b)
        with pytest.raises(LinkFailed):
            await fut

    run(main())


def test_limits_and_config_errors_are_clear():
    async def main():
        a, b = await up_pair()
        with pytest.raises(ValueError, match="MAX_PAYLOAD"):
            a.link.send(bytes(MAX_PAYLOAD + 1))
        await a.link.send(bytes(MAX_PAYLOAD))
        assert b.delivered == [bytes(MAX_PAYLOAD)]
        close(a, b)

    run(main())
    with pytest.raises(ValueError, match="window=200"):
        LinkConfig(window=200)
    with pytest.raises(ValueError, match="min_rto <= initial_rto"):
        LinkConfig(initial_rto=2.0, max_rto=1.0)


def test_garbage_between_frames_is_counted_not_fatal():
    async def main():
        a, b = await up_pair()
        b.link.bytes_received(b"\x11\x22\x33\x00\xff" * 300)
        b.link.bytes_received(Frame(FrameKind.DATA).payload)  # empty: no-op
        await a.link.send(b"still fine")
        assert b.delivered == [b"still fine"]
        assert b.link.stats.framing.errors >= 300
        close(a, b)

    run(main())


def test_a_burst_is_acknowledged_before_its_payloads_are_handed_over():
    """The peer may send its next frames while this side works on a burst (docs/protocol.md §2.1)."""
    async def main():
        a, b = await up_pair(config=STEADY)
        acks_seen: list[list[int]] = []

        def on_payload(payload: bytes) -> None:  # the receiver's own code is the boundary here
            frames = [decode_frame(chunk) for data in b.wire_out.written for chunk in data.split(b"\0") if chunk]
            acks_seen.append([f.ack for f in frames if f.kind is FrameKind.ACK])

        b.link._on_payload = on_payload
        burst = [Frame(FrameKind.DATA, seq, 0, f"card {seq}".encode()) for seq in range(3)]
        b.link.bytes_received(b"".join(encode_frame(f) for f in burst))
        assert acks_seen == [[3], [3], [3]]  # one ACK for the whole burst, out before the first payload
        assert b.link.stats.data_delivered == 3
        close(a, b)

    run(main())


def test_closing_from_a_payload_callback_delivers_nothing_more():
    """A close is this side giving the link up (a device it no longer trusts, the application
    going away): the rest of the batch, acknowledged or not, never reaches the application. A
    reset asked for before it in the same batch does not revive the link."""
    async def main():
        a, b = await up_pair(config=STEADY)
        got: list[bytes] = []
        after_close: list[LinkState] = []  # (an assert in the callback would only be logged)

        def on_payload(payload: bytes) -> None:  # the receiver's own code is the boundary here
            got.append(payload)
            if payload == b"reset":
                b.link.reset("application asked")
            else:
                b.link.close()
                after_close.append(b.link.state)

        b.link._on_payload = on_payload
        batch = [Frame(FrameKind.DATA, 0, 0, b"reset"), Frame(FrameKind.DATA, 1, 0, b"bye"),
                 Frame(FrameKind.DATA, 2, 0, b"more"), Frame(FrameKind.RESET, payload=b"abcd"),
                 Frame(FrameKind.DATA, 0, 0, b"after")]
        b.link.bytes_received(b"".join(encode_frame(f) for f in batch))
        assert got == [b"reset", b"bye"] and after_close == [LinkState.CLOSED]  # at once: nothing after it
        assert b.link.state is LinkState.CLOSED  # neither the reset asked before nor the peer's RESET revives it
        stats = b.link.stats  # the one peer reset is up_pair's; the reset asked for never went out
        assert (stats.data_delivered, stats.peer_resets, stats.resets_sent) == (2, 1, 0)
        assert [e for e, _ in b.events] == [LinkEvent.PEER_RESET, LinkEvent.CLOSED]
        a.link.close()

    run(main())


def test_resetting_from_a_payload_callback_loses_no_acknowledged_payload():
    """A real pair: B's callback resets the link at the first payload of a burst that B has
    already acknowledged; A's sends all succeed, so B must hand over every one before the reset."""
    async def main():
        a, b = await up_pair(config=STEADY)
        got: list[bytes] = []

        def on_payload(payload: bytes) -> None:  # the receiver's own code is the boundary here
            got.append(payload)
            if payload == b"reset now":
                b.link.reset("application asked")
                b.link.send(b"sent before the reset applies").add_done_callback(late.append)

        late: list[asyncio.Future] = []
        b.link._on_payload = on_payload
        a.wire_out.cut = True  # A's burst is caught and given to B as one read
        burst = [b"reset now", b"card 1", b"card 2"]
        sends = [a.link.send(p) for p in burst]
        b.link.bytes_received(b"".join(a.wire_out.written[-3:]))
        a.wire_out.cut = False
        await asyncio.gather(*sends)  # B acknowledged all three ...
        assert got == burst  # ... and delivered them all, the reset after them
        with pytest.raises(LinkReset, match="application asked"):
            late[0].result()  # unacknowledged when the reset applied
        await until(lambda: b.link.state is LinkState.UP and a.events[-1][0] is LinkEvent.PEER_RESET)
        assert b.link.stats.resets_sent == 1 and b.link.stats.data_delivered == 3
        await a.link.send(b"next")  # the new link, from seq 0
        assert got == [*burst, b"next"]
        close(a, b)

    run(main())


def test_a_payload_callback_that_fails_is_logged_and_the_payloads_after_it_still_come():
    """One read of three DATA frames: the owner's callback fails on the second; that is logged
    (link, size and head of the payload) and the third is handed over all the same, once."""
    from structlog.testing import capture_logs

    from firmware_bridge.link import Link

    async def main():
        written: list[bytes] = []
        delivered: list[bytes] = []

        def on_payload(payload: bytes) -> None:
            if payload == b"bad\x00":
                raise RuntimeError("the owner's bug")
            delivered.append(payload)

        link = Link(written.append, on_payload, name="shoe")
        link.bytes_received(encode_frame(Frame(FrameKind.RESET, payload=b"\x01\x02\x03\x04")))
        assert link.state is LinkState.UP
        chunk = b"".join(encode_frame(Frame(FrameKind.DATA, seq, 0, p))
                         for seq, p in enumerate([b"one", b"bad\x00", b"three"]))
        with capture_logs() as logs:
            link.bytes_received(chunk)
        assert delivered == [b"one", b"three"]
        assert link.stats.data_delivered == 3
        assert decode_frame(written[-1][1:-1]) == Frame(FrameKind.ACK, 0, 3)
        [failed] = [e for e in logs if e["event"] == "payload_callback_failed"]
        assert (failed["link"], failed["size"], failed["head"]) == ("shoe", 4, "62 61 64 00")
        link.close()

    run(main())
