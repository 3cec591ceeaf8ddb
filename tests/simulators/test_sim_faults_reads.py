"""The fault switches behind the tracker's hardening reason codes: a repeated, a conflicting and a
skipped read index (shoe), a shuffle report out of order (shuffler), a silent heartbeat and a device of the other
role (both). Each scenario of cardd/bench/scenarios/ that uses one shows what the daemon makes of it."""
from __future__ import annotations

import asyncio

import pytest

from firmware_bridge.messages import (CardRead, CutCardSeen, DeckCheckResult, DeviceRole, Heartbeat, Hello, Ident,
                                      ShuffleComplete, ShuffleProgress, StartShuffle, UnreadableCard)
from simulators.faults import Faults, FaultSpecError
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import full_shoe

DECK = full_shoe(1)
HELLO = Hello(1, 1, "host")


def test_repeat_read_at_sends_the_same_read_twice(run_device):
    async def body(h):
        h.device.load(DECK, cut_at=3)
        h.device.deal(5)
        await h.until(CardRead, 6)
        assert [r.index for r in h.of(CardRead)] == [1, 2, 3, 3, 4, 5]
        first, again = h.of(CardRead)[2:4]
        assert first == again and first.card == DECK[2]
        assert [m.index for m in h.out if isinstance(m, (CardRead, CutCardSeen))][3:5] == [3, 3]  # cut after both
    run_device(lambda: SimulatedShoe(faults=Faults(repeat_read_at=3), heartbeat_s=0), body)


def test_repeat_read_at_repeats_an_unreadable_card_too(run_device):
    async def body(h):
        h.device.load(DECK)
        h.device.deal(3)
        await h.until(CardRead, 2)
        assert [u.index for u in h.of(UnreadableCard)] == [2, 2]
    run_device(lambda: SimulatedShoe(faults=Faults(repeat_read_at=2, unreadable_at=2), heartbeat_s=0), body)


def test_conflicting_read_at_sends_the_index_again_with_another_card(run_device):
    async def body(h):
        h.device.load(DECK)
        h.device.deal(4)
        await h.until(CardRead, 5)
        assert [r.index for r in h.of(CardRead)] == [1, 2, 3, 3, 4]
        first, other = h.of(CardRead)[2:4]
        assert first.card == DECK[2] and other.card != first.card and other.card.suit == first.card.suit
    run_device(lambda: SimulatedShoe(faults=Faults(conflicting_read_at=3), heartbeat_s=0), body)


def test_skip_read_at_lets_a_card_leave_unseen(run_device):
    async def body(h):
        h.device.load(DECK, cut_at=4)
        h.device.deal(6)
        await h.until(CardRead, 5)
        reads = h.of(CardRead)
        assert [r.index for r in reads] == [1, 2, 3, 5, 6]
        assert [r.card for r in reads] == [DECK[0], DECK[1], DECK[2], DECK[4], DECK[5]]
        assert h.of(CutCardSeen)[0].index == 4  # the cut card still comes out where it sits
        assert h.device.dealt == DECK[:6] and h.device.state()["cards_out"] == 6  # the card did leave
    run_device(lambda: SimulatedShoe(faults=Faults(skip_read_at=4), heartbeat_s=0), body)


def test_late_report_at_sends_that_progress_report_after_the_count(run_device):
    async def body(h):
        h.send(StartShuffle(1))
        await h.until(DeckCheckResult)
        kinds = [type(m) for m in h.out if isinstance(m, (ShuffleProgress, ShuffleComplete, DeckCheckResult))]
        assert kinds[-3:] == [ShuffleComplete, ShuffleProgress, DeckCheckResult]
        counted = [p.cards_counted for p in h.of(ShuffleProgress)]
        assert counted == [5, 15, 20, 26, 31, 36, 41, 46, 52, 10]  # the first report at 7 or more (10) comes last
        assert h.of(DeckCheckResult)[0].ok  # the count itself is right
    run_device(lambda: SimulatedShuffler(faults=Faults(late_report_at=7), heartbeat_s=0), body)


def test_late_report_at_applies_at_every_shuffle(run_device):
    async def body(h):
        for shuffle in (1, 2):
            h.send(StartShuffle(1))
            await h.until(DeckCheckResult, shuffle)
            h.device.unload()
        order = [type(m) for m in h.out if isinstance(m, (ShuffleProgress, ShuffleComplete, DeckCheckResult))]
        assert order.count(ShuffleComplete) == 2
        for at in [i for i, kind in enumerate(order) if kind is ShuffleComplete]:
            assert order[at + 1] is ShuffleProgress and order[at + 2] is DeckCheckResult
    run_device(lambda: SimulatedShuffler(faults=Faults(late_report_at=52), heartbeat_s=0), body)


def test_no_heartbeat_silences_heartbeats_until_switched_off(run_device):
    async def body(h):
        h.device.load(DECK)
        h.device.deal(2)
        await h.until(CardRead, 2)  # other messages still go
        await asyncio.sleep(0.1)  # ten heartbeat intervals
        assert h.of(Heartbeat) == []
        h.device.set_faults(no_heartbeat=False)
        await h.until(Heartbeat)
    run_device(lambda: SimulatedShoe(faults=Faults(no_heartbeat=True), heartbeat_s=0.01), body)


@pytest.mark.parametrize("device, other", [(SimulatedShoe, DeviceRole.SHUFFLER),
                                           (SimulatedShuffler, DeviceRole.SHOE)])
def test_wrong_role_identifies_as_another_unit_of_the_other_kind(run_device, device, other):
    """Another unit: its own serial and its own event numbering (a real device of the other kind
    numbers its own events), from the Hello after the switch until the Hello after it is off."""
    async def body(h):
        assert h.send(HELLO)[0].role is device.ROLE
        own = h.device.events
        own.add(Heartbeat(1))  # stands for an event the device numbered as itself
        h.device.set_faults(wrong_role=True)
        assert h.device.events is own  # not before the host is told who answers
        [ident] = h.send(HELLO)
        assert isinstance(ident, Ident) and ident.role is other and ident.serial == h.device.other_serial
        assert ident.serial != h.device.serial and h.device.events is not own and h.device.events.last_index == 0
        assert h.device.events.add(Heartbeat(2)) == 1  # numbered from 1, by itself
        h.device.set_faults(wrong_role=False)
        [ident] = h.send(HELLO)
        assert (ident.role, ident.serial) == (device.ROLE, h.device.serial)
        assert h.device.events is own and own.last_index == 1
    run_device(lambda: device(heartbeat_s=0), body)


@pytest.mark.parametrize("spec, error", [("skip_read_at=0", "a card position, 1 or more"),
                                         ("no_heartbeat=maybe", "no value, or one of")])
def test_bad_values_say_what_the_switch_takes(spec, error):
    with pytest.raises(FaultSpecError, match=error):
        Faults.parse(spec)
