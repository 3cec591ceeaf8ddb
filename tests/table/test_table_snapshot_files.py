"""Damaged snapshot files (JSON on disk) are refused with one SnapshotError naming what is wrong.

Each of these failed before: bare KeyError/TypeError/AttributeError, or a silent restore of nonsense
(negative or non-integer counts, piles that disagree with the shoe), or a snapshot accepted under other
rules because both were called "default".
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.table.table_rig import TableRig

from devices.game.inputs import Action
from devices.game.rules import HouseRules, load_rules
from devices.events import Event, Reason, Role, Severity
from devices.tracker.inputs import Act, VoidShoe
from devices.tracker.snapshot import SnapshotError, restore, snapshot


def live_table() -> TableRig:
    rig = TableRig(HouseRules.default())
    rig.bets(1, 2)
    rig.deal("TC 8C 5D 7C 9H")
    rig.table.apply(Act(1, Action.STAND, "p1"))
    return rig


def saved(tmp_path: Path, rig: TableRig) -> Path:
    path = tmp_path / "table.snapshot.json"
    path.write_text(json.dumps(snapshot(rig.table)), encoding="utf-8")
    return path


def damage(path: Path, change) -> dict[str, Any]:
    snap = json.loads(path.read_text(encoding="utf-8"))
    change(snap)
    path.write_text(json.dumps(snap), encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


def refused(rig: TableRig, snap: Any, *words: str, rules: HouseRules | None = None) -> None:
    with pytest.raises(SnapshotError) as err:
        restore(rules or HouseRules.default(), lambda e: None, snap, clock=rig.clock)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_an_undamaged_file_restores(tmp_path: Path) -> None:
    rig = live_table()
    snap = json.loads(saved(tmp_path, rig).read_text(encoding="utf-8"))
    t = restore(HouseRules.default(), lambda e: None, snap, clock=rig.clock)
    assert t.placed() == +t.shoe.out == +rig.table.shoe.out


def set_in(snap: dict, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = snap
    for p in parents:
        node = node[p]
    node[last] = value


@pytest.mark.parametrize("path, value, words", [
    ("shoe.out.TC", -1, ["table snapshot: $.shoe.out[...]: expected a whole number of at least 1"]),
    ("shoe.out.TC", 1.5, ["table snapshot: $.shoe.out[...]: expected a whole number, got a floating-point number"]),
    ("shoe.cards_out", "8", ["table snapshot: $.shoe.cards_out: expected a whole number, got a string"]),
    ("shoe.cards_out", -8, ["table snapshot: $.shoe.cards_out: expected a whole number of at least 0"]),
    ("shoe.burn_remaining", None, ["$.shoe.burn_remaining"]),
    ("piles", [], ["table snapshot: $.piles: expected an object, got an array"]),
    ("alarms.open", {"1": 2}, ["table snapshot: $.alarms.open: expected an array, got an object"]),
    ("round.id", "1", ["$.round.id"]),
    ("shoe.state", "__init__", ["$.shoe.state", "not a shoe state"]),
    ("holds.NOT_A_REASON", "x", ["$.holds", "not a reason code"]),
    ("rounds_started", True, ["$.rounds_started"]),
    ("piles.played", ["ZZ"], ["$.piles.played[0]", "not a card"]),
    ("deferred", ["zz"], ["$.deferred[0]", "not an encoded message"]),
], ids=lambda v: str(v)[:20])
def test_a_damaged_value_is_one_snapshot_error_naming_where(tmp_path: Path, path: str, value: Any,
                                                             words: list[str]) -> None:
    rig = live_table()
    snap = damage(saved(tmp_path, rig), lambda s: set_in(s, path, value))
    refused(rig, snap, *words)


def test_an_unknown_key_is_refused(tmp_path: Path) -> None:
    rig = live_table()
    refused(rig, damage(saved(tmp_path, rig), lambda s: s["shoe"].update(extra=1)),
            "table snapshot: $.shoe: unknown field 'extra'")


def test_a_missing_key_is_refused(tmp_path: Path) -> None:
    rig = live_table()
    refused(rig, damage(saved(tmp_path, rig), lambda s: s.pop("piles")), "table snapshot: $: field 'piles' is missing")


def test_piles_that_disagree_with_the_shoes_count_are_refused(tmp_path: Path) -> None:
    rig = live_table()
    snap = damage(saved(tmp_path, rig), lambda s: s["piles"]["burn_pile"].append("AS"))
    refused(rig, snap, "piles disagree", "in the piles, not out: AS")
    snap = damage(saved(tmp_path, rig), lambda s: s["shoe"]["out"].update(KD=s["shoe"]["out"].get("KD", 0) + 1)
                  or s["shoe"].update(cards_out=s["shoe"]["cards_out"] + 1))
    refused(rig, snap, "piles disagree", "out, in no pile: KD")


def test_a_count_that_disagrees_with_the_count_per_card_is_refused(tmp_path: Path) -> None:
    rig = live_table()
    snap = damage(saved(tmp_path, rig), lambda s: s["shoe"].update(cards_out=s["shoe"]["cards_out"] + 2))
    refused(rig, snap, "$.shoe.cards_out")


def test_a_round_log_naming_a_round_attribute_is_refused(tmp_path: Path) -> None:
    rig = live_table()
    snap = damage(saved(tmp_path, rig), lambda s: s["round"]["log"].append({"v": 1, "type": "__init__"}))
    refused(rig, snap, "unknown input record type '__init__'")
    snap = damage(saved(tmp_path, rig),
                  lambda s: s["round"]["log"].append({"v": 1, "type": "Tick"}))
    refused(rig, snap, "$.round.log", "Tick is not a round input")


def test_a_snapshot_is_refused_under_other_rules_even_when_both_have_no_name(tmp_path: Path) -> None:
    rig = TableRig(HouseRules.default())  # 6 decks, 312 cards, no name: "default"
    snap = json.loads(saved(tmp_path, rig).read_text(encoding="utf-8"))
    eight = tmp_path / "eight.toml"
    eight.write_text('[shoe]\nshuffle = "hand"\ndecks = 8\n', encoding="utf-8")
    other = load_rules(eight)
    assert other.name == HouseRules.default().name
    refused(rig, snap, "other house rules", rules=other)
    renamed = tmp_path / "renamed.toml"
    renamed.write_text('name = "Table 7"\n', encoding="utf-8")  # the same content under another name
    restore(load_rules(renamed), lambda e: None, snap, clock=rig.clock)


# ---- hypothesis: snapshots damaged at random -------------------------------------------------

json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 400) | st.floats(allow_nan=False)
                           | st.text(max_size=4) | st.sampled_from(["AS", "TC", "in_play", "ROUND_HELD"]),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                       max_size=3), max_leaves=6)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, prefix + (i,))
    return out


BASE = None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_randomly_damaged_snapshots_restore_consistently_or_are_one_snapshot_error(data: st.DataObject) -> None:
    global BASE
    if BASE is None:
        rig = live_table()
        BASE = (rig, json.loads(json.dumps(snapshot(rig.table))))
    rig, base = BASE
    snap = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(paths(snap)[1:]))
        *parents, last = where
        node = snap
        for p in parents:
            node = node[p]
        how = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if how == "delete":
            del node[last]
        elif how == "add" and isinstance(node, dict):
            node[data.draw(st.text(max_size=4))] = data.draw(json_values)
        else:
            node[last] = data.draw(json_values)
        if isinstance(snap, dict) is False or not paths(snap)[1:]:
            break
    try:
        t = restore(HouseRules.default(), lambda e: None, snap, clock=rig.clock)
    except SnapshotError:
        return
    assert t.placed() == +t.shoe.out


def eight_decks(tmp_path: Path) -> HouseRules:
    other = tmp_path / "eight.toml"
    other.write_text('name = "Eight"\n[shoe]\nshuffle = "hand"\ndecks = 8\n', encoding="utf-8")
    return load_rules(other)


def test_other_house_rules_are_refused_mid_shoe_and_after_an_unclean_stop_naming_what_is_in_the_way(
        tmp_path: Path) -> None:
    rig = live_table()  # a shoe in play, a round live
    snap = snapshot(rig.table)
    with pytest.raises(SnapshotError) as err:
        restore(eight_decks(tmp_path), lambda e: None, snap, clock=rig.clock, clean_stop=True)
    assert "not these ('Eight', sha256" in str(err.value) and "and the shoe is in_play: house rules change only " \
        "between shoes" in str(err.value), str(err.value)
    rig.table.apply(VoidShoe("sam", Role.SUPERVISOR))  # between shoes now, its round void
    between = snapshot(rig.table)
    with pytest.raises(SnapshotError, match="and cardd did not stop cleanly: records were journaled after"):
        restore(eight_decks(tmp_path), lambda e: None, between, clock=rig.clock, clean_stop=False)


def test_other_house_rules_go_on_between_shoes_after_a_clean_stop_and_say_so(tmp_path: Path) -> None:
    rig = live_table()
    rig.table.apply(VoidShoe("sam", Role.SUPERVISOR))
    rig.read("2H")  # a card from the void shoe: a DEALING_BLOCKED alarm to carry over (the void itself is none)
    before = snapshot(rig.table)
    assert before["shoe"]["state"] == "void" and before["alarms"]["open"]
    told: list[Event] = []
    table = restore(eight_decks(tmp_path), told.append, before, clock=rig.clock, clean_stop=True)
    assert table.rules.name == "Eight" and table.rules.decks == 8
    [changed] = [e for e in told if e.reason == Reason.RULES_CHANGED]
    assert changed.severity == Severity.WARNING and changed.data["from"]["name"] == HouseRules.default().name
    assert changed.data["to"]["name"] == "Eight" and changed.message.startswith("house rules changed between shoes: ")
    after = snapshot(table)
    assert after["round"] is None and after["alarms"] == before["alarms"]  # open alarms carried over
    assert after["shoe"]["state"] == "void" and after["rounds_started"] == before["rounds_started"]
