"""cardfloor's MQTT side (cardd/floor/receiver.py) against a real mosquitto: a persistent session,
messages acknowledged only when the service says so, failover over the URL list, MQTT 5's
Maximum Packet Size."""
from __future__ import annotations

import json

import pytest
import structlog

from cardd.floor.contract import MAX_PAYLOAD
from cardd.floor.receiver import Backoff, Receiver
from tests.floor.service_rig import Collected, Table, floor_config, wait_until
from tests.support.brokers import free_port

FAST = Backoff(initial=0.05, factor=2.0, cap=0.2, stable=10.0)


def receiving(config, collected: Collected) -> Receiver:
    receiver = Receiver(config.broker, collected, backoff=FAST)
    receiver.start()
    wait_until(lambda: receiver.status().connected, "the receiver connected")
    return receiver


@pytest.mark.parametrize("version", ["5", "3.1.1"])
def test_what_is_published_while_the_floor_is_away_waits_for_it(tmp_path, mosquitto, version):
    config = floor_config(tmp_path, mosquitto, version=version)
    table = Table(mosquitto, "site-1", "bj-1")
    first = Collected()
    receiver = receiving(config, first)
    wait_until(lambda: "cardfloor-test" in mosquitto.subscribes(), "the subscription")
    receiver.stop()
    sent = table.send(3)
    second = Collected()
    receiver = receiving(config, second)
    try:
        wait_until(lambda: len(second.of("events")) == 3, "the 3 messages published while away")
        seqs = [json.loads(m.payload)["events"][0]["seq"] for m in second.of("events")]
        assert seqs == [e.seq for e in sent]
        assert mosquitto.subscribes()["cardfloor-test"] == ["cardd/v1/+/+/+"]  # the session kept it: once
    finally:
        receiver.stop()
        table.close()


def test_a_message_not_acknowledged_comes_again_and_one_acknowledged_does_not(tmp_path, mosquitto):
    config = floor_config(tmp_path, mosquitto)
    table = Table(mosquitto, "site-1", "bj-1")
    first = Collected()
    receiver = receiving(config, first)
    wait_until(lambda: "cardfloor-test" in mosquitto.subscribes(), "the subscription")
    table.send(2)
    wait_until(lambda: len(first.of("events")) == 2, "both messages")
    receiver.ack(first.of("events")[0])  # the first committed; the second not (cardfloor killed meanwhile)
    wait_until(lambda: "Received PUBACK from cardfloor-test" in mosquitto.log(), "the PUBACK")
    receiver.stop()
    second = Collected()
    receiver = receiving(config, second)
    try:
        wait_until(lambda: len(second.of("events")) >= 1, "the message not acknowledged")
        again = second.of("events")
        assert [m.payload for m in again] == [first.of("events")[1].payload]
        assert again[0].duplicate
        receiver.ack(again[0])
        wait_until(lambda: mosquitto.log().count("Received PUBACK from cardfloor-test") == 2, "the second PUBACK")
    finally:
        receiver.stop()
    third = Collected()
    receiver = receiving(config, third)
    table.send(1)
    try:
        wait_until(lambda: len(third.of("events")) == 1, "the next message")
        assert json.loads(third.of("events")[0].payload)["events"][0]["seq"] == 3  # nothing older came again
    finally:
        receiver.stop()
        table.close()


def test_a_broker_that_is_down_is_one_line_and_the_next_url_serves(tmp_path, mosquitto):
    dead = f"mqtt://127.0.0.1:{free_port()}"
    config = floor_config(tmp_path, mosquitto, urls=[dead, mosquitto.url])
    with structlog.testing.capture_logs() as logs:
        collected = Collected()
        receiver = receiving(config, collected)
        try:
            assert receiver.status().broker == mosquitto.url
            mosquitto.stop()
            wait_until(lambda: not receiver.status().connected, "the receiver saw the broker go")
            wait_until(lambda: sum(1 for e in logs if e["event"] == "floor_broker_failed" and e["broker"] == dead) >= 2,
                       "the dead broker tried again")  # lost, dead, (lost), dead, ... each said once in a row
            mosquitto.start()
            wait_until(lambda: receiver.status().connected, "the receiver back")
        finally:
            receiver.stop()
    failed = [e for e in logs if e["event"] == "floor_broker_failed"]
    assert all(e["log_level"] == "warning" and "\n" not in e["why"] for e in failed)
    assert {e["why"] for e in failed if e["broker"] == dead} == {"cannot connect: Connection refused"}


def test_a_wrong_password_is_said_and_tried_again(tmp_path, mosquitto):
    config = floor_config(tmp_path, mosquitto)
    (tmp_path / "floor.password").write_text("wrong\n")
    with structlog.testing.capture_logs() as logs:
        receiver = Receiver(config.broker, Collected(), backoff=FAST)
        receiver.start()
        try:
            wait_until(lambda: mosquitto.log().count("disconnected, not authorised") >= 3, "three attempts")
            assert not receiver.status().connected
        finally:
            receiver.stop()
    failed = [e["why"] for e in logs if e["event"] == "floor_broker_failed"]
    assert failed == ["the broker refused the connection: Not authorized"]  # once, however often


@pytest.mark.parametrize("version", ["5", "3.1.1"])
def test_a_payload_past_the_contract_s_limit(tmp_path, mosquitto, version):
    """MQTT 5: the floor's CONNECT says its Maximum Packet Size and the broker never sends it a
    larger message (mosquitto drops it for the floor); 3.1.1 has no such limit: it arrives, and
    the service refuses it (contract.decode)."""
    config = floor_config(tmp_path, mosquitto, version=version)
    table = Table(mosquitto, "site-1", "bj-1")
    collected = Collected()
    receiver = receiving(config, collected)
    wait_until(lambda: "cardfloor-test" in mosquitto.subscribes(), "the subscription")
    try:
        table.publish("events", b"x" * (10 * 1024 * 1024))
        table.send(1)
        wait_until(lambda: any(len(m.payload) < 1000 for m in collected.of("events")), "the next message")
        for message in collected.of("events"):
            receiver.ack(message)
        sizes = [len(m.payload) for m in collected.of("events")]
        assert sizes[:-1] == ([] if version == "5" else [10 * 1024 * 1024])
        if version == "5":
            assert MAX_PAYLOAD < 10 * 1024 * 1024
    finally:
        receiver.stop()
        table.close()
