"""Loss recovery of one Link driven frame by frame (no wire, no timers unless a test waits for
one): NAKs repeated per resend round, the congestion window, the tail loss probe."""
from __future__ import annotations

import asyncio

import pytest

from firmware_bridge.framing import Frame, FrameKind, decode_frame, encode_frame
from firmware_bridge.link import Link, LinkConfig, LinkState

from tests.support.aio import run
from tests.support.poll import until

pytestmark = pytest.mark.timeout(30)

# timers far above the test's run time: whatever recovers a loss here is the NAK logic
NO_TIMER = LinkConfig(initial_rto=5.0, min_rto=5.0, max_rto=10.0)


class Driven:
    """A Link whose every written frame is kept, fed with hand-made frames."""

    def __init__(self, config: LinkConfig) -> None:
        self.written: list[Frame] = []
        self.delivered: list[bytes] = []
        self.link = Link(lambda data: self.written.append(decode_frame(data[1:-1])), self.delivered.append,
                         config=config, name="driven")

    def feed(self, *frames: Frame) -> list[Frame]:
        """Feed ``frames``; returns what the link wrote in answer."""
        before = len(self.written)
        self.link.bytes_received(b"".join(encode_frame(f) for f in frames))
        return self.written[before:]


def up(config: LinkConfig = NO_TIMER) -> Driven:
    """A link that has started and had its RESET acknowledged."""
    d = Driven(config)
    d.link.start()
    d.feed(Frame(FrameKind.RESET_ACK, payload=d.written[-1].payload))
    assert d.link.state is LinkState.UP
    return d


def data(seq: int) -> Frame:
    return Frame(FrameKind.DATA, seq, 0, f"p{seq}".encode())


def naks(frames: list[Frame]) -> list[int]:
    return [f.ack for f in frames if f.kind is FrameKind.NAK]


def test_a_gap_is_nakked_again_when_a_resend_round_arrives_without_its_head():
    async def main():
        rx = up()
        assert naks(rx.feed(data(1), data(2), data(3))) == [0]  # one NAK for the gap, not three
        assert naks(rx.feed(data(4))) == []  # the same round going on
        # the peer resent from 0, and 0 was lost again: 1 is no further ahead than 4 was
        assert naks(rx.feed(data(1))) == [0]
        assert naks(rx.feed(data(2), data(3))) == []
        rx.feed(data(0), data(1), data(2))
        assert rx.delivered == [b"p0", b"p1", b"p2"] and rx.link.stats.naks_sent == 2
        rx.link.close()

    run(main())


def test_retransmits_halve_the_window_and_acks_open_it_again():
    async def main():
        tx = up()
        futures = [tx.link.send(bytes([i])) for i in range(16)]
        assert [f.seq for f in tx.written if f.kind is FrameKind.DATA] == list(range(16))
        resent = tx.feed(Frame(FrameKind.NAK, ack=0))
        assert [f.seq for f in resent] == list(range(8))  # go-back-N, but only half a window at once
        assert tx.link.stats.cwnd == 8
        more = tx.feed(Frame(FrameKind.ACK, ack=4))
        assert [f.seq for f in more] == list(range(8, 13))  # 4 left the window, it grew by one: 9 in flight
        assert tx.link.stats.cwnd == 9 and all(f.done() for f in futures[:4])
        tx.feed(Frame(FrameKind.NAK, ack=4), Frame(FrameKind.NAK, ack=4))
        assert tx.link.stats.cwnd == 4  # never below MIN_CWND
        tx.link.close()
        for f in futures:
            f.exception() if f.done() else f.cancel()

    run(main())


def test_a_lost_ack_at_the_tail_is_recovered_by_a_probe_not_the_timeout():
    async def main():
        config = LinkConfig(initial_rto=1.0, min_rto=1.0, max_rto=2.0)  # probes come after >= 0.25 s
        tx = up(config)
        first = tx.link.send(b"sampled")
        tx.feed(Frame(FrameKind.ACK, ack=1))
        assert first.done() and tx.link.stats.rtt_srtt is not None
        tail = tx.link.send(b"its ACK is lost")
        await until(lambda: tx.link.stats.probes == 1)
        assert tx.written[-1] == Frame(FrameKind.DATA, 1, 0, b"its ACK is lost")  # the oldest frame, alone
        tx.feed(Frame(FrameKind.ACK, ack=2))  # what the peer answers to the duplicate
        assert tail.done() and tx.link.stats.timeouts == 0
        tx.link.close()

    run(main())


def test_a_clean_line_keeps_the_full_window():
    async def main():
        tx = up()
        for i in range(40):
            tx.link.send(bytes([i]))
        for ack in range(1, 41):
            tx.feed(Frame(FrameKind.ACK, ack=ack))
        assert tx.link.stats.cwnd == 16 and tx.link.stats.retransmits == 0 and tx.link.stats.probes == 0
        tx.link.close()

    run(main())


def test_an_ack_beyond_what_was_sent_is_ignored_not_an_index_error():
    """A stale ACK (from before a reset) or a lying one names more frames than are in flight:
    the link ignores it, and bytes_received never raises."""
    async def main():
        tx = up()
        futures = [tx.link.send(bytes([i])) for i in range(2)]
        assert tx.feed(Frame(FrameKind.ACK, ack=10)) == []
        assert not any(f.done() for f in futures) and tx.link.state is LinkState.UP
        tx.feed(Frame(FrameKind.ACK, ack=2))
        assert all(f.done() and f.exception() is None for f in futures)
        tx.link.close()

    run(main())
