"""The floor export end to end: a real daemon dealing on simulated devices, a real mosquitto with
a password per table and an ACL, a real subscriber on the floor's side. Every journal record
reaches the floor, once after dedupe on (site, table, seq) and in order, its export chain whole
as the floor recomputes it; the status says online, then offline; each anchor is a chain hash the
journal holds and the export chain's hash of its record; no payload names a card with the default
filter; and the table subscribes to nothing."""
from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import pytest

from cardd.export.payloads import CARD_TOKEN, carries_cards
from cardd.journal import Journal
from tests.cli.cli_rig import cardctl
from tests.daemon.daemon_rig import deal_one, open_and_bet, play_out
from tests.export.export_rig import SITE, ExportTable, Subscriber, export_chain, names_a_card


@pytest.mark.timeout(180)
def test_every_record_reaches_the_floor_once_in_order_and_names_no_card(directory, mosquitto):
    user, password_file = mosquitto.add_table(SITE, "bj-01")
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-01", user=user, password_file=password_file) as table:
        table.deal_rounds(3)
        floor.wait_for(lambda: any(m.payload["shoe"] is not None and m.payload["rounds"]["this_shoe"] == 3
                                   for m in floor.messages("state", "bj-01")),
                       lambda: f"a state of three rounds this shoe (the last: {floor.messages('state')[-1:]})")
        export = table.wait_export(lambda e: e["backlog"] == 0 and e["connected"], "an empty backlog")
        assert (export["site"], export["table"], export["broker"]) == (SITE, "bj-01", mosquitto.url)
        table.stop()
        last = table.last_seq()
        floor.wait_for_seq("bj-01", last)
        floor.wait_for(lambda: any(not m.payload["online"] for m in floor.messages("status")), "the offline status")
        records = table.records()
    assert last > 60 and sum(1 for r in records if r.reason == "SETTLED") >= 3  # three rounds were played
    assert floor.seqs("bj-01") == list(range(1, last + 1))  # each once after dedupe, in order
    chain = export_chain(floor, "bj-01")  # from 64 zeros at seq 1, each hash recomputed and linked
    events = {e["seq"]: e for e in floor.events("bj-01")}
    for record in records:
        event = events[record.seq]
        assert (event["site"], event["kind"], event["source"], event["reason"], event["severity"]) == \
               (SITE, record.kind, record.source, record.reason, record.severity)
        assert event["time"] == record.time_iso[:23] + "Z"
    statuses = [m.payload for m in floor.messages("status")]
    assert statuses[0]["online"] and statuses[0]["session"] == 1 and statuses[0]["rules"]["name"] == "casino-000"
    assert statuses[-1] == {"schema": "cardd.floor/1", "site": SITE, "table": "bj-01", "online": False, "session": 1}
    anchors = [m.payload for m in floor.messages("anchor")]
    hashes = {r.seq: r.hash.hex() for r in records}
    assert anchors and anchors[-1]["seq"] == last  # the clean stop anchors the stop record
    assert all(hashes[a["seq"]] == a["hash"] for a in anchors)
    assert all(chain[a["seq"]] == a["export_hash"] for a in anchors)  # the floor's own chain reaches each anchor
    shoe_ends = [r.seq for r in records if r.reason in ("RECONCILED", "SHOE_VOID", "RECONCILIATION_FAILED")]
    assert all(any(a["seq"] >= end for a in anchors) for end in shoe_ends)
    assert any(CARD_TOKEN.search(r.data_json) for r in records)  # the journal names cards...
    assert names_a_card(floor.received) == []  # ...the floor never hears one
    states = [m.payload for m in floor.messages("state", "bj-01")]
    assert states and {d["role"] for d in states[-1]["devices"]} == {"shoe", "shuffler"}
    assert all(s["shoe"] is None or s["shoe"]["penetration"] in ("0-25%", "25-50%", "50-75%", "75-100%")
               for s in states)
    collected = directory / "anchors.jsonl"  # as a floor recorder keeps them: topic and payload a line
    collected.write_text("".join(json.dumps({"topic": m.topic, "payload": m.payload}) + "\n"
                                 for m in floor.messages("anchor")))
    checked = cardctl(None, "verify-journal", "--file", str(table.journal_path), "--anchors", str(collected))
    assert checked.code == 0, checked.err
    assert f"anchors: {len({a['seq'] for a in anchors})} checked, every one reproduced" in checked.out
    table_ids = [client for client in mosquitto.subscribes() if client.startswith("cardd-")]
    assert table_ids == []  # the floor's subscriber subscribed; the table never did
    assert "floor-test" in mosquitto.subscribes()


def deal_to_a_live_round(table: ExportTable) -> dict[str, Any]:
    """Open rounds and deal their first cards until one stops live with cards out: at the players'
    decisions or at insurance. A round the dealer's peek ends at once is played and another opened."""
    for _ in range(10):
        open_and_bet(table.client)
        state = table.client.state()
        while state["round"]["next"] is not None:
            state = deal_one(table.client, table.deal)
        if state["round"]["state"] not in ("complete", "void"):
            return state
    raise AssertionError(f"ten rounds in a row ended on their first cards: {state['round']}")


