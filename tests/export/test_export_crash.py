"""The daemon killed (SIGKILL) at random points while it deals and exports: the export resumes
from the cursor in the journal file each time, so the floor ends with every journal record of the
run, once after dedupe on seq and in order, and no card, and an export chain unbroken by the
kills: a record sent again after a restart carries the prev and hash it was first sent with. The
devices outlive each daemon, as hardware does, and resend what was not confirmed."""
from __future__ import annotations

import os
import random
import time

import pytest

from cardd.journal import Journal
from tests.export.export_rig import SITE, ExportTable, Subscriber, export_chain, names_a_card

KILLS = 100 if os.environ.get("CARDD_FULL") == "1" else 10


@pytest.mark.soak
@pytest.mark.timeout(1800 if KILLS > 10 else 300)
def test_sigkill_mid_export_loses_nothing_and_the_floor_dedupes_to_every_record(directory, mosquitto):
    rng = random.Random(20261202)
    user, password_file = mosquitto.add_table(SITE, "bj-02")
    cursors: list[tuple[int, str | None]] = []
    with Subscriber(mosquitto.url, mosquitto.floor) as floor, \
            ExportTable(directory, [mosquitto.url], "bj-02", user=user, password_file=password_file) as table:
        table.shuffle_and_load()
        table.play_round()
        for _ in range(KILLS):
            table.deal(rng.randint(1, 4))  # cards of a round the restart holds: read, journaled, exported
            time.sleep(rng.uniform(0.0, 0.05))  # somewhere in the commits, publishes and PUBACKs
            table.kill()
            with Journal.open(table.journal_path, readonly=True) as journal:
                delivery = journal.delivery()  # what the next start resumes after
                cursors.append((delivery.delivered_through, delivery.chain))
            table.start()
            table.wait_export(lambda e: e["connected"], "a connection after the restart")
        table.wait_export(lambda e: e["backlog"] == 0, "an empty backlog")
        table.stop()
        last = table.last_seq()
        floor.wait_for_seq("bj-02", last)
        sessions = [m.payload["session"] for m in floor.messages("status") if m.payload["online"]]
    assert floor.seqs("bj-02") == list(range(1, last + 1))  # nothing lost, nothing out of order
    assert len(floor.events("bj-02")) >= last  # at least once: a record the kill caught in flight came again
    assert sessions == list(range(1, KILLS + 2))  # each connection counted, across the kills
    through = [seq for seq, _ in cursors]
    assert through == sorted(through) and through[-1] > 0  # the cursor in the file only moved forward
    chain = export_chain(floor, "bj-02")  # resends after each restart as first sent; one chain from seq 1
    assert all(digest == chain[seq] for seq, digest in cursors if seq)  # kept with the cursor: its record's hash
    resent = len(floor.events("bj-02")) - last
    assert names_a_card(floor.received) == []
    print(f"\n{KILLS} SIGKILLs: {last} records, {resent} sent twice; cursors {through}")
