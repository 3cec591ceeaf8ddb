"""The simulated shuffler: counting, verification, stacked mode and each device fault switch."""
from __future__ import annotations

import random

from core.cards import ALL_CARDS, Card, shoe_composition
from firmware_bridge.messages import (ClearFault, Counters, CountersRequest, DeckCheckResult, DeviceState, Fault,
                                      FaultCleared, FaultCode, Hello, Ident, Refused, SelfTest, SelfTestResult,
                                      ShuffleComplete, ShuffleProgress, StartShuffle, Status, StatusRequest,
                                      encode)
from simulators.faults import Faults
from simulators.shuffler import SimulatedShuffler
from simulators.stack import fisher_yates, full_shoe

AS, SEVEN_H, QS = Card.parse("AS"), Card.parse("7H"), Card.parse("QS")


def shuffler(**faults) -> SimulatedShuffler:
    return SimulatedShuffler(faults=Faults(**faults), heartbeat_s=0)


def test_six_deck_shoe_is_counted_identified_and_verified(run_device):
    async def body(h):
        assert h.send(StartShuffle(6)) == []
        [check] = await h.until(DeckCheckResult)
        [complete] = h.of(ShuffleComplete)
        assert complete.card_count == 312
        assert complete.composition == shoe_composition(6)
        assert check == DeckCheckResult(True, 6, (), (), 0)
        progress = h.of(ShuffleProgress)
        assert [p.cards_counted for p in progress] == sorted(p.cards_counted for p in progress)
        assert progress[-1] == ShuffleProgress(312, 100)
        assert h.send(StatusRequest())[0].state is DeviceState.READY
        stack = h.device.unload()
        assert sorted(stack) == sorted(full_shoe(6)) and stack != full_shoe(6)
        assert h.send(CountersRequest()) == [Counters(shuffles=1, cards=312, jams=0, faults=0)]
    run_device(lambda: shuffler(), body)


def test_shuffle_complete_never_carries_the_order(run_device):
    """ShuffleComplete is a function of which cards there are, never of where they are: the
    same cards in other orders (stacked forward and reversed, loaded in a random order and
    shuffled) give the same message, its composition listed in the canonical card order. A
    composition counted from the output order would list the cards in that order."""
    loaded = fisher_yates(full_shoe(1), random.Random(3))

    async def body(h):
        for run, order in enumerate([full_shoe(1), list(reversed(full_shoe(1))), None], start=1):
            h.device.stack(order)
            if order is None:
                h.device.load(loaded)
            h.send(StartShuffle(1))
            await h.until(DeckCheckResult, count=run)
            output = h.device.unload()
            assert order is None or output == order
        first, *others = h.of(ShuffleComplete)
        assert isinstance(first.composition, dict) and set(first.composition.values()) == {1}
        assert list(first.composition) == list(ALL_CARDS)
        assert output not in (full_shoe(1), loaded)  # the random run really had another order
        for complete in others:
            assert list(complete.composition.items()) == list(first.composition.items())
            assert encode(complete) == encode(first)
    run_device(lambda: shuffler(), body)


def test_stacked_mode_outputs_exactly_the_given_order(run_device):
    order = list(reversed(full_shoe(2)))

    async def body(h):
        h.device.stack(order)
        h.send(StartShuffle(2))
        await h.until(DeckCheckResult)
        assert h.device.unload() == order
        assert h.of(DeckCheckResult)[0].ok
    run_device(lambda: shuffler(), body)


def test_missing_extra_foreign_and_duplicate_cards_are_named(run_device):
    async def body(h):
        h.send(StartShuffle(6))
        [check] = await h.until(DeckCheckResult)
        assert not check.ok
        assert check.missing == ((AS, 1),)
        assert dict(check.extra) == {SEVEN_H: 1, QS: 1}
        assert check.unrecognised == 2
        assert h.of(ShuffleComplete)[0].card_count == 312 - 1 + 1 + 2 + 1
    run_device(lambda: shuffler(missing=(AS,), extra=(SEVEN_H,), foreign=2, duplicate=(QS,)), body)


def test_jam_clears_by_itself(run_device):
    async def body(h):
        h.send(StartShuffle(1))
        await h.until(DeckCheckResult)
        [fault] = h.of(Fault)
        assert fault.code is FaultCode.JAM and fault.position == 26
        assert h.of(FaultCleared) == [FaultCleared(FaultCode.JAM)]
        assert h.out.index(fault) < h.out.index(h.of(FaultCleared)[0]) < h.out.index(h.of(DeckCheckResult)[0])
        assert h.send(CountersRequest())[0].jams == 1
    run_device(lambda: shuffler(jam=0.01), body)


def test_jam_that_needs_clearing_waits_for_clear_fault(run_device):
    async def body(h):
        h.send(StartShuffle(1))
        await h.until(Fault)
        status = h.send(StatusRequest())[0]
        assert status.state is DeviceState.FAULT and status.fault == FaultCode.JAM
        assert not h.send(SelfTest())[0].passed
        assert h.of(DeckCheckResult) == []
        assert h.send(ClearFault(FaultCode.JAM)) == []
        await h.until(DeckCheckResult)
        assert h.of(FaultCleared) == [FaultCleared(FaultCode.JAM)]
        assert isinstance(h.send(ClearFault(FaultCode.JAM))[0], Refused)  # nothing left to clear
    run_device(lambda: shuffler(jam_needs_clear=True), body)


