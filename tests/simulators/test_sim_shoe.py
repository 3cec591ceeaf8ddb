"""The simulated shoe: reads in stack order, cut card, empty shoe, and each device fault switch."""
from __future__ import annotations

import asyncio

import pytest

from core.cards import Card, Orientation
from firmware_bridge.messages import (Calibrate, CalibrationResult, CardRead, CutCardSeen, Hello, ShoeEmpty,
                                      ShoeLoaded, UnreadableCard)
from simulators.faults import Faults
from simulators.shoe import SimulatedShoe
from simulators.stack import full_shoe

DECK = full_shoe(1)
QS = Card.parse("QS")


def shoe(pace_s=None, **faults) -> SimulatedShoe:
    return SimulatedShoe(faults=Faults(**faults), heartbeat_s=0, pace_s=pace_s)


def test_cards_come_out_in_stack_order_with_cut_card_and_empty(run_device):
    async def body(h):
        h.device.load(DECK, cut_at=40)
        assert isinstance(h.out[0], ShoeLoaded)
        h.device.deal(30)
        reads = await h.until(CardRead, 30)
        assert [r.card for r in reads] == DECK[:30] and [r.index for r in reads] == list(range(1, 31))
        assert all(r.orientation is Orientation.FACE_DOWN for r in reads)
        assert h.device.state()["cards_held"] == 22
        h.device.deal(100)  # more than is left: the shoe runs out
        await h.until(ShoeEmpty)
        assert [r.card for r in h.of(CardRead)] == DECK
        assert h.of(CutCardSeen)[0].index == 40
        cut = h.out.index(h.of(CutCardSeen)[0])
        assert h.out[cut - 1].index == 40 and h.out[cut + 1].index == 41
        assert h.of(ShoeEmpty)[0].cards_out == 52
    run_device(lambda: shoe(), body)


def test_shoe_deals_by_itself_at_a_pace(run_device):
    async def body(h):
        h.device.load(DECK[:5])
        await h.until(ShoeEmpty)
        assert [r.card for r in h.of(CardRead)] == DECK[:5]
        times = [r.device_time_ms for r in h.of(CardRead)]
        assert times == sorted(times)
    run_device(lambda: shoe(pace_s=0.002), body)


def test_face_up_card_at_position(run_device):
    async def body(h):
        h.device.load(DECK)
        h.device.deal(5)
        reads = await h.until(CardRead, 5)
        assert [r.orientation for r in reads] == [Orientation.FACE_DOWN] * 2 + [Orientation.FACE_UP] + \
            [Orientation.FACE_DOWN] * 2
    run_device(lambda: shoe(face_up_at=3), body)


def test_unreadable_card_and_foreign_card(run_device):
    async def body(h):
        h.device.load(DECK)
        h.device.deal(52 + 1)
        await h.until(ShoeEmpty)
        unreadable = h.of(UnreadableCard)
        assert 4 in [u.index for u in unreadable] and len(unreadable) == 2  # index 4 + the foreign card
        assert len(h.of(CardRead)) == 51
    run_device(lambda: shoe(unreadable_at=4, foreign=1), body)


def test_duplicate_card_is_read_twice(run_device):
    async def body(h):
        h.device.load(DECK)
        h.device.deal(53)
        await h.until(ShoeEmpty)
        cards = [r.card for r in h.of(CardRead)]
        assert cards.count(QS) == 2 and cards[cards.index(QS) + 1] == QS
    run_device(lambda: shoe(duplicate=(QS,)), body)


def test_missing_and_extra_cards(run_device):
    AS, JOKERISH = Card.parse("AS"), Card.parse("2C")

    async def body(h):
        h.device.load(DECK)
        h.device.deal(60)
        await h.until(ShoeEmpty)
        cards = [r.card for r in h.of(CardRead)]
        assert AS not in cards and cards.count(JOKERISH) == 2 and len(cards) == 52
    run_device(lambda: shoe(missing=(AS,), extra=(JOKERISH,)), body)


def test_reboot_mid_stream_keeps_position_and_changes_boot_id(run_device):
    async def body(h):
        boot = h.send(Hello(1, 0, "t"))[0].boot_id
        await asyncio.sleep(0.3)  # an uptime before the reboot that its first read after cannot reach
        h.device.load(DECK)
        h.device.deal(20)
        reads = await h.until(CardRead, 20)
        assert [r.index for r in reads] == list(range(1, 21))
        assert h.link_resets == 1 and h.device.state()["reboots"] == 1
        assert h.send(Hello(1, 0, "t"))[0].boot_id != boot
        assert reads[9].device_time_ms >= 300 > reads[10].device_time_ms  # uptime restarted
    run_device(lambda: shoe(reboot_at=10), body)


def test_disconnect_at_card(run_device):
    async def body(h):
        h.device.load(DECK)
        h.device.deal(10)
        await h.until(CardRead, 10)
        assert h.disconnects == [0.5]
        assert h.device.faults.disconnect_for is None  # one shot
    run_device(lambda: shoe(disconnect_for=0.5, disconnect_at=5), body)


def test_calibration(run_device):
    async def body(h):
        [result] = h.send(Calibrate())
        assert isinstance(result, CalibrationResult) and result.ok
    run_device(lambda: shoe(), body)


def test_a_load_larger_than_the_card_index_can_count_is_refused(run_device):
    async def body(h):
        with pytest.raises(ValueError, match="a shoe load of 65536 cards: at most 65535"):
            h.device.load(full_shoe(1261)[:65536])
        assert h.device.cards_held() == 0
    run_device(lambda: SimulatedShoe(heartbeat_s=0), body)


def test_a_cut_card_beyond_the_stack_is_refused_before_anything_is_loaded():
    shoe = SimulatedShoe(heartbeat_s=0)
    with pytest.raises(ValueError, match="beyond the stack: the shoe is loaded with 52 cards"):
        shoe.load(DECK, cut_at=53)
    assert shoe.cards_held() == 0 and shoe.cut_at is None
