"""The shoe reader's own count (its Status, asked after every handshake) against the table's.

A shoe may lose or gain cards while no host listens (the daemon down, the link down): the table
compares the cards the shoe says it holds with what it expects the shoe to hold. A difference while a verified stack is in play is a SHOE_COUNT_MISMATCH alarm naming
both counts; it holds the live round and no new round opens until a supervisor clears it.

The rigs' shoe reader speaks protocol 1.1, as the daemon's do: it keeps its reads until they are
journaled and answers a Status after the reads numbered before it, so its count is final. A 1.0
reader's reads in flight at a link reset are lost, and a count of fewer cards waits for its next
read (the last tests).
"""
from __future__ import annotations

import json

import pytest

from devices.events import Event, Reason, Role, Severity
from devices.errors import TableError
from devices.tracker.inputs import (CardsToBoxWithoutWager, ClearAlarm, DeviceMessage, NoMoreBets, OpenRound,
                                    PlaceBet, Redeal, Resume, VoidShoe)
from devices.tracker.snapshot import restore, snapshot
from devices.tracker.table import Table
from firmware_bridge.messages import CardRead, CutCardSeen, DeviceState, ShoeEmpty, ShoeLoaded, Status
from core.cards import Card, Orientation

from tests.table.table_rig import RULES_DIR, TableRig, cards as cards_of, connect_devices

pytestmark = pytest.mark.timeout(30)
SUP = Role.SUPERVISOR
RULES = RULES_DIR / "casino-000.toml"  # six decks, one burn card
STACK = 312


def status(table: Table, held: int) -> list[Event]:
    """The shoe reader's Status, as it answers the host's StatusRequest after a handshake."""
    return table.apply(DeviceMessage("shoe-reader", Status(DeviceState.DEALING, 0, held, 1000)))


def mismatches(rig: TableRig) -> list[Event]:
    return rig.find(Reason.SHOE_COUNT_MISMATCH)


def open_mismatch_ids(table: Table) -> list[int]:
    return [a.id for a in table.alarms.open.values() if a.reason == Reason.SHOE_COUNT_MISMATCH]


# ---- each shoe state a verified stack is in play in -----------------------------------------------

def burning() -> TableRig:
    rig = TableRig.from_file(RULES, load=False, protocol_minor=1)
    rig.shuffle_ok()
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))
    assert rig.table.shoe.state == "burning" and rig.table.last_index == 0
    return rig


def in_play_between_rounds() -> TableRig:
    rig = TableRig.from_file(RULES, protocol_minor=1)
    assert rig.table.shoe.state == "in_play" and rig.table.last_index == 1  # the burn card
    return rig


def in_play_mid_round() -> TableRig:
    rig = TableRig.from_file(RULES, protocol_minor=1)
    rig.bets(1, 2)
    rig.deal("TH 9S 5D")
    assert rig.round.live and rig.round.held is None
    return rig


def last_round_mid_round() -> TableRig:
    rig = in_play_mid_round()
    rig.table.apply(DeviceMessage("shoe-reader", CutCardSeen(rig.index, rig.index * 10)))
    assert rig.table.shoe.state == "last_round"
    return rig


IN_PLAY = {"burning": burning, "in_play, between rounds": in_play_between_rounds,
           "in_play, mid-round": in_play_mid_round, "last_round, mid-round": last_round_mid_round}


@pytest.mark.parametrize("state", IN_PLAY)
def test_a_count_that_matches_raises_nothing(state: str) -> None:
    rig = IN_PLAY[state]()
    expected = STACK - rig.index
    assert rig.table.shoe_should_hold() == expected
    assert status(rig.table, expected) == [] and not mismatches(rig)
    assert rig.table.holds == {} and open_mismatch_ids(rig.table) == []


