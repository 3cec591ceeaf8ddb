"""Property: random hostile device messages and random dealer/supervisor inputs, in random states.

Every message type with random fields, random device names and roles, random indexes (mostly
near the next one, so rounds really get dealt), interleaved with every dealer, player and
supervisor input and clock jumps. After every input: nothing but a documented refusal (a
CarddError: TableError, RuleViolation, RoundError, OverrideRefused ...) escapes, and every card
that left the shoe is in exactly one place (``Table.placed() == shoe.out``).

CI: 2,000 examples of 25 inputs (about 35 s). ``CARDD_FULL=1 .venv/bin/python -m pytest -m soak tests/table``:
8,000 examples of 80 inputs.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.table.table_rig import TableRig

from core.cards import ALL_CARDS, Orientation, shoe_composition
from core.errors import CarddError
from devices.events import Role
from devices.game.round_types import Action, Target
from devices.game.rules import HouseRules
from devices.tracker.table import Table
from devices.tracker.inputs import (
    Act, CardsToBoxWithoutWager, ClearAlarm, CloseInsurance, DealerChange, DeviceMessage, DrawnInErrorDecision,
    EnterCard, EvenMoney, HandShuffled, Insure, LinkDown, LinkUp, NoMoreBets, OpenRound, PlaceBet, PlacePairsBet,
    PlacementError, Redeal, Resume, ShoeRemainder, ShuffleStarted, Tick, VoidShoe,
)
from firmware_bridge.messages import (
    CalibrationResult, CardRead, Counters, CutCardSeen, DeckCheckResult, DeviceRole, DeviceState, Fault, FaultCleared,
    FaultCode, Heartbeat, Ident, Refused, SelfTestResult, ShoeEmpty, ShoeLoaded, ShuffleComplete, ShuffleProgress,
    Status, UnreadableCard,
)

FULL = os.environ.get("CARDD_FULL") == "1"
RULES = HouseRules.default()

cards = st.sampled_from(ALL_CARDS)
u16, u32 = st.integers(0, 0xFFFF), st.integers(0, 0xFFFF_FFFF)
text = st.text(max_size=12)
who = st.sampled_from(["dealer-1", "sup-1", "p1", ""])
roles = st.sampled_from(list(Role))
boxes = st.integers(0, 8)
counts = st.lists(st.tuples(cards, st.integers(0, 9)), max_size=4).map(tuple)
compositions = st.one_of(st.just(shoe_composition(RULES.decks)),
                         st.dictionaries(cards, st.integers(0, 12), max_size=5).map(lambda d: {c: d.get(c, 0) for c in ALL_CARDS}))


read_parts = st.tuples(st.sampled_from([CardRead, UnreadableCard, CutCardSeen]), cards,
                       st.sampled_from(list(Orientation)), u32)
#: an index near the next one (repeats, gaps), or anywhere
hostile_index = st.one_of(st.integers(-2, 3).map(lambda d: ("near", d)), u16.map(lambda i: ("any", i)))


def read(parts: tuple, index: int):
    kind, card, orientation, t = parts
    return CardRead(index, card, orientation, t) if kind is CardRead else kind(index, t)


others = st.one_of(
    st.builds(Ident, st.sampled_from(list(DeviceRole)), text, text, text, st.integers(0, 3), st.integers(0, 3),
              st.integers(0, 3)),
    st.builds(Heartbeat, u32),
    st.builds(Status, st.sampled_from(list(DeviceState)), st.integers(0, 255), u16, u32),
    st.builds(Fault, st.sampled_from(list(FaultCode)), u16, text),
    st.builds(FaultCleared, st.sampled_from(list(FaultCode))),
    st.builds(ShuffleProgress, u16, st.integers(0, 255)),
    st.builds(ShuffleComplete, u16, compositions),
    st.builds(DeckCheckResult, st.booleans(), st.integers(0, 9), counts, counts, st.integers(0, 3)),
    st.builds(ShoeLoaded, u32),
    st.builds(ShoeEmpty, u16, u32),
    st.builds(Refused, st.integers(0, 255), text),
    st.builds(Counters, u32, u32, u32, u32),
    st.builds(SelfTestResult, st.booleans(), text),
    st.builds(CalibrationResult, st.booleans(), text),
)


devices = st.sampled_from(["shoe-reader", "shuffler", "shoe-reader", "shuffler", "printer"])
#: the shuffler's life, in and out of order (an instant shuffle, a late progress, a second count)
shuffler_life = st.sampled_from([ShuffleProgress(0, 0), ShuffleComplete(312, shoe_composition(RULES.decks)),
                                 DeckCheckResult(True, RULES.decks, (), (), 0), Heartbeat(1)])
#: a device's life: identify (either role), fault, silence, come back, clear
device_life = st.sampled_from([Ident(DeviceRole.SHOE, "sim", "shoe-reader-1", "1.0.0", 1, 0, 7),
                               Ident(DeviceRole.SHUFFLER, "sim", "shuffler-1", "1.0.0", 1, 0, 7),
                               Fault(FaultCode.COVER_OPEN, 0, "lid"), FaultCleared(FaultCode.COVER_OPEN),
                               Heartbeat(1), Status(DeviceState.UPDATING, 0, 0, 0), Status(DeviceState.IDLE, 0, 0, 0),
                               ShoeLoaded(0)])
targets = st.one_of(st.just(Target("dealer")), st.builds(Target, st.just("box"), boxes, st.integers(0, 3)))
people = st.one_of(
    st.just(OpenRound()), st.builds(PlaceBet, boxes, who, st.integers(-100, 100_000)),
    st.builds(PlacePairsBet, boxes, who, st.integers(-100, 10_000)), st.builds(NoMoreBets, who),
    st.builds(Insure, boxes, who, st.integers(-100, 10_000)), st.builds(EvenMoney, boxes, who),
    st.builds(CloseInsurance, who),
    st.builds(Act, boxes, st.sampled_from(list(Action)), who, st.one_of(st.none(), st.integers(-100, 10_000))),
    st.builds(EnterCard, cards, who), st.builds(DrawnInErrorDecision, st.booleans(), who),
    st.builds(DealerChange, who), st.builds(ShuffleStarted, who), st.builds(HandShuffled, who),
    st.builds(ShoeRemainder, st.dictionaries(cards, st.integers(-2, 30), max_size=4), who),
    st.builds(PlacementError, who, roles,
              st.one_of(st.none(), st.lists(st.tuples(cards, targets), max_size=4).map(tuple))),
    st.builds(CardsToBoxWithoutWager, who, roles), st.builds(Resume, who, roles), st.builds(Redeal, who, roles),
    st.builds(VoidShoe, who, roles), st.builds(ClearAlarm, st.integers(0, 12), who, roles),
    st.builds(LinkUp, devices), st.builds(LinkDown, devices), st.just(Tick()),
)


kinds = st.integers(0, 10)


def one_input(data: st.DataObject, last_index: int):
    kind = data.draw(kinds)
    if kind <= 3:  # the common case: the next card, so rounds are dealt
        return DeviceMessage("shoe-reader", read(data.draw(read_parts), last_index + 1))
    if kind == 4:
        where, n = data.draw(hostile_index)
        index = min(max(last_index + n, 0), 0xFFFF) if where == "near" else n
        return DeviceMessage(data.draw(devices), read(data.draw(read_parts), index))
    if kind in (5, 6):
        return DeviceMessage(data.draw(devices), data.draw(st.one_of(others, shuffler_life, device_life)))
    return data.draw(people)


def drive(data: st.DataObject, steps: int) -> None:
    start = data.draw(st.sampled_from(["links up, no Ident", "identified", "loaded"]), label="start")
    rig = TableRig(RULES, load=start == "loaded")
    t = rig.table
    if start == "links up, no Ident":
        t = rig.table = Table(RULES, rig.events.append, clock=rig.clock)
        t.apply(LinkUp("shoe-reader"))
        t.apply(LinkUp("shuffler"))
    if t.shoe.state == "in_play" and data.draw(st.booleans(), label="round open"):
        rig.bets(1, 2)
    for _ in range(steps):
        inp = one_input(data, t.last_index)
        if isinstance(inp, Tick):
            rig.clock.now += data.draw(st.sampled_from([0.5, 5.0]))
        try:
            t.apply(inp)
        except CarddError:
            pass  # a documented refusal
        assert t.placed() == +t.shoe.out, f"after {inp!r}"


@pytest.mark.soak
@pytest.mark.timeout(3600 if FULL else 300)  # the whole property is one test
@settings(max_examples=8_000 if FULL else 600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_hostile_inputs_never_escape_and_every_card_is_in_one_place(data: st.DataObject) -> None:
    drive(data, 80 if FULL else 25)
