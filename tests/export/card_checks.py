"""What names a card in a payload of the floor export, and the check that no record of a
journal, exported with the default filter, names one while the same records sent whole do. Used
by tests/export/test_payloads.py and by the scenario library's test (tests/bench/test_scenarios.py),
which runs the whole library once and hands its journals here. The same check reads every record as the floor does (cardd.floor.contract, strictly),
in both card_data modes, its export chain recomputed."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from cardd.export.payloads import (CARD_DATA_MODES, CHAIN_START, TREATMENTS, Event, carries_cards, event_payload,
                                   events_payload, settled_round)
from cardd.floor import contract
from cardd.journal import Journal, Record
from core.cards import ALL_CARDS, Card, Suit

SUITS = {Suit.CLUBS: "♣", Suit.DIAMONDS: "♦", Suit.HEARTS: "♥", Suit.SPADES: "♠"}


def card_forms() -> set[str]:
    """Every way a card is printed: as the table writes it (str: "AS", "TD"), with a 10 ("10D"),
    in any case ("10h", "as"), and with the suit's symbol ("A♠", "10♠")."""
    forms = set()
    for card in ALL_CARDS:
        text = str(card)
        ranks = {text[:-1], "10"} if text[:-1] == "T" else {text[:-1]}
        for rank in ranks:
            for form in (rank + text[-1], rank + text[-1].lower(), (rank + text[-1]).lower()):
                assert Card.parse(form) == card  # the project's own parser reads each form as that card
                forms.add(form)
            forms |= {rank + SUITS[card.suit], rank.lower() + SUITS[card.suit]}
    return forms


#: a card as the table writes it (str(Card), or with a 10): what carries_cards must see
TABLE_WORD = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(sorted({str(c) for c in ALL_CARDS} | {
    "10" + str(c)[-1] for c in ALL_CARDS}, key=len, reverse=True)) + r")(?![A-Za-z0-9])")
CARD_WORD = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, sorted(card_forms(), key=len, reverse=True)))
                       + r")(?![A-Za-z0-9])")


def names_cards(value: Any, where: str = "", words: re.Pattern[str] = CARD_WORD, raw: bool = True) -> list[str]:
    """Where ``value`` (a decoded payload) names a card: a card word in any text or key, a card
    object (rank and suit), a composition, or (``raw``) a device's message (its bytes)."""
    found = []
    if isinstance(value, str):
        if words.search(value) or "composition" in value.lower():
            found.append(f"{where}: {value[:120]!r}")
    elif isinstance(value, dict):
        if {"rank", "suit"} <= value.keys():
            found.append(f"{where}: a card object")
        if raw and value.get("type") == "DeviceMessage" and "message" in value:  # its bytes: a card read's card, in hex
            found.append(f"{where}: a device's message")
        for key, item in value.items():
            found += names_cards(key, f"{where}.{key} (key)", words, raw)
            found += names_cards(item, f"{where}.{key}", words, raw)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += names_cards(item, f"{where}[{i}]", words, raw)
    return found


def journal_records(path: Path) -> list[Any]:
    with Journal.open(path, readonly=True) as journal:
        return journal.query(limit=None)


FLOOR_TOPIC = contract.parse_topic("cardd/v1/floor1/bj-07/events")


def check_the_floor_reads(path: Path, records: list[Record]) -> dict[str, list[bytes]]:
    """Each record sent in each card_data mode, a chain from its start, read by the floor's strict
    contract as an events message of its own: the fields as sent, each hash recomputed, each prev
    the hash before it. Returns the events sent, by mode."""
    sent: dict[str, list[bytes]] = {}
    for mode in CARD_DATA_MODES:
        prev, sent[mode] = CHAIN_START, []
        for r in records:
            payload, digest = event_payload(r, site="floor1", table="bj-07", card_data=mode, replay=False, prev=prev)
            try:
                message = contract.decode(FLOOR_TOPIC, events_payload([payload], site="floor1", table="bj-07"))
            except contract.ContractError as exc:
                raise AssertionError(f"{path}: seq {r.seq} {r.reason} ({mode}): the floor refuses it: {exc}") from None
            assert isinstance(message, contract.Events)
            (event,) = message.events
            assert (event.seq, event.prev, event.hash) == (r.seq, prev, digest), f"{path}: seq {r.seq} ({mode})"
            assert contract.event_hash(event) == digest, f"{path}: seq {r.seq} {r.reason} ({mode}): hash differs"
            prev = digest
            sent[mode].append(payload)
    return sent


def check_no_card_leaves(path: Path) -> int:
    """Every record of the journal at ``path``, exported with the default filter, names no card and
    has a treatment, and the floor reads it (:func:`check_the_floor_reads`, both modes); returns
    how many of them name a card when sent whole (after_round), which a journal that dealt cards
    must have: the check sees cards where they are."""
    records = journal_records(path)
    assert records and records[0].reason == "DAEMON_START", f"{path}: no daemon's journal"
    settled = {settled_round(r) for r in records} - {None}
    sent = check_the_floor_reads(path, records)
    whole_naming = 0
    for r, cut, whole_text in zip(records, sent["none"], sent["after_round"]):
        event = msgspec.json.decode(cut, type=Event)
        assert (event.seq, event.reason) == (r.seq, r.reason)
        assert r.kind == "input" or r.reason in TREATMENTS, f"{path}: seq {r.seq}: {r.reason} has no treatment"
        named = names_cards(msgspec.json.decode(cut))
        assert not named, f"{path}: seq {r.seq} {r.reason}: {named}"
        whole = msgspec.json.decode(whole_text)
        if names_cards(whole, words=TABLE_WORD, raw=False):
            whole_naming += 1
            assert carries_cards(r), f"{path}: seq {r.seq} {r.reason} names a card, carries_cards says not"
        if r.reason == "SETTLED":
            assert r.round in settled, f"{path}: round {r.round} settled but never complete"
    return whole_naming