@pytest.mark.parametrize("state", IN_PLAY)
@pytest.mark.parametrize("off", [-3, 2], ids=["fewer", "more"])
def test_fewer_or_more_cards_is_an_alarm_naming_both_counts_that_holds_play_until_a_supervisor_clears_it(
        state: str, off: int) -> None:
    rig = IN_PLAY[state]()
    expected = STACK - rig.index
    caused = status(rig.table, expected + off)
    [alarm] = [e for e in caused if e.reason is Reason.SHOE_COUNT_MISMATCH]
    assert alarm.severity.value == "alarm"
    assert alarm.data == {"expected": expected, "held": expected + off, "difference": off, "verified": STACK,
                               "left": rig.index, "put_back": 0, "shoe_state": rig.table.shoe.state}
    assert f"the shoe reader holds {expected + off} card(s), the table expects {expected}" in alarm.message
    assert (f"{-off} fewer: cards left the shoe unseen" if off < 0 else f"{off} more: cards were added") \
        in alarm.message
    json.dumps(alarm.data)
    [alarm_id] = open_mismatch_ids(rig.table)
    table = rig.table
    if table.round_live:  # the live round is held: a supervisor resumes it or re-deals it
        assert table.round.held is not None and "SHOE_COUNT_MISMATCH" in table.holds  # type: ignore[union-attr]
        table.apply(Redeal("sup-1", SUP))
    with pytest.raises(TableError, match=f"shoe count mismatch alarm {alarm_id} is open: a supervisor looks at "
                                         "the shoe and clears it with clear_alarm first"):
        table.apply(OpenRound())
    with pytest.raises(TableError):  # a dealer cannot clear it
        table.apply(ClearAlarm(alarm_id, "dealer-1", Role.DEALER))
    table.apply(ClearAlarm(alarm_id, "sup-1", SUP))
    assert open_mismatch_ids(table) == []
    if table.shoe.burning:
        rig.read("2C")
    if table.shoe.state != "complete":  # the re-dealt round was the cut card's last
        table.apply(OpenRound())  # dealing goes on from the shoe as it is


def test_no_count_is_compared_while_no_verified_stack_is_in_play() -> None:
    """idle, verified (not loaded), complete (the stub may be out already, or the next stack in: the
    remainder's count is the check), void: the reader's count belongs to no stack the table deals from."""
    rig = TableRig.from_file(RULES, load=False, protocol_minor=1)
    for held in (0, 7, 312):
        status(rig.table, held)  # idle
    rig.shuffle_ok()
    assert rig.table.shoe.state == "verified" and rig.table.shoe_should_hold() is None
    status(rig.table, 5)

    complete = in_play_between_rounds()
    complete.table.apply(DeviceMessage("shoe-reader", ShoeEmpty(complete.index, 0)))
    assert complete.table.shoe.state == "complete" and complete.table.shoe_should_hold() is None
    for held in (0, 1, 312, 400):
        status(complete.table, held)

    void = in_play_between_rounds()
    void.table.apply(VoidShoe("sup-1", SUP))
    status(void.table, 3)
    assert not mismatches(rig) and not mismatches(complete) and not mismatches(void)


def test_an_unreadable_card_not_yet_entered_and_the_reads_queued_behind_it_count_as_out() -> None:
    rig = in_play_mid_round()
    rig.unreadable()
    rig.deal("7C 8H")  # queued behind it
    assert rig.table.awaiting_entry is not None and len(rig.table.queued_reads) == 2
    assert status(rig.table, STACK - rig.index) == [] and not mismatches(rig)


def test_cards_a_gap_skipped_count_as_out_their_missing_read_alarm_names_them_already() -> None:
    rig = in_play_between_rounds()
    rig.index += 2  # two cards left the shoe unseen
    rig.read("9C")
    assert len(rig.find(Reason.MISSING_READ)) == 1
    assert status(rig.table, STACK - rig.index) == []


def test_reads_a_restarted_table_is_sent_again_count_before_the_status_after_them() -> None:
    """After a restart the table comes back from its snapshot; a 1.1 shoe resends the reads it had
    not been told were journaled, then answers the Status: the table has them all by then."""
    rig = in_play_mid_round()
    snap = json.loads(json.dumps(snapshot(rig.table)))
    table = restore(rig.table.rules, rig.events.append, snap, clock=rig.clock)
    connect_devices(table, boot=7, protocol_minor=1)
    for index, card in ((rig.index + 1, "7C"), (rig.index + 2, "8H")):  # dealt while no host listened
        table.apply(DeviceMessage("shoe-reader", CardRead(index, Card.parse(card), Orientation.FACE_DOWN, 0)))
    assert status(table, STACK - rig.index - 2) == []
    assert open_mismatch_ids(table) == []