def test_door_open_refuses_shuffles_until_closed(run_device):
    async def body(h):
        [fault] = await h.until(Fault)
        assert fault.code is FaultCode.DOOR_OPEN
        [refused] = h.send(StartShuffle(6))
        assert isinstance(refused, Refused) and "door open" in refused.reason
        assert "cause" in h.send(ClearFault(FaultCode.DOOR_OPEN))[0].reason
        h.device.close_door()
        assert h.of(FaultCleared) == [FaultCleared(FaultCode.DOOR_OPEN)]
        h.send(StartShuffle(6))
        assert (await h.until(DeckCheckResult))[0].ok
    run_device(lambda: shuffler(door_open=True), body)


def test_the_door_switch_at_run_time_opens_and_closes_the_door(run_device):
    """``set_faults(door_open=...)`` (``sim_switches``) moves the door: opened, its fault at once;
    closed, the fault's cause is gone and it clears, so the shuffler shuffles again."""
    async def body(h):
        h.device.set_faults(door_open=True)
        assert h.of(Fault) == [Fault(FaultCode.DOOR_OPEN, 0, "door open")]
        assert h.send(StatusRequest())[0].state is DeviceState.FAULT
        [refused] = h.send(StartShuffle(6))
        assert isinstance(refused, Refused) and "door open" in refused.reason
        h.device.set_faults(door_open=True)  # open already: no second fault
        assert len(h.of(Fault)) == 1
        h.device.set_faults(door_open=False)
        assert h.of(FaultCleared) == [FaultCleared(FaultCode.DOOR_OPEN)]
        assert h.send(StatusRequest())[0].state is DeviceState.IDLE
        assert h.send(StartShuffle(6)) == []
        assert (await h.until(DeckCheckResult))[0].ok
        h.device.raise_fault(FaultCode.DOOR_OPEN)  # a door fault however it came (cardd --simulate's sim_fault)
        h.device.set_faults(drop_rate=0.0)  # other switches leave the door as it is
        assert len(h.of(FaultCleared)) == 1
        h.device.set_faults(door_open=False)  # closing the door ends it
        assert h.of(FaultCleared) == [FaultCleared(FaultCode.DOOR_OPEN)] * 2
    run_device(lambda: shuffler(), body)


def test_face_up_card_stops_the_shuffle_at_its_position(run_device):
    async def body(h):
        h.send(StartShuffle(1))
        [fault] = await h.until(Fault)
        assert (fault.code, fault.position) == (FaultCode.FACE_UP_CARD, 7)
        h.send(ClearFault(FaultCode.FACE_UP_CARD))
        await h.until(DeckCheckResult)
    run_device(lambda: shuffler(face_up_at=7), body)


def test_bad_requests_are_refused_with_a_reason(run_device):
    async def body(h):
        [refused] = h.send(StartShuffle(9))
        assert isinstance(refused, Refused) and "1..8" in refused.reason
        assert isinstance(h.send(Hello(1, 0, "t"))[0], Ident)
        assert h.send(SelfTest())[0] == SelfTestResult(True, h.send(SelfTest())[0].detail)
    run_device(lambda: shuffler(), body)


def test_reset_restores_defaults(run_device):
    async def body(h):
        h.device.set_faults(jam_needs_clear=True)
        h.send(StartShuffle(1))
        await h.until(Fault)
        h.device.reset()
        state = h.device.state()
        assert state["state"] == "IDLE" and state["faults_active"] == [] and state["fault_switches"] == {}
        assert state["counters"] == {"shuffles": 0, "cards": 0, "jams": 0, "faults": 0}
    run_device(lambda: shuffler(), body)


def test_status_and_ident(run_device):
    async def body(h):
        [ident] = h.send(Hello(1, 0, "t"))
        assert ident.serial == "SHUF0001" and ident.firmware_version == "1.0.0"
        assert isinstance(h.send(StatusRequest())[0], Status)
    run_device(lambda: shuffler(), body)


def test_reboot_mid_shuffle_aborts_it_and_keeps_the_cards(run_device):
    async def body(h):
        boot = h.send(Hello(1, 0, "t"))[0].boot_id
        h.send(StartShuffle(6))
        await h.until_true(lambda: h.device.state()["reboots"] == 1)
        assert h.link_resets == 1 and h.send(Hello(1, 0, "t"))[0].boot_id != boot
        assert h.of(ShuffleComplete) == [] and h.send(StatusRequest())[0].state is DeviceState.IDLE
        assert h.device.cards_held() == 312
        h.send(StartShuffle(6))  # the dealer starts it again
        assert (await h.until(DeckCheckResult))[0].ok
    run_device(lambda: shuffler(reboot_at=100), body)
