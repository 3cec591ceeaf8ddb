"""``cardctl verify-journal --file PATH --anchors FILE``: the real cardctl on a journal the real
``cardd --simulate`` wrote, against the anchors a subscriber kept; a chain rebuilt after one
edit passes the plain verify and fails this one, naming the anchor."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from cardd.journal import Journal
from tests.cli.cli_rig import cardctl, start_round
from tests.journal.journal_helpers import (anchor_payloads, forge_edit, journal_of_cards, truncate,
                                           write_anchors)


def test_a_journal_rebuilt_after_an_edit_passes_verify_and_fails_its_anchors(daemon, directory):
    start_round(daemon)  # a shoe shuffled, loaded and burnt, a round open and bet: the journal of a table
    daemon.stop()
    journal = directory / "journal.sqlite3"
    with Journal.open(journal, readonly=True) as opened:
        last = opened.last_seq
    seqs = sorted({last // 4, last // 2, 3 * last // 4, last})
    anchors = write_anchors(directory / "anchors.jsonl", anchor_payloads(journal, seqs), with_topic=True)
    good = cardctl(None, "verify-journal", "--file", str(journal), "--anchors", str(anchors))
    assert (good.code, good.err) == (0, "")
    assert good.out.splitlines()[1] == f"journal {journal}: anchors: {len(seqs)} checked, every one reproduced by " \
                                       "the journal"

    forged = directory / "forged.sqlite3"
    for suffix in ("", "-wal", "-head"):
        if Path(f"{journal}{suffix}").exists():
            shutil.copy(f"{journal}{suffix}", f"{forged}{suffix}")
    edited = last // 2 - 1  # before the second anchor, after the first
    forge_edit(forged, edited, {"message": "nothing happened here"})
    plain = cardctl(None, "verify-journal", "--file", str(forged))
    assert plain.code == 0 and plain.out.startswith(f"{forged}: ok, {last} records verified")

    run = cardctl(None, "verify-journal", "--file", str(forged), "--anchors", str(anchors))
    assert run.code == 5
    assert run.out == f"{forged}: ok, {last} records verified\n"  # the chain is sound in itself
    line = run.one_line_error()
    named = seqs[1]
    assert line.startswith(f"cardctl: journal {forged}: anchors: {len(seqs)} checked, {len(seqs) - 1} not reproduced, "
                           f"first: anchor seq {named} (")
    assert f"the journal's record {named} hashes " in line and ", the anchor says " in line

    answer = cardctl(None, "verify-journal", "--file", str(forged), "--anchors", str(anchors), "--json")
    assert answer.code == 5
    found = answer.json()
    assert found["ok"] is False and found["first_bad_seq"] is None and found["problem"] == line[len("cardctl: "):]
    assert found["anchors"]["first_mismatch"]["seq"] == named and found["anchors"]["first_mismatch"]["kind"] == "differs"
    assert (found["anchors"]["site"], found["anchors"]["table"], found["anchors"]["matched"]) == ("floor1", "bj-07", 1)


def test_a_journal_cut_short_is_exit_5_naming_the_anchor_past_its_end(tmp_path):
    journal = journal_of_cards(tmp_path / "journal.sqlite3", 100)
    anchors = write_anchors(tmp_path / "anchors.jsonl", anchor_payloads(journal, [40, 90]))
    truncate(journal, 60)
    assert cardctl(None, "verify-journal", "--file", str(journal)).code == 0
    run = cardctl(None, "verify-journal", "--file", str(journal), "--anchors", str(anchors), "--json")
    assert run.code == 5
    first = run.json()["anchors"]["first_mismatch"]
    assert (first["kind"], first["seq"], first["journal_hash"]) == ("beyond_head", 90, None)
    assert "the journal ends at seq 60, before it" in cardctl(None, "verify-journal", "--file", str(journal),
                                                              "--anchors", str(anchors)).one_line_error()


def test_anchors_files_that_cannot_be_used_are_one_line_and_exit_2(tmp_path):
    journal = journal_of_cards(tmp_path / "journal.sqlite3", 30)
    payloads = anchor_payloads(journal, [10, 20])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f"{json.dumps(payloads[0])}\n\n{{\"seq\": 3}}\n")
    run = cardctl(None, "verify-journal", "--file", str(journal), "--anchors", str(bad))
    assert run.code == 2
    assert run.one_line_error().startswith(f"cardctl: {bad}, line 3: not an anchor: ")

    mixed = write_anchors(tmp_path / "mixed.jsonl", payloads + anchor_payloads(journal, [5], table="bj-08"))
    run = cardctl(None, "verify-journal", "--file", str(journal), "--anchors", str(mixed))
    assert run.code == 2
    assert run.one_line_error() == (f"cardctl: {mixed} holds the anchors of 2 tables (floor1/bj-07, floor1/bj-08): a "
                                    "journal is one table's: choose one with --table SITE/TABLE (e.g. --table "
                                    "floor1/bj-07)")
    chosen = cardctl(None, "verify-journal", "--file", str(journal), "--anchors", str(mixed), "--table", "floor1/bj-07",
                     "--json")
    assert chosen.code == 0 and chosen.json()["anchors"]["checked"] == 2 and chosen.json()["ok"] is True

    for args, said in [(("--anchors", str(mixed)), "--anchors reads the journal file itself, not through the daemon: "
                                                   "give --file PATH too"),
                       (("--file", str(journal), "--table", "floor1/bj-07"), "--table chooses among the anchors of "
                                                                              "--anchors FILE: give --anchors too"),
                       (("--file", str(journal), "--anchors", str(tmp_path / "none.jsonl")),
                        f"{tmp_path / 'none.jsonl'}: no such file")]:
        run = cardctl(None, "verify-journal", *args)
        assert run.code == 2 and run.one_line_error().startswith(f"cardctl: {said}"), run.err


def test_text_from_an_anchors_file_is_shown_as_data(tmp_path):
    journal = journal_of_cards(tmp_path / "journal.sqlite3", 30)
    (payload,) = anchor_payloads(journal, [20])
    forged = {**payload, "hash": "ab" * 32, "time": "\x1b[2J2026-12-02T04:00:00Z"}
    run = cardctl(None, "verify-journal", "--file", str(journal), "--anchors",
                  str(write_anchors(tmp_path / "anchors.jsonl", [forged])))
    assert run.code == 5 and "\x1b" not in run.err
    assert "anchor seq 20 (\\x1b[2J2026-12-02T04:00:00Z): the journal's record 20 hashes " in run.one_line_error()