def test_the_same_difference_again_is_no_new_alarm_open_or_cleared_and_a_new_one_is() -> None:
    rig = in_play_between_rounds()
    expected = STACK - rig.index
    status(rig.table, expected - 4)
    status(rig.table, expected - 4)  # the next handshake: the shoe still holds what it held
    [first] = open_mismatch_ids(rig.table)
    rig.table.apply(ClearAlarm(first, "sup-1", SUP))  # the supervisor looked and accepts the count
    rig.table.apply(OpenRound())
    status(rig.table, expected - 4)
    assert len(mismatches(rig)) == 1 and open_mismatch_ids(rig.table) == []
    status(rig.table, expected - 5)  # one more went
    assert len(mismatches(rig)) == 2 and mismatches(rig)[-1].data["difference"] == -5
    status(rig.table, expected)  # back where it should be (the cards found): a later difference is news again
    status(rig.table, expected - 5)
    assert len(mismatches(rig)) == 3


def test_the_snapshot_keeps_the_difference_named_and_the_cards_put_back() -> None:
    rig = in_play_mid_round()
    rig.deal("7C 8H")  # the initial deal: two boxes and the dealer
    rig.table.apply(CardsToBoxWithoutWager("sup-1", SUP))  # five cards back on top of the shoe
    assert rig.table.cards_put_back == 5
    expected = STACK - rig.index + 5
    assert status(rig.table, expected) == []  # the shoe holds them again
    status(rig.table, expected + 1)
    assert len(mismatches(rig)) == 1
    snap = json.loads(json.dumps(snapshot(rig.table)))
    assert (snap["cards_put_back"], snap["shoe_count_named"]) == (5, 1)
    table = restore(rig.table.rules, rig.events.append, snap, clock=rig.clock)
    connect_devices(table, boot=7, protocol_minor=1)
    assert (table.cards_put_back, table.shoe_count_named) == (5, 1)
    status(table, expected + 1)  # after the restart's handshake: named already
    assert len(mismatches(rig)) == 1
    table.apply(Resume("sup-1", SUP))


def test_a_version_5_snapshot_mid_shoe_leaves_the_count_unchecked_until_the_next_load() -> None:
    """An older snapshot does not say how many cards went back on top (cards_to_box_without_wager):
    after an upgrade mid-shoe the shoe's true count (five cards put back) would be a certain false
    alarm, so it is not checked. The next load counts again."""
    rig = in_play_mid_round()
    rig.deal("7C 8H")
    rig.table.apply(CardsToBoxWithoutWager("sup-1", SUP))  # five cards back on top of the shoe
    truly_held = STACK - rig.index + 5
    snap = json.loads(json.dumps(snapshot(rig.table)))
    del snap["cards_put_back"], snap["shoe_count_named"]
    table = restore(rig.table.rules, rig.events.append, {**snap, "version": 5}, clock=rig.clock)
    connect_devices(table, boot=7, protocol_minor=1)
    assert (table.cards_put_back, table.shoe_count_named) == (None, None)
    assert status(table, truly_held) == [] and open_mismatch_ids(table) == []
    table.apply(VoidShoe("sup-1", SUP))
    rig.table = table
    rig.shuffle_ok()
    rig.load_and_burn()
    assert table.cards_put_back == 0
    status(table, STACK - table.last_index - 1)  # a new shoe: its count is checked again
    assert len(open_mismatch_ids(table)) == 1


def test_a_version_5_snapshot_between_shoes_checks_the_next_shoe() -> None:
    rig = TableRig.from_file(RULES, load=False, protocol_minor=1)
    snap = json.loads(json.dumps(snapshot(rig.table)))
    del snap["cards_put_back"], snap["shoe_count_named"]
    table = restore(rig.table.rules, rig.events.append, {**snap, "version": 5}, clock=rig.clock)
    assert (table.cards_put_back, table.shoe_count_named) == (0, None)


