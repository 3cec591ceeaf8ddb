"""Between two shoes: a failed reconciliation holds the next shoe until a supervisor clears its
alarm (every seed casino's rules), and a new shoe starts its count of cards out from 0."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from core.cards import Card, shoe_composition
from devices.events import Event, Reason, Role, Severity
from devices.errors import OverrideRefused, TableError
from devices.tracker.inputs import ClearAlarm, DeviceMessage, HandShuffled, OpenRound, Redeal, ShoeRemainder, ShuffleStarted, \
    VoidShoe
from devices.tracker.snapshot import SNAPSHOT_VERSION, restore, snapshot
from firmware_bridge.messages import CutCardSeen, ShoeLoaded

from tests.table.table_rig import RULE_FILES, TableRig
from tests.table.test_table_shoe_life import play_round

pytestmark = pytest.mark.timeout(30)


def complete_shoe(rig: TableRig) -> Counter[Card]:
    """Two rounds, the cut card between them: the shoe complete; its undealt remainder, per card."""
    play_round(rig)
    rig.table.apply(DeviceMessage("shoe-reader", CutCardSeen(rig.index, 0)))
    play_round(rig)
    assert rig.table.shoe.state == "complete"
    remainder = Counter(shoe_composition(rig.rules.decks))
    remainder.subtract(rig.table.shoe.out)
    return remainder


def fail_reconciliation(rig: TableRig) -> int:
    """The remainder counted back one 2C short: RECONCILIATION_FAILED; the id of its alarm."""
    remainder = complete_shoe(rig)
    remainder[Card.parse("2C")] -= 1
    rig.table.apply(ShoeRemainder(dict(remainder), "dealer-1"))
    assert rig.table.shoe.state == "unreconciled"
    return next(a.id for a in rig.table.alarms.open.values() if a.reason == Reason.RECONCILIATION_FAILED)


def start_next_shoe(rig: TableRig) -> None:
    """The next shoe as the table's rules start one: the shuffler's report, or the dealer's hand shuffle."""
    if rig.table.uses_shuffler:
        rig.table.apply(ShuffleStarted("dealer-1"))
    rig.shuffle_ok()


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_a_failed_reconciliation_holds_the_next_shoe_until_a_supervisor_clears_its_alarm(path) -> None:
    rig = TableRig.from_file(path)
    alarm = fail_reconciliation(rig)
    why = (f"the last shoe did not reconcile (missing: 2C x1; alarm {alarm}): a supervisor accounts for the cards "
           f"and clears the alarm with clear_alarm {alarm} before the next shoe")
    with pytest.raises(TableError) as refused:
        rig.table.apply(ShuffleStarted("dealer-1"))
    # a hand-shuffle table refuses a machine shuffle for its rules first; the others for the alarm
    assert str(refused.value) == (rig.table.machine_shuffle_refused() or why)
    assert rig.table.next_shoe_waits() == why
    if not rig.table.uses_shuffler:
        with pytest.raises(TableError) as refused:
            rig.table.apply(HandShuffled("dealer-1"))
        assert str(refused.value) == why
    else:  # shuffled at the shuffler's own panel and loaded anyway: the reports wait, nothing starts
        rig.shuffle(shoe_composition(rig.rules.decks))
        rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))
        assert rig.table.shoe.state == "unreconciled" and len(rig.table.shoe.deferred) == 4
    with pytest.raises(TableError, match="did not reconcile"):
        rig.table.apply(OpenRound())
    rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))  # voiding the ended shoe does not release the next
    assert rig.table.shoe.state == "void" and rig.table.next_shoe_waits() == why
    with pytest.raises(OverrideRefused):
        rig.table.apply(ClearAlarm(alarm, "dealer-1", Role.DEALER))
    assert rig.table.next_shoe_waits() == why

    # a power cut while it waits: the alarm and the waiting reports come back with the table
    restored = restore(rig.rules, rig.events.append, json.loads(json.dumps(snapshot(rig.table))), clock=rig.clock)
    assert restored.next_shoe_waits() == why and restored.shoe.deferred == rig.table.shoe.deferred

    rig.table.apply(ClearAlarm(alarm, "sup-1", Role.SUPERVISOR))
    assert rig.table.next_shoe_waits() is None
    if rig.table.uses_shuffler:  # the waiting reports are taken: verified, loaded
        assert rig.table.shoe.state == "burning" and rig.table.shoe.deferred == []
        rig.index = 0  # the reader counts the cards of the load from 1
        for card in "2C 3C 4C".split()[:rig.rules.shoe.burn_after_shuffle]:
            rig.read(card)
    else:
        start_next_shoe(rig)
        rig.load_and_burn()
    assert rig.table.shoe.state == "in_play"
    play_round(rig)
    rig.assert_ledger()


