"""What both devices share: a failing handler still answers, and undealt cards never leave the
device through state(), emitted messages or logs (only the shoe's reads, card by card)."""
from __future__ import annotations

import dataclasses

from structlog.testing import capture_logs

from core.cards import Card
from firmware_bridge.messages import CardRead, Refused, StartShuffle, Status, StatusRequest
from simulators.faults import Faults
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import fisher_yates, full_shoe


class BrokenShoe(SimulatedShoe):
    def status(self) -> Status:
        raise ZeroDivisionError("sensor table empty")


def test_a_handler_that_raises_is_refused_with_the_reason_and_logged(run_device):
    async def body(h):
        with capture_logs() as logs:
            [reply] = h.send(StatusRequest())
        assert isinstance(reply, Refused) and reply.request_type == StatusRequest.TYPE
        assert "internal error handling StatusRequest: ZeroDivisionError('sensor table empty')" in reply.reason
        assert [e["message"] for e in logs if e["event"] == "sim_handler_failed"] == ["StatusRequest"]
    run_device(lambda: BrokenShoe(heartbeat_s=0), body)


def cards_in(value: object) -> list[Card]:
    """Every Card reachable in ``value`` (dicts, sequences, dataclasses), in order found."""
    if isinstance(value, Card):
        return [value]
    if isinstance(value, dict):
        return [c for k, v in value.items() for c in cards_in(k) + cards_in(v)]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [c for item in value for c in cards_in(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [c for f in dataclasses.fields(value) for c in cards_in(getattr(value, f.name))]
    return []


def test_the_shoe_reveals_only_the_cards_it_has_dealt(run_device):
    stack = fisher_yates(full_shoe(1))

    async def body(h):
        with capture_logs() as logs:
            h.device.load(stack, cut_at=30)
            h.device.deal(5)
            await h.until(CardRead, 5)
            state = h.device.state()
        assert state["cards_held"] == 47 and cards_in(state) == []
        assert cards_in(logs) == [] and not any(f"'{card}'" in repr(logs) for card in stack)
        assert cards_in(h.out) == stack[:5]  # CardRead by CardRead, in order, nothing ahead
    run_device(lambda: SimulatedShoe(heartbeat_s=0), body)


def test_a_shuffled_stack_stays_inside_the_shuffler(run_device):
    async def body(h):
        with capture_logs() as logs:
            h.send(StartShuffle(2))
            await h.until_true(lambda: h.device.state()["state"] == "READY")
            state = h.device.state()
        assert state["cards_held"] == 104 and cards_in(state) == [] and cards_in(logs) == []
        # the reports carry counts per card (composition, deck check), never a sequence of cards
        for msg in h.out:
            for f in dataclasses.fields(msg):
                value = getattr(msg, f.name)
                assert not (isinstance(value, (list, tuple)) and value and all(isinstance(v, Card) for v in value)), msg
    run_device(lambda: SimulatedShuffler(faults=Faults(jam=0.0), heartbeat_s=0), body)