def test_a_gap_that_explains_a_named_difference_makes_a_later_loss_news_again() -> None:
    """A Status named one card fewer (its read lost in a 1.0 link reset); the next read's gap then
    accounts for it. A later card taken out unseen is a new difference of the same size, an alarm,
    never taken for the one named already."""
    rig = in_play_between_rounds()
    lost = rig.index + 1
    status(rig.table, STACK - lost)  # the shoe dealt card #lost; its read never came
    [first] = open_mismatch_ids(rig.table)
    rig.table.apply(ClearAlarm(first, "sup-1", SUP))
    rig.index += 1
    rig.read("9C")  # the next read: MISSING_READ names #lost, the counts agree again
    assert len(rig.find(Reason.MISSING_READ)) == 1 and rig.table.shoe_count_named is None
    status(rig.table, STACK - rig.index - 1)  # one card taken out while the daemon was down
    assert len(mismatches(rig)) == 2 and len(open_mismatch_ids(rig.table)) == 1


def test_voiding_the_shoe_closes_its_count_alarm_in_the_supervisors_name() -> None:
    """The alarm's text says a supervisor clears it or voids the shoe: a void closes it, so the next
    shoe's first round is not refused naming it."""
    rig = in_play_between_rounds()
    status(rig.table, STACK - rig.index - 3)
    [alarm] = open_mismatch_ids(rig.table)
    caused = rig.table.apply(VoidShoe("sup-1", SUP))
    assert open_mismatch_ids(rig.table) == []
    [cleared] = [e for e in caused if e.reason is Reason.ALARM_CLEARED]
    assert (cleared.who, cleared.data["alarm"], cleared.data["alarm_reason"]) == ("sup-1", alarm, "SHOE_COUNT_MISMATCH")
    rig.shuffle_ok()
    rig.load_and_burn()
    rig.bets(1)  # the next shoe's first round opens
    assert rig.round.live


def test_a_count_from_a_reader_not_usable_is_not_compared() -> None:
    rig = in_play_between_rounds()
    rig.table.apply(DeviceMessage("shoe-reader", Status(DeviceState.UPDATING, 0, 5, 0)))  # a firmware update
    assert rig.table.reader.state == "updating" and not mismatches(rig)  # out of play: its count not trusted


# ---- a count of fewer cards while reads may have been lost: the next read decides -----------------

def reader_1_0_mid_round() -> TableRig:
    """A round dealt by a 1.0 shoe (its reads in flight at a link reset are lost, never sent again)."""
    rig = TableRig.from_file(RULES)  # the rig's devices speak 1.0
    rig.bets(1, 2)
    rig.deal("TH 9S")
    return rig


def alarm_reasons(table: Table) -> list[str]:
    return sorted(a.reason for a in table.alarms.open.values())


def test_a_1_0_shoes_reads_lost_in_a_link_reset_are_one_missing_read_alarm_not_a_count_alarm_too() -> None:
    """The Status after the reset's handshake counts out the two cards whose reads were lost, and the
    next read skips their indexes: one cause. MISSING_READ names them; a SHOE_COUNT_MISMATCH for the
    same cards was raised beside it."""
    rig = reader_1_0_mid_round()
    lost = 2  # dealt, their reads lost in the link reset
    assert status(rig.table, STACK - rig.index - lost) == []  # no alarm yet: the next read decides
    assert rig.round.held is None and rig.table.shoe_count_short is not None
    rig.index += lost
    rig.read("5D")
    assert not mismatches(rig) and len(rig.find(Reason.MISSING_READ)) == 1
    assert alarm_reasons(rig.table) == ["MISSING_READ", "ROUND_HELD"]
    assert rig.table.shoe_count_short is None
    assert status(rig.table, STACK - rig.index) == [] and not mismatches(rig)  # the counts agree
    rig.assert_ledger()