def test_two_failed_reconciliations_are_both_named_and_the_next_shoe_waits_for_both() -> None:
    """A table from an older release may hold two (the next shoe was not held then)."""
    rig = TableRig.from_file(RULE_FILES[0])
    first = fail_reconciliation(rig)
    older = rig.table.alarms.raise_from(Event(Reason.RECONCILIATION_FAILED, "shoe", "shoe: complete -> "
                                              "unreconciled: missing: AS x1", Severity.ALARM, {}))
    assert rig.table.next_shoe_waits() == (f"reconciliation failed alarms {first}, {older} are open: a supervisor "
                                           "accounts for the cards and clears each with clear_alarm ID before the "
                                           "next shoe")
    rig.table.apply(ClearAlarm(first, "sup-1", Role.SUPERVISOR))
    with pytest.raises(TableError, match=f"alarm {older}\\): .* with clear_alarm {older} before"):
        rig.table.apply(ShuffleStarted("dealer-1"))
    rig.table.apply(ClearAlarm(older, "sup-1", Role.SUPERVISOR))
    start_next_shoe(rig)
    assert rig.table.shoe.state == "verified"


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_a_new_shoe_has_no_card_out_from_its_shuffle_on(path) -> None:
    """Its shuffle (or the dealer's hand shuffle) starts the new shoe: the last shoe's count is not
    shown for it until it is loaded."""
    rig = TableRig.from_file(path)
    rig.table.apply(ShoeRemainder(dict(complete_shoe(rig)), "dealer-1"))
    assert rig.table.shoe.state == "reconciled" and rig.table.shoe.cards_out > 0
    start_next_shoe(rig)
    assert rig.table.shoe.state == "verified"
    assert (rig.table.shoe.cards_out, rig.table.shoe.out, rig.table.placed()) == (0, Counter(), Counter())
    assert (rig.table.played, rig.table.discard, rig.table.burn_pile) == ([], [], [])
    rig.load_and_burn()
    assert rig.table.shoe.cards_out == rig.rules.shoe.burn_after_shuffle
    rig.assert_ledger()


def refused_mid_round(rig: TableRig) -> list[Card]:
    """A round dealt into its players' turns, then the shoe reports a load: the shoe is refused
    (its cards were not verified) with the round's cards still on the table; those cards."""
    rig.bets(1)
    rig.deal("TH 5D 7C")
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))
    assert rig.table.shoe.state == "refused" and rig.table.round_live
    return [Card.parse(c) for c in ("TH", "5D", "7C")]


@pytest.mark.parametrize("how", ["redeal", "void_shoe"])
def test_a_shuffle_waits_while_a_round_of_a_shoe_refused_mid_round_is_on_the_table(how) -> None:
    """The next shoe's shuffle report must not empty the count of cards out while the round still
    holds three of them (a card in no place, the ledger broken): the shuffle waits."""
    rig = TableRig.from_file(RULE_FILES[0])
    on_table = refused_mid_round(rig)
    with pytest.raises(TableError) as refused:
        rig.table.apply(ShuffleStarted("dealer-1"))
    assert str(refused.value) == ("round 1 of the refused shoe is still on the table: a supervisor re-deals it "
                                  "with redeal or voids the shoe with void_shoe before the next shoe")
    rig.shuffle_ok()  # the shuffler reports its next stack anyway: it waits
    assert rig.table.shoe.state == "refused" and len(rig.table.shoe.deferred) == 3
    assert rig.table.placed() == rig.table.shoe.out >= Counter(on_table)
    if how == "redeal":
        rig.table.apply(Redeal("sup-1", Role.SUPERVISOR))
    else:
        rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    # the round decided, the waiting shuffle is taken: a new shoe, nothing out of it
    assert (rig.table.shoe.state, rig.table.shoe.deferred) == ("verified", [])
    assert (rig.table.shoe.out, rig.table.placed()) == (Counter(), Counter())
    rig.load_and_burn()
    rig.assert_ledger()


def test_a_hand_shuffle_waits_while_a_round_of_a_shoe_refused_mid_round_is_on_the_table() -> None:
    hand = next(p for p in RULE_FILES if TableRig.from_file(p).table.uses_shuffler is False)
    rig = TableRig.from_file(hand)
    refused_mid_round(rig)
    with pytest.raises(TableError, match="round 1 of the refused shoe is still on the table"):
        rig.table.apply(HandShuffled("dealer-1"))
    rig.table.apply(Redeal("sup-1", Role.SUPERVISOR))
    rig.table.apply(HandShuffled("dealer-1"))
    assert rig.table.shoe.state == "verified" and rig.table.placed() == rig.table.shoe.out == Counter()


# ---- a void that lets the next shoe in -------------------------------------------------------

SHUFFLER_RULES = RULE_FILES[0]  # casino-000: a shuffler shuffles, so the next shoe's reports wait


