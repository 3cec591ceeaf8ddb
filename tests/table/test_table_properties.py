"""Property tests over random shoes and random legal decisions, through the whole table.

Every card read ends in exactly one place (a hand, the burn or the discard) after every
single input, and every shoe reconciles at its end.
"""
from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from devices.tracker.inputs import DeviceMessage, EnterCard, Resume, Tick
from devices.events import Reason, Role
from devices.game.rules import load_rules
from devices.tracker.table import Table
from devices.tracker.inputs import from_json, to_json
from devices.tracker.recording import record_random_shoes
from devices.tracker.snapshot import restore, snapshot
from core.cards import Orientation
from firmware_bridge.messages import CardRead, Heartbeat, UnreadableCard

from tests.table.table_rig import RULE_FILES, connect_devices, round_of

RULES = {p.stem: load_rules(p) for p in RULE_FILES}
#: whole shoes per property: cheap enough for 100 in CI; CARDD_FULL=1 runs 2,000
SHOES = 2_000 if os.environ.get("CARDD_FULL") == "1" else 40
#: each property whole: the full size takes over 120 s beside other runs on 2 cores
pytestmark = pytest.mark.timeout(120 * SHOES // 100)


def card_read(step: object) -> CardRead | None:
    """The card read a recorded input carries, if it is one."""
    if isinstance(step, DeviceMessage) and isinstance(step.message, CardRead):
        return step.message
    return None


@settings(max_examples=SHOES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(casino=st.sampled_from(sorted(RULES)), seed=st.integers(0, 2**32 - 1), max_boxes=st.integers(1, 7))
def test_every_card_is_placed_exactly_once_and_every_shoe_reconciles(casino: str, seed: int, max_boxes: int) -> None:
    rules = RULES[casino]
    steps, played = record_random_shoes(rules, random.Random(seed), shoes=1, max_boxes=max_boxes)
    events: list = []
    table = Table(rules, events.append, clock=lambda: 0.0, stale_after_s=1e9)
    reads = 0
    for step in steps:  # the recording again, checking after every input
        table.apply(step)
        reads += card_read(step) is not None
        assert table.placed() == +table.shoe.out
        assert sum(table.shoe.out.values()) == reads
        r = table.round
        if r is not None and len(r.dealer_cards) > 1:  # the dealer draws only after every player hand
            assert all(h.complete for h in r.hands)
    assert table.shoe.state == "reconciled", [e.message for e in events if e.reason is Reason.RECONCILIATION_FAILED]
    assert not table.alarms.open
    assert len(table.burn_pile) == rules.shoe.burn_after_shuffle
    json.dumps([[e.reason, e.source, e.message, e.severity, e.data, e.who] for e in events])  # journal-ready
    settled = [e for e in events if e.reason is Reason.SETTLED]
    assert settled and table.rounds_started == played.rounds_started


@settings(max_examples=SHOES, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), at=st.floats(0.05, 0.95))
def test_a_face_up_card_anywhere_voids_only_its_round_and_is_placed(seed: int, at: float) -> None:
    rules = RULES["casino-000"]
    steps, _ = record_random_shoes(rules, random.Random(seed), shoes=1, max_boxes=3)
    reads = [i for i, s in enumerate(steps) if card_read(s) is not None]
    k = reads[int(at * (len(reads) - 1))]
    msg = card_read(steps[k])
    assert msg is not None
    events: list = []
    table = Table(rules, events.append, clock=lambda: 0.0, stale_after_s=1e9)
    for step in steps[:k]:
        table.apply(step)
    live = table.round_live
    table.apply(DeviceMessage("shoe-reader", CardRead(msg.index, msg.card, Orientation.FACE_UP, msg.device_time_ms)))
    assert Reason.FACE_UP_CARD in [e.reason for e in events]
    assert msg.card in table.discard
    assert table.placed() == +table.shoe.out
    if live:
        assert round_of(table).state == "void"


@settings(max_examples=SHOES, deadline=None)
@given(casino=st.sampled_from(sorted(RULES)), seed=st.integers(0, 2**32 - 1), at=st.floats(0.0, 1.0))
def test_power_loss_anywhere_restores_and_the_shoe_ends_the_same(casino: str, seed: int, at: float) -> None:
    rules = RULES[casino]
    recorded, played = record_random_shoes(rules, random.Random(seed), shoes=1, max_boxes=4)
    steps = [from_json(json.loads(json.dumps(to_json(step)))) for step in recorded]  # as a recording on disk
    assert steps == recorded
    k = 4 + int(at * (len(steps) - 5))  # after the devices connected
    table = Table(rules, lambda e: None, clock=lambda: 0.0, stale_after_s=1e9)
    for step in steps[:k]:
        table.apply(step)
    snap = json.loads(json.dumps(snapshot(table)))
    events: list = []
    back = restore(rules, events.append, snap, clock=lambda: 0.0, stale_after_s=1e9)
    connect_devices(back, boot=1)
    if back.round_live:
        assert round_of(back).held is not None  # a live round waits for a supervisor after a power loss
        back.apply(Resume("sup-1", Role.SUPERVISOR))
    for step in steps[k:]:
        back.apply(step)
        assert back.placed() == +back.shoe.out
    assert back.shoe.state == "reconciled"
    assert back.rounds_started == played.rounds_started
    assert back.played == played.played and back.burn_pile == played.burn_pile


@settings(max_examples=SHOES, deadline=None)
@given(casino=st.sampled_from(sorted(RULES)), seed=st.integers(0, 2**32 - 1), at=st.floats(0.0, 1.0),
       trouble=st.sampled_from(["unreadable", "stale"]))
def test_an_unreadable_card_or_a_stale_spell_anywhere_changes_no_outcome(casino: str, seed: int, at: float,
                                                                         trouble: str) -> None:
    """Metamorphic: the same recording with trouble handled by the procedures ends exactly the same."""
    rules = RULES[casino]
    steps, played = record_random_shoes(rules, random.Random(seed), shoes=1, max_boxes=4)
    reads = [i for i, s in enumerate(steps) if card_read(s) is not None]
    k = reads[int(at * (len(reads) - 1))]
    now = [0.0]
    events: list = []
    table = Table(rules, events.append, clock=lambda: now[0], stale_after_s=3.0)
    for step in steps[:k]:
        table.apply(step)
    msg = card_read(steps[k])
    assert msg is not None
    if trouble == "unreadable":
        table.apply(DeviceMessage("shoe-reader", UnreadableCard(msg.index, msg.device_time_ms)))
        table.apply(EnterCard(msg.card, "dealer-1"))
        assert Reason.CARD_ENTERED_BY_DEALER in [e.reason for e in events]
    else:
        now[0] += 10
        table.apply(Tick())
        assert table.reader.state == "stale"
        table.apply(DeviceMessage("shoe-reader", Heartbeat(1)))
        table.apply(DeviceMessage("shuffler", Heartbeat(1)))
        if table.round_live:
            assert round_of(table).held is not None
            table.apply(Resume("sup-1", Role.SUPERVISOR))
        table.apply(steps[k])
    for step in steps[k + 1:]:
        table.apply(step)
    assert table.placed() == +table.shoe.out
    assert table.shoe.state == "reconciled"
    assert table.played == played.played and table.burn_pile == played.burn_pile