def test_a_1_0_shoes_count_of_fewer_cards_that_the_next_read_does_not_account_for_is_the_alarm_then() -> None:
    """Three cards taken out while no host listened: the next read follows the last one with no gap,
    so no lost read accounts for them: SHOE_COUNT_MISMATCH at that read, naming the counts of the
    Status, and the round held with the read waiting as the next card."""
    rig = reader_1_0_mid_round()
    left, expected = rig.index, STACK - rig.index
    status(rig.table, expected - 3)
    assert not mismatches(rig)
    rig.read("5D")
    [alarm] = mismatches(rig)
    assert alarm.data == {"expected": expected, "held": expected - 3, "difference": -3, "verified": STACK,
                          "left": left, "put_back": 0, "shoe_state": "in_play", "read": left + 1, "lost_reads": 0}
    assert (f"the shoe reader held {expected - 3} card(s) at its last count, the table expected {expected} "
            f"({STACK} verified, {left} left the shoe since the load): 3 fewer: cards left the shoe unseen (the next "
            f"read, card #{left + 1}, showed it: it follows the last read with no gap: no lost read accounts for "
            "them)") in alarm.message
    assert rig.round.held is not None and rig.table.pending == cards_of("5D")
    assert status(rig.table, expected - 4) == []  # after #left+1: the same difference, named already
    rig.table.apply(Redeal("sup-1", SUP))
    [alarm_id] = open_mismatch_ids(rig.table)
    with pytest.raises(TableError, match=f"shoe count mismatch alarm {alarm_id} is open"):
        rig.table.apply(OpenRound())


def test_what_the_next_reads_gap_does_not_account_for_is_the_count_alarm_beside_its_missing_read() -> None:
    rig = reader_1_0_mid_round()
    expected = STACK - rig.index
    status(rig.table, expected - 3)  # one read lost in a reset, two cards taken out
    rig.index += 1
    rig.read("5D")
    [alarm] = mismatches(rig)
    assert (alarm.data["difference"], alarm.data["lost_reads"]) == (-2, 1)
    assert "its gap accounts for 1 lost read(s), not for these" in alarm.message
    assert len(rig.find(Reason.MISSING_READ)) == 1
    assert status(rig.table, STACK - rig.index - 2) == []  # the two still gone: named already


def test_a_1_1_shoes_count_of_fewer_cards_while_its_events_are_reported_lost_waits_for_the_next_read() -> None:
    """A 1.1 shoe whose full buffer pushed reads out (the daemon's EVENTS_LOST, open): its Status
    counts them out and its next read skips them, as a 1.0 shoe's lost reads. Without such an alarm
    a 1.1 shoe's count is final (the alarm at once, above)."""
    rig = TableRig.from_file(RULES, protocol_minor=1)
    rig.bets(1, 2)
    rig.deal("TH 9S")
    rig.table.alarms.raise_from(Event(Reason.EVENTS_LOST, "shoe-reader", "shoe-reader: events 9..11 (3) are lost: "
                                      "overflow", Severity.ALARM))
    status(rig.table, STACK - rig.index - 3)
    assert not mismatches(rig) and rig.round.held is None
    rig.index += 3
    rig.read("5D")
    assert not mismatches(rig) and len(rig.find(Reason.MISSING_READ)) == 1


def test_a_count_waiting_for_a_read_gives_way_to_a_later_count_and_to_a_new_load_and_holds_no_round() -> None:
    rig = TableRig.from_file(RULES)
    expected = STACK - rig.index
    status(rig.table, expected - 2)  # between rounds
    rig.table.apply(OpenRound())  # nothing waits for it: the round's first card decides
    status(rig.table, expected)  # a later count agrees: the two were there after all
    assert rig.table.shoe_count_short is None
    rig.table.apply(PlaceBet(1, "p1", 1000))
    rig.table.apply(NoMoreBets("dealer-1"))
    rig.deal("TH 9S 5D")
    assert not mismatches(rig) and rig.round.held is None
    status(rig.table, STACK - rig.index - 1)
    rig.table.apply(Redeal("sup-1", SUP))
    rig.table.apply(VoidShoe("sup-1", SUP))
    rig.shuffle_ok()
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))  # a new load forgets it
    assert rig.table.shoe_count_short is None


def test_the_snapshot_keeps_a_count_waiting_for_the_next_read() -> None:
    rig = reader_1_0_mid_round()
    expected = STACK - rig.index
    status(rig.table, expected - 3)
    snap = json.loads(json.dumps(snapshot(rig.table)))
    assert snap["shoe_count_short"] == {"held": expected - 3, "expected": expected, "put_back": 0}
    table = restore(rig.table.rules, rig.events.append, snap, hold=False, clock=rig.clock)
    table.apply(DeviceMessage("shoe-reader", CardRead(rig.index + 1, Card.parse("5D"), Orientation.FACE_DOWN, 0)))
    [alarm] = mismatches(rig)
    assert alarm.data["difference"] == -3 and alarm.data["read"] == rig.index + 1
