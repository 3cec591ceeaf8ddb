"""A hostile publisher (a table's credentials in the wrong hands) against the real cardfloor: what
does not fit the contract or the table's chain is never archived, and is a floor alarm for the
table whose topic it came on."""
from __future__ import annotations

import msgspec
import paho.mqtt.client as mqtt
import pytest

from cardd.floor.contract import CHAIN_START, event_hash
from tests.floor.service_rig import Floor, Table, floor_file, wait_until

TEN_MB = 10 * 1024 * 1024


def test_a_hostile_publisher_archives_nothing_and_raises_alarms(tmp_path, mosquitto, floor_db):
    table = Table(mosquitto, "site-1", "bj-1")
    with Floor(floor_file(tmp_path, mosquitto, floor_db), floor_db, mosquitto) as floor:
        table.status()
        good = table.send(5, per_message=5)
        floor.wait_for_seqs("site-1", "bj-1", [1, 2, 3, 4, 5])

        # a payload naming table B on A's topic
        other = msgspec.structs.replace(table.event(), table="bj-2")
        other = msgspec.structs.replace(other, hash=event_hash(other))
        table.seq, table.prev = 5, good[-1].hash  # not a record of A's chain
        table.publish("events", msgspec.json.encode({"schema": "cardd.floor/1", "site": "site-1", "table": "bj-2",
                                                     "events": [other]}))
        named = floor.wait_for_alarm("bad_message", "events")
        assert (named["site"], named["table"]) == ("site-1", "bj-1")
        assert named["detail"] == ("cardd/v1/site-1/bj-1/events: a payload naming site-1/bj-2 on "
                                   "site-1/bj-1's topic")
        # malformed JSON
        table.publish("status", b'{"schema": "cardd.floor/1", "site": ')
        broken = floor.wait_for_alarm("bad_message", "status")
        assert broken["detail"] == "cardd/v1/site-1/bj-1/status: status: not a cardd.floor/1 payload: not JSON"
        # a seq going backwards: record 3 again, other content (a journal rewritten), and a chain started again
        rewritten = msgspec.structs.replace(good[2], message="nothing happened")
        rewritten = msgspec.structs.replace(rewritten, hash=event_hash(rewritten))
        table.publish("events", table.events_payload([rewritten]))
        again = msgspec.structs.replace(good[0], message="a new journal", prev=CHAIN_START)
        table.publish("events", table.events_payload([msgspec.structs.replace(again, hash=event_hash(again))]))
        floor.wait_for_alarm("chain", "rewritten:3")
        floor.wait_for_alarm("chain", "rewritten:1")
        # a hash that does not recompute
        forged = table.event()
        table.publish("events", table.events_payload([msgspec.structs.replace(forged, message="forged")]))
        floor.wait_for_alarm("chain", f"bad_hash:{forged.seq}")
        # the session counter going backwards
        table.status(session=0)
        floor.wait_for_alarm("chain", "session_backwards:5")
        # a topic outside the contract, twice: one line in the log
        table.publish("commands", b"{}")
        table.publish("commands", b"{}")
        table.publish("events", table.events_payload([forged]))  # record 6 as the table wrote it
        wait_until(lambda: 6 in floor.seqs("site-1", "bj-1"), "the next good record")

        assert floor.seqs("site-1", "bj-1") == [1, 2, 3, 4, 5, 6]
        assert floor.query("SELECT hash FROM chain ORDER BY seq LIMIT 3")[2][0].hex() == good[2].hash
        assert floor.query("SELECT site, table_name FROM floor_tables") == [("site-1", "bj-1")]
        dropped = floor.events("floor_topic_dropped")
        assert [e["topic"] for e in dropped] == ["cardd/v1/site-1/bj-1/commands"]
        assert sorted((a["kind"], a["key"]) for a in floor.alarms()) == [
            ("bad_message", "events"), ("bad_message", "status"), ("chain", "bad_hash:6"),
            ("chain", "rewritten:1"), ("chain", "rewritten:3"), ("chain", "session_backwards:5")]
        assert "Traceback" not in floor.log()
    table.close()


@pytest.mark.parametrize("version", ["5", "3.1.1"])
def test_a_10_mb_payload(tmp_path, mosquitto, floor_db, version):
    """MQTT 5: cardfloor's CONNECT names its Maximum Packet Size (the contract's 1 MiB and a
    header), so mosquitto (whose own limit, message_size_limit, is off by default) takes the
    10 MB message from the table and drops it for the floor alone: it never arrives, nothing is
    raised, and the records after it are archived. 3.1.1 has no such limit: it arrives, and the
    contract refuses it (a bad_message alarm)."""
    table = Table(mosquitto, "site-1", "bj-1", version=mqtt.MQTTv5 if version == "5" else mqtt.MQTTv311)
    with Floor(floor_file(tmp_path, mosquitto, floor_db, version=version), floor_db, mosquitto) as floor:
        table.send(1)
        table.publish("events", b"[" * TEN_MB)
        table.send(1)
        floor.wait_for_seqs("site-1", "bj-1", [1, 2])
        if version == "5":
            assert "Dropping too large outgoing PUBLISH for cardfloor-test" in mosquitto.log()
            assert floor.alarms() == []
        else:
            alarm = floor.wait_for_alarm("bad_message", "events")
            assert alarm["detail"] == ("cardd/v1/site-1/bj-1/events: 10485760 bytes: more than the 1048576 "
                                       "a message may hold")
    table.close()