@pytest.mark.timeout(180)
def test_after_round_sends_a_rounds_cards_only_once_it_is_settled(directory, mosquitto):
    """export.card_data = "after_round": while a round is live the floor has none of its cards (the
    stream waits at its first card); once settled, its records arrive whole, cards named."""
    user, password_file = mosquitto.add_table(SITE, "bj-03")
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-03", user=user, password_file=password_file,
                        card_data="after_round") as table:
        table.shuffle_and_load()
        state = deal_to_a_live_round(table)
        round_id = str(state["round"]["id"])
        live = table.records()
        held_from = next(r.seq for r in live if r.round == round_id and carries_cards(r))
        time.sleep(2)  # the export runs on meanwhile: what it may send, it sends
        assert max(floor.seqs("bj-03"), default=0) < held_from
        assert not [m for m in names_a_card(floor.messages("events")) if f'"round":"{round_id}"' in m]
        assert table.export_state()["backlog"] > 0
        play_out(table.client, table.deal, lambda _state: None)
        table.stop()
        last = table.last_seq()
        floor.wait_for_seq("bj-03", last)
        records = table.records()
    assert floor.seqs("bj-03") == list(range(1, last + 1))
    chain = export_chain(floor, "bj-03")  # hashed over the data as the floor decodes it, keys sorted
    assert all(chain[m.payload["seq"]] == m.payload["export_hash"] for m in floor.messages("anchor", "bj-03"))
    whole = {e["seq"]: e for e in floor.events("bj-03")}
    for record in records:  # sent as journaled: data and message whole
        assert whole[record.seq]["data"] == {k: v for k, v in record.data.items() if k != "message"} or \
            whole[record.seq]["data"] == dict(record.data)
    assert names_a_card(floor.messages("events"))  # the settled round's cards reached the floor


#: the floor export's cursor as a release before the export chain made it
CURSOR_BEFORE_THE_CHAIN = ("DROP TABLE delivery; CREATE TABLE delivery (id INTEGER PRIMARY KEY CHECK (id = 1), "
                           "delivered_through INTEGER NOT NULL, session INTEGER NOT NULL); "
                           "INSERT INTO delivery VALUES (1, {delivered}, 1);")


@pytest.mark.timeout(180)
def test_a_journal_whose_cursor_predates_the_chain_is_upgraded_and_its_chain_starts_after_the_cursor(
        directory, mosquitto):
    """A journal exported by a release before the chain: its cursor has no ``chain`` column. The
    daemon opens it, the column is added in place, the export goes on after the cursor, and its
    chain starts there, at 64 zeros, and is kept with the cursor from then on."""
    user, password_file = mosquitto.add_table(SITE, "bj-04")
    with ExportTable(directory, [mosquitto.url], "bj-04", user=user, password_file=password_file) as table:
        table.deal_rounds(1)
        table.wait_export(lambda e: e["backlog"] == 0 and e["connected"], "an empty backlog")
        table.stop()
        delivered = table.last_seq()
        conn = sqlite3.connect(table.journal_path)
        conn.executescript(CURSOR_BEFORE_THE_CHAIN.format(delivered=delivered))
        conn.close()
        with Subscriber(mosquitto.url, mosquitto.floor, client_id="floor-after-the-upgrade") as floor:
            table.start()
            table.play_round()
            table.stop()
            last = table.last_seq()
            floor.wait_for_seq("bj-04", last)
        with Journal.open(table.journal_path, readonly=True) as journal:
            cursor = journal.delivery()
            assert journal.verify().ok
    assert floor.seqs("bj-04") == list(range(delivered + 1, last + 1))  # after the cursor, none again
    chain = export_chain(floor, "bj-04")  # 64 zeros at delivered + 1, each linked after it
    assert (cursor.delivered_through, cursor.session, cursor.chain) == (last, 2, chain[last])


@pytest.mark.timeout(120)
def test_an_unchanged_table_does_not_send_its_state_again_each_second(directory, mosquitto):
    """The state topic is sent when the table's summary changes, not because its time did: a table
    at rest sends it again only after STATE_REFRESH_S (a floor of idle tables is not a message a
    second a table)."""
    user, password_file = mosquitto.add_table(SITE, "bj-04")
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-04", user=user, password_file=password_file) as table:
        table.wait_export(lambda e: e["backlog"] == 0 and e["connected"], "an empty backlog")
        floor.wait_for(lambda: bool(floor.messages("state", "bj-04")), "a first state")
        time.sleep(3)  # the start's own changes (devices up, the backlog emptied) sent
        before = len(floor.messages("state", "bj-04"))
        time.sleep(6)
        after = floor.messages("state", "bj-04")
    assert len(after) - before == 0, [m.payload for m in after[before:]]