def void_with_the_next_shoe_waiting(rig: TableRig) -> list[Event]:
    """A shoe in play, the next one shuffled meanwhile (its reports wait), then the supervisor's
    void of the shoe in play; the events the void caused."""
    play_round(rig)
    rig.table.apply(ShuffleStarted("dealer-1"))
    rig.shuffle_ok()
    assert rig.table.shoe.state == "in_play" and len(rig.table.shoe.deferred) == 3
    return rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))


def test_a_void_says_the_next_shoe_takes_its_place_and_a_plain_void_again_is_refused() -> None:
    rig = TableRig.from_file(SHUFFLER_RULES)
    caused = void_with_the_next_shoe_waiting(rig)
    voided = [e for e in caused if e.reason is Reason.SHOE_VOID]
    assert [e.message for e in voided] == ["shoe: in_play -> void: cards out 6"]
    took_over = caused[-1]  # said last: after the void and the reports it let in
    assert (took_over.reason, took_over.severity, took_over.who) == (Reason.NEXT_SHOE_TAKES_OVER, Severity.INFO, "sup-1")
    assert took_over.message == (
        "the next shoe, shuffled while the voided one was in play, takes its place (verified, 312 cards counted, "
        "0 out): it is verified, not loaded: load it and deal the burn card; to void it too, say so: "
        "void_shoe next_shoe=true")
    assert rig.table.shoe.state == "verified"

    before = len(rig.events)
    with pytest.raises(TableError) as refused:  # the same void again: it may mean the shoe voided already
        rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    assert str(refused.value) == (
        "the shoe voided last is void already; the shoe now is the next one, shuffled while that one was in play "
        "(verified, 312 cards counted, 0 out): it is verified, not loaded: load it and deal the burn card; to void "
        "it too, say so: void_shoe next_shoe=true")
    assert rig.events[before:] == [] and rig.table.shoe.state == "verified"  # no override journaled, nothing lost

    # a power cut now: the table still knows which shoe this is
    restored = restore(rig.rules, rig.events.append, json.loads(json.dumps(snapshot(rig.table))), clock=rig.clock)
    with pytest.raises(TableError, match="the shoe voided last is void already"):
        restored.apply(VoidShoe("sup-1", Role.SUPERVISOR))

    caused = rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR, next_shoe=True))  # said so: it goes
    assert [e.reason for e in caused] == [Reason.OVERRIDE, Reason.SHOE_VOID]
    assert caused[-1].message == "shoe: verified -> void: cards out 0"
    with pytest.raises(TableError, match="no shoe to void: the shoe is void"):
        rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR, next_shoe=True))


def test_the_next_shoe_is_a_shoe_like_any_once_loaded() -> None:
    rig = TableRig.from_file(SHUFFLER_RULES)
    void_with_the_next_shoe_waiting(rig)
    rig.load_and_burn()
    with pytest.raises(TableError) as refused:  # next_shoe=true names a shoe that is not there now
        rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR, next_shoe=True))
    assert str(refused.value) == ("no next shoe took a voided shoe's place: the shoe is in_play, 1 card(s) out; "
                                  "void it with void_shoe alone")
    caused = rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    assert [e.reason for e in caused] == [Reason.OVERRIDE, Reason.SHOE_VOID]


def test_a_void_with_nothing_waiting_lets_no_shoe_in() -> None:
    rig = TableRig.from_file(SHUFFLER_RULES)
    play_round(rig)
    caused = rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))
    assert Reason.NEXT_SHOE_TAKES_OVER not in [e.reason for e in caused] and rig.table.shoe.after_void is None
    rig.table.apply(ShuffleStarted("dealer-1"))
    rig.shuffle_ok()  # a shuffle after the void: a shoe of its own, voided as any
    assert [e.reason for e in rig.table.apply(VoidShoe("sup-1", Role.SUPERVISOR))] == [Reason.OVERRIDE,
                                                                                         Reason.SHOE_VOID]


def test_a_version_6_snapshot_is_a_shoe_that_took_no_voided_shoes_place() -> None:
    rig = TableRig.from_file(SHUFFLER_RULES)
    void_with_the_next_shoe_waiting(rig)
    snap = json.loads(json.dumps(snapshot(rig.table)))
    assert (snap["version"], snap["shoe"]["after_void"]) == (SNAPSHOT_VERSION, "sup-1")
    del snap["shoe"]["after_void"]
    older = restore(rig.rules, rig.events.append, {**snap, "version": 6}, clock=rig.clock)
    assert older.shoe.after_void is None and older.shoe.state == "verified"
    assert [e.reason for e in older.apply(VoidShoe("sup-1", Role.SUPERVISOR))] == [Reason.OVERRIDE, Reason.SHOE_VOID]
