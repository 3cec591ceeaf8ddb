"""Critical data survives a power loss; the committed diagrams match the live machines."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devices import diagrams
from devices.tracker.inputs import Act, DeviceMessage, EnterCard, NoMoreBets, OpenRound, PlaceBet, Resume, Tick
from devices.events import Reason, Role
from devices.game.round import Action
from devices.game.rules import HouseRules
from devices.tracker.inputs import InputDecodeError
from devices.tracker.snapshot import SNAPSHOT_VERSION, SnapshotError, restore, snapshot
from core.cards import Card, Orientation
from firmware_bridge.messages import CardRead

from tests.table.table_rig import TableRig, connect_devices, round_of

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]


def test_snapshot_restores_round_shoe_alarms_and_holds_the_round() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1, 2)
    rig.deal("TH 9S")
    rig.read("QD", face_up=True)  # an alarm and a void round
    rig.table.apply(OpenRound())
    rig.table.apply(PlaceBet(1, "p1", 1000))
    rig.table.apply(PlaceBet(3, "p3", 2000))
    rig.table.apply(NoMoreBets("dealer-1"))
    rig.deal("TC 8C 5D 7C 9H")  # box 1: 17, box 3: 17, dealer 5
    rig.table.apply(Act(1, Action.STAND, "p1"))
    snap = json.loads(json.dumps(snapshot(rig.table)))  # plain data, through JSON
    assert "FACE_UP_CARD" in [a["reason"] for a in snap["alarms"]["open"]]

    events: list = []
    t = restore(HouseRules.default(), events.append, snap, clock=rig.clock)
    assert t.shoe.state == "in_play" and t.shoe.out == rig.table.shoe.out
    assert t.alarms.reasons() == rig.table.alarms.reasons() + ["ROUND_HELD"]
    r = round_of(t)
    assert r.state == "players" and r.current_hand is not None and r.current_hand.box == 3 and r.held is not None
    assert [str(c) for c in r.dealer_cards] == ["5D"]
    assert [e.reason for e in events] == [Reason.ROUND_HELD]  # the replay itself journals nothing
    # what the supervisor reads: a restart, whatever ended the last run (it once said "power
    # restored" after a graceful stop)
    assert "the daemon restarted mid-round" in events[0].message and "power" not in events[0].message
    # back on its feet: devices reconnect, a supervisor agrees, the round goes on
    connect_devices(t, boot=9)
    t.apply(Resume("sup-1", Role.SUPERVISOR))
    t.apply(Act(3, Action.STAND, "p3"))
    for i, c in enumerate(("TD", "TS")):  # dealer 5 + 10 = 15 draws, + 10 busts
        t.apply(DeviceMessage("shoe-reader", CardRead(rig.index + 1 + i, Card.parse(c), Orientation.FACE_DOWN, 0)))
    assert r.state == "complete"
    assert t.placed() == +t.shoe.out


def test_committed_diagrams_are_current() -> None:
    committed = (ROOT / "docs" / "state-machines.md").read_text(encoding="utf-8")
    assert committed == diagrams.render(), "docs/state-machines.md is stale: run `make diagrams`"


def test_check_fails_with_a_clear_message_when_stale(tmp_path: Path) -> None:
    stale = tmp_path / "state-machines.md"
    stale.write_text(diagrams.render().replace("connecting --> idle", "connecting --> ready"), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "devices.diagrams", "--check", str(stale)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "is stale" in run.stderr and "make diagrams" in run.stderr
    ok = subprocess.run([sys.executable, "-m", "devices.diagrams", "--check", str(ROOT / "docs/state-machines.md")],
                        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr


def test_every_machine_is_drawn() -> None:
    text = diagrams.render()
    for title in ("Shuffler", "Shoe reader", "Shoe life", "Round"):
        assert f"## {title}" in text
    assert "stale --> dealing: back_to_dealing" in text and "last_round --> complete: finish" in text


def test_the_round_log_is_input_records_and_a_bad_snapshot_is_refused_by_name() -> None:
    rig = TableRig(HouseRules.default())
    rig.table.apply(OpenRound())
    rig.table.apply(PlaceBet(1, "p1", 1000))
    rig.table.apply(NoMoreBets("dealer-1"))
    rig.deal("TC")
    snap = json.loads(json.dumps(snapshot(rig.table)))
    assert snap["version"] == SNAPSHOT_VERSION == 9
    assert snap["round"]["log"] == [
        {"v": 2, "type": "PlaceBet", "box": 1, "player": "p1", "amount": 1000},
        {"v": 2, "type": "NoMoreBets", "who": "dealer-1"},
        {"v": 2, "type": "CardDealt", "card": "TC"},
    ]
    with pytest.raises(SnapshotError, match="version 2 is not one of 4, 5, 6, 7"):
        restore(HouseRules.default(), lambda e: None, {**snap, "version": 2}, clock=rig.clock)
    bad = json.loads(json.dumps(snap))
    bad["round"]["log"][0] = {"v": 1, "type": "place_bet", "box": 1, "player": "p1", "amount": 1000}
    with pytest.raises(SnapshotError, match="unknown input record type 'place_bet'"):
        restore(HouseRules.default(), lambda e: None, bad, clock=rig.clock)


def test_snapshot_keeps_an_unreadable_card_and_the_reads_behind_it() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("TC")
    rig.unreadable()
    rig.deal("9D")  # waits behind the unreadable card
    snap = json.loads(json.dumps(snapshot(rig.table)))
    t = restore(HouseRules.default(), lambda e: None, snap, clock=rig.clock)
    assert t.awaiting_entry == rig.index - 1 and [m.card for m in t.queued_reads] == [Card.parse("9D")]
    connect_devices(t, boot=9)
    t.apply(Resume("sup-1", Role.SUPERVISOR))
    t.apply(EnterCard(Card.parse("5S"), "dealer-1"))  # the dealer's card, then the queued 9D
    assert [str(c) for c in round_of(t).dealer_cards] == ["5S"]
    assert [str(c) for c in round_of(t).box_hands[1][0].cards] == ["TC", "9D"]
    assert t.placed() == +t.shoe.out


def test_snapshot_keeps_an_unreadable_card_from_a_stale_reader_out_of_the_round() -> None:
    rig = TableRig(HouseRules.default())
    rig.bets(1)
    rig.deal("TC 5D 9D")  # box 1: 19, dealer 5
    rig.clock.now += 10
    rig.table.apply(Tick())
    rig.unreadable()  # from a stale reader: refused, the dealer enters it for the count only
    snap = json.loads(json.dumps(snapshot(rig.table)))
    t = restore(HouseRules.default(), lambda e: None, snap, clock=rig.clock)
    assert t.entry_to_discard and t.awaiting_entry == rig.index
    t.apply(EnterCard(Card.parse("4S"), "dealer-1"))
    assert t.discard == [Card.parse("4S")] and t.pending == []
    assert t.placed() == +t.shoe.out
