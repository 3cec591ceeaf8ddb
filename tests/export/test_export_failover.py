"""Failover across a broker cluster: a real daemon dealing on simulated devices exports over MQTT
3.1.1 to a real 3-node NATS cluster, its three nodes' URLs in order. The node the table publishes
to is killed mid-shoe: the table goes on to the next URL and deals on, and a persistent subscriber
on a third node has every journal record, once after dedupe on seq, naming no card, its export
chain unbroken by the failover."""
from __future__ import annotations

import pytest

from tests.export.export_rig import SITE, ExportTable, Subscriber, export_chain, names_a_card
from tests.support.brokers import NatsCluster


@pytest.mark.timeout(240)
def test_the_table_fails_over_to_the_next_node_and_the_floor_misses_nothing(directory, nats_cluster: NatsCluster):
    user, password_file = nats_cluster.add_table(SITE, "bj-02")
    n0, n1, n2 = nats_cluster.urls
    with Subscriber(n2, nats_cluster.floor) as floor, \
            ExportTable(directory, [n0, n1, n2], "bj-02", user=user, password_file=password_file,
                        mqtt_version="3.1.1") as table:
        table.deal_rounds(1)
        before = table.wait_export(lambda e: e["connected"] and e["backlog"] == 0, "an empty backlog on n0")
        assert before["broker"] == n0
        floor.wait_for_seq("bj-02", before["delivered_through"])
        table.play_round()  # records flowing to n0 when it dies: some may be unacknowledged
        nats_cluster.kill(0)
        table.play_round()  # the shoe deals on while the export finds the next node
        after = table.wait_export(lambda e: e["connected"] and e["backlog"] == 0 and e["broker"] != n0,
                                  "an empty backlog on another node", timeout=120)
        # the next URL in order; n1 may refuse while the cluster re-elects (a NATS cluster answers
        # CONNECT and PUBACK late for 5-10 s after a node dies), and then n2, the one after it
        assert after["broker"] in (n1, n2)
        table.play_round()
        table.stop()
        last = table.last_seq()
        # every record, not just the last: one in flight to the floor when its node died comes
        # again only after the cluster's ack_wait
        floor.wait_for(lambda: set(range(1, last + 1)) <= set(floor.seqs("bj-02")),
                       lambda: f"records 1-{last}, missing {sorted(set(range(1, last + 1)) - set(floor.seqs('bj-02')))}",
                       timeout=90)
        records = table.records()
    assert sum(1 for r in records if r.reason == "SETTLED") >= 4  # the rounds were played through the failover
    # each once after dedupe; not necessarily in order: a record sent again after ack_wait comes
    # after those published since (the floor's archive orders by seq)
    assert sorted(floor.seqs("bj-02")) == list(range(1, last + 1))
    export_chain(floor, "bj-02")  # a record sent again to the next node carries its first prev and hash
    assert names_a_card(floor.received) == []
