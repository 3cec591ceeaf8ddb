"""The real brokers the floor export's tests run against (tests/support/brokers.py), checked
with a real MQTT client (aiomqtt): mosquitto's ACL keeps each table to its own topics, its TLS
listener takes only clients that trust the test CA, its log shows every SUBSCRIBE, and a NATS
cluster keeps a persistent session's QoS 1 messages flowing when a node dies."""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from paho.mqtt.reasoncodes import ReasonCode

from tests.support.aio import run
from tests.support.brokers import Credentials, Mosquitto, NatsCluster, make_tls, mqtt_connect_accepted, read_password

V5 = aiomqtt.ProtocolVersion.V5
V311 = aiomqtt.ProtocolVersion.V311
NOT_AUTHORIZED = 0x87
MESSAGE_TIMEOUT = 10.0
#: how long a table keeps trying while the cluster elects new leaders for a dead node's
#: JetStream streams (5 to 10 s here: until then a CONNECT or PUBACK times out)
FAILOVER_TIMEOUT = 30.0
#: one attempt's wait for a CONNACK, PUBACK or SUBACK while failing over (then the next attempt)
ATTEMPT_TIMEOUT = 3.0


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@asynccontextmanager
async def connected(url: str, who: Credentials | None, *, identifier: str | None = None,
                    protocol: aiomqtt.ProtocolVersion = V5, clean_session: bool | None = None,
                    tls: aiomqtt.TLSParameters | None = None,
                    timeout: float = MESSAGE_TIMEOUT) -> AsyncIterator[aiomqtt.Client]:
    client = aiomqtt.Client("127.0.0.1", port_of(url), username=None if who is None else who.user,
                            password=None if who is None else who.password, identifier=identifier,
                            protocol=protocol, clean_session=clean_session, tls_params=tls, timeout=timeout)
    try:
        async with client:
            yield client
    finally:
        await settled(client)


async def settled(client: aiomqtt.Client) -> None:
    """What aiomqtt leaves after its exit: its housekeeping task cancelled but not awaited (one
    turn of the loop ends it), and after a lost connection an exception in its "disconnected"
    future that nobody reads (the loop would report it as escaped)."""
    await asyncio.sleep(0)
    disconnected = client._disconnected
    if disconnected.done() and not disconnected.cancelled():
        disconnected.exception()


async def publish_retrying(url: str, who: Credentials, identifier: str, topic: str, payload: bytes) -> None:
    """Publish at QoS 1 through ``url`` (MQTT 3.1.1), connecting again until it is acknowledged,
    as a table must while a cluster recovers from a lost node."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FAILOVER_TIMEOUT
    while True:
        try:
            async with connected(url, who, identifier=identifier, protocol=V311, timeout=ATTEMPT_TIMEOUT) as client:
                await client.publish(topic, payload, qos=1)
            return
        except aiomqtt.MqttError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def subscribe_retrying(url: str, who: Credentials, identifier: str, topic: str) -> None:
    """A persistent (clean session false) subscription at QoS 1 through ``url``, tried again
    until the broker grants it: NATS refuses one (SUBACK 0x80) while the cluster has not yet
    seen that a node is gone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FAILOVER_TIMEOUT
    granted: object = None
    while True:
        try:
            async with connected(url, who, identifier=identifier, protocol=V311, clean_session=False,
                                 timeout=ATTEMPT_TIMEOUT) as client:
                granted = await client.subscribe(topic, qos=1)
            if list(granted) == [1]:
                return
        except aiomqtt.MqttError:
            pass
        assert loop.time() < deadline, f"the subscription was never granted (last: {granted!r})"
        await asyncio.sleep(0.1)


async def next_new_payload(client: aiomqtt.Client, seen: set[bytes]) -> bytes:
    """The next payload not received before: QoS 1 is at least once, so a publish repeated after
    a lost PUBACK may arrive twice; a floor consumer dedupes."""
    while (payload := (await next_message(client)).payload) in seen:
        pass
    assert isinstance(payload, bytes)
    seen.add(payload)
    return payload


async def receive_retrying(url: str, who: Credentials, identifier: str, seen: set[bytes], count: int = 1) -> list[bytes]:
    """The next ``count`` new payloads of persistent session ``identifier`` through ``url``,
    connecting again until they came (a QoS 1 message not acknowledged is delivered again).
    Read in one connection: what it acknowledged is not sent again to a later one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FAILOVER_TIMEOUT
    got: list[bytes] = []
    while True:
        try:
            async with connected(url, who, identifier=identifier, protocol=V311, clean_session=False,
                                 timeout=ATTEMPT_TIMEOUT) as client:
                while len(got) < count:
                    got.append(await next_new_payload(client, seen))
                return got
        except (aiomqtt.MqttError, TimeoutError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.1)


def table_credentials(broker: Mosquitto | NatsCluster, site: str, table: str) -> Credentials:
    user, password_file = broker.add_table(site, table)
    return Credentials(user, read_password(password_file))


async def next_message(client: aiomqtt.Client) -> aiomqtt.Message:
    return await asyncio.wait_for(anext(aiter(client.messages)), MESSAGE_TIMEOUT)


def puback_codes(client: aiomqtt.Client) -> list[int]:
    """The reason codes of the PUBACKs ``client`` receives from now on. aiomqtt's publish()
    returns on any PUBACK, refused or not: the code reaches only paho's on_publish."""
    codes: list[int] = []
    paho = client._client
    passed_on: Any = paho.on_publish  # (typed as either of paho's two callback versions)
    assert passed_on is not None, "aiomqtt's own on_publish"

    def record(paho_client: Any, userdata: Any, mid: int, reason: ReasonCode, properties: Any) -> None:
        codes.append(reason.value)
        passed_on(paho_client, userdata, mid, reason, properties)

    paho.on_publish = record
    return codes


# ---- mosquitto: the ACL -----------------------------------------------------------------------

def test_a_table_publishes_under_its_own_topic_and_is_refused_another_tables(mosquitto: Mosquitto) -> None:
    own = table_credentials(mosquitto, "floor1", "bj-07")
    table_credentials(mosquitto, "floor1", "bj-08")

    async def main() -> None:
        async with connected(mosquitto.url, mosquitto.floor, identifier="floor-reader") as floor:
            await floor.subscribe("cardd/v1/#", qos=1)
            async with connected(mosquitto.url, own) as table:
                codes = puback_codes(table)
                await table.publish("cardd/v1/floor1/bj-08/events", b"not mine", qos=1)
                await table.publish("cardd/v1/floor1/bj-07/events", b"mine", qos=1)
                assert codes == [NOT_AUTHORIZED, 0]
            # messages from one publisher arrive in order: had the refused one been passed on,
            # it would have come first
            message = await next_message(floor)
            assert (str(message.topic), message.payload, message.qos) == ("cardd/v1/floor1/bj-07/events", b"mine", 1)
        assert "Denied PUBLISH" in mosquitto.log() and "'cardd/v1/floor1/bj-08/events'" in mosquitto.log()
    run(main())


def test_with_mqtt_3_1_1_a_refused_publish_is_dropped_silently(mosquitto: Mosquitto) -> None:
    own = table_credentials(mosquitto, "floor1", "bj-07")

    async def main() -> None:
        async with connected(mosquitto.url, mosquitto.floor, protocol=V311) as floor:
            await floor.subscribe("cardd/v1/#", qos=1)
            async with connected(mosquitto.url, own, protocol=V311) as table:
                codes = puback_codes(table)
                await table.publish("cardd/v1/floor2/bj-07/events", b"not mine", qos=1)
                await table.publish("cardd/v1/floor1/bj-07/state", b"mine", qos=1)
                assert codes == [0, 0], "3.1.1's PUBACK carries no reason: the refusal is not told"
            message = await next_message(floor)
            assert (str(message.topic), message.payload) == ("cardd/v1/floor1/bj-07/state", b"mine")
    run(main())


def test_the_floor_reader_may_not_publish_and_a_wrong_password_is_refused(mosquitto: Mosquitto) -> None:
    async def main() -> None:
        async with connected(mosquitto.url, mosquitto.floor) as floor:
            codes = puback_codes(floor)
            await floor.publish("cardd/v1/floor1/bj-07/status", b"forged", qos=1)
            assert codes == [NOT_AUTHORIZED]
        with pytest.raises(aiomqtt.MqttCodeError) as refused:
            async with connected(mosquitto.url, Credentials(mosquitto.floor.user, "wrong")):
                pass
        assert refused.value.rc in (ReasonCode(2, identifier=0x86), ReasonCode(2, identifier=0x87)), refused.value
    run(main())


def test_a_table_added_while_the_broker_runs_can_publish_at_once(mosquitto: Mosquitto, tmp_path: Path) -> None:
    user, password_file = mosquitto.add_table("floor1", "bj-09")
    assert password_file.stat().st_mode & 0o777 == 0o600
    assert password_file.read_text().endswith("\n") and "\n" not in read_password(password_file)

    async def main() -> None:
        async with connected(mosquitto.url, mosquitto.floor) as floor:
            await floor.subscribe("cardd/v1/#", qos=1)
            async with connected(mosquitto.url, Credentials(user, read_password(password_file))) as table:
                codes = puback_codes(table)
                await table.publish("cardd/v1/floor1/bj-09/anchor", b"{}", qos=1)
                assert codes == [0]
            assert (await next_message(floor)).topic.value == "cardd/v1/floor1/bj-09/anchor"
    run(main())


# ---- mosquitto: TLS -----------------------------------------------------------------------------

def test_a_client_trusting_the_test_ca_connects_over_tls_and_one_without_it_is_refused(mosquitto_tls: Mosquitto) -> None:
    assert mosquitto_tls.tls is not None and mosquitto_tls.tls_port is not None
    ca, tls_port = str(mosquitto_tls.tls.ca), mosquitto_tls.tls_port
    own = table_credentials(mosquitto_tls, "floor1", "bj-07")
    trusting = aiomqtt.TLSParameters(ca_certs=ca)

    async def main() -> None:
        async with connected(mosquitto_tls.url, mosquitto_tls.floor) as floor:
            await floor.subscribe("cardd/v1/#", qos=1)
            async with connected(mosquitto_tls.tls_url, own, tls=trusting) as table:
                await table.publish("cardd/v1/floor1/bj-07/events", b"over tls", qos=1)
            assert (await next_message(floor)).payload == b"over tls"
        # the system's CAs only: the test CA's server certificate is not trusted
        with pytest.raises(aiomqtt.MqttError) as refused:
            async with connected(mosquitto_tls.tls_url, own, tls=aiomqtt.TLSParameters()):
                pass
        assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value), refused.value
        # and TLS spoken to the plain listener is no connection either
        assert not mqtt_connect_accepted(mosquitto_tls.port, own.user, own.password, "tls-to-plain",
                                         ssl.create_default_context(cafile=ca))
        assert mqtt_connect_accepted(tls_port, own.user, own.password, "tls", ssl.create_default_context(cafile=ca))
    run(main())


def test_with_client_certificates_the_certificate_is_the_user(tmp_path: Path) -> None:
    tls = make_tls(tmp_path, client_name="floor1.bj-07")
    other_ca = make_tls(tmp_path / "other", client_name="floor1.bj-07")
    with Mosquitto(tmp_path, tls=tls, client_certificates=True) as broker:
        broker.add_table("floor1", "bj-07")
        certified = aiomqtt.TLSParameters(ca_certs=str(tls.ca), certfile=str(tls.client_cert), keyfile=str(tls.client_key))

        async def main() -> None:
            async with connected(broker.url, broker.floor) as floor:
                await floor.subscribe("cardd/v1/#", qos=1)
                async with connected(broker.tls_url, None, tls=certified) as table:
                    codes = puback_codes(table)
                    await table.publish("cardd/v1/floor1/bj-08/events", b"not mine", qos=1)
                    await table.publish("cardd/v1/floor1/bj-07/events", b"by certificate", qos=1)
                    assert codes == [NOT_AUTHORIZED, 0]
                assert (await next_message(floor)).payload == b"by certificate"
            assert "u'floor1.bj-07'" in broker.log()
            # TLS 1.3 finishes the client's handshake before the broker checks its certificate:
            # aiomqtt would see only no CONNACK (paho prints the TLS alert). A plain client says
            # whether the broker took it, and the broker's log says what it refused.
            for cert, why in [(None, "peer did not return a certificate"),
                              (other_ca, "certificate verify failed")]:
                context = ssl.create_default_context(cafile=str(tls.ca))
                if cert is not None:
                    context.load_cert_chain(cert.client_cert, cert.client_key)
                assert not mqtt_connect_accepted(port_of(broker.tls_url), None, None, "no-certificate", context)
                broker.wait_for_log(lambda log: why in log, why)  # (logged once the broker reads the alert)
            own = ssl.create_default_context(cafile=str(tls.ca))
            own.load_cert_chain(tls.client_cert, tls.client_key)
            assert mqtt_connect_accepted(port_of(broker.tls_url), None, None, "certified", own)
        run(main())


# ---- mosquitto: what its log tells of SUBSCRIBEs, and its lifecycle -------------------------

def test_the_log_shows_a_subscribers_subscribe_and_none_from_a_client_that_only_publishes(mosquitto: Mosquitto) -> None:
    own = table_credentials(mosquitto, "floor1", "bj-07")

    async def main() -> None:
        async with connected(mosquitto.url, mosquitto.floor, identifier="floor-reader") as floor:
            await floor.subscribe("cardd/v1/+/+/status", qos=1)
            await floor.subscribe("cardd/v1/floor1/#", qos=1)
            async with connected(mosquitto.url, own, identifier="table-bj-07") as table:
                await table.publish("cardd/v1/floor1/bj-07/status", b"online", qos=1)
            await next_message(floor)
        assert "as table-bj-07 " in mosquitto.log(), "the publisher's connection is in the log"
        assert mosquitto.subscribes() == {"floor-reader": ["cardd/v1/+/+/status", "cardd/v1/floor1/#"]}
    run(main())


def test_a_persistent_session_outlives_a_stop_and_a_pause_holds_the_publisher(mosquitto: Mosquitto) -> None:
    own = table_credentials(mosquitto, "floor1", "bj-07")

    async def main() -> None:
        async with connected(mosquitto.url, mosquitto.floor, identifier="floor-reader", protocol=V311,
                             clean_session=False) as floor:
            await floor.subscribe("cardd/v1/#", qos=1)
        async with connected(mosquitto.url, own) as table:
            await table.publish("cardd/v1/floor1/bj-07/events", b"while away", qos=1)
        assert mosquitto.stop() == 0
        mosquitto.start()  # the same port, the same persistence
        async with connected(mosquitto.url, own) as table:
            mosquitto.pause()
            publishing = asyncio.ensure_future(table.publish("cardd/v1/floor1/bj-07/events", b"after", qos=1))
            await asyncio.sleep(0.3)  # a chance to be answered, were anyone there
            assert not publishing.done(), "a stopped broker answered"
            mosquitto.resume()
            await publishing
        async with connected(mosquitto.url, mosquitto.floor, identifier="floor-reader", protocol=V311,
                             clean_session=False) as floor:
            got = [(await next_message(floor)).payload for _ in range(2)]
        assert got == [b"while away", b"after"]
    run(main())


def test_a_broker_that_cannot_start_says_why_in_its_own_words(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    broker.config.write_text(broker.config.read_text() + "no_such_option true\n")
    with pytest.raises(RuntimeError, match="mosquitto exited with") as failed:
        broker.start()
    assert "no_such_option" in str(failed.value), failed.value


# ---- a NATS cluster ------------------------------------------------------------------------------

def test_a_persistent_subscriber_on_one_node_gets_qos1_from_the_others_and_after_a_node_dies(
        nats_cluster: NatsCluster) -> None:
    table = table_credentials(nats_cluster, "floor1", "bj-07")
    n0, n1, n2 = nats_cluster.urls
    topic = "cardd/v1/floor1/bj-07/events"

    async def main() -> None:
        seen: set[bytes] = set()
        async with connected(n0, nats_cluster.floor, identifier="floor-reader", protocol=V311,
                             clean_session=False) as floor:
            await floor.subscribe("cardd/v1/#", qos=1)
            async with connected(n1, table, identifier="table", protocol=V311) as publisher:
                await publisher.publish(topic, b"1", qos=1)
            message = await next_message(floor)
            assert (str(message.topic), message.payload, message.qos) == (topic, b"1", 1)
            seen.add(b"1")

            nats_cluster.kill(1)
            await publish_retrying(n2, table, "table", topic, b"2")
            assert await next_new_payload(floor, seen) == b"2"
        # with a node still down: the session keeps what is published while its client is away,
        # and a new persistent session can be made
        await publish_retrying(n2, table, "table", topic, b"3")
        await subscribe_retrying(n2, nats_cluster.floor, "floor-reader-2", "cardd/v1/#")
        await publish_retrying(n0, table, "table", topic, b"4")
        assert await receive_retrying(n0, nats_cluster.floor, "floor-reader", seen, count=2) == [b"3", b"4"]
        assert await receive_retrying(n2, nats_cluster.floor, "floor-reader-2", set()) == [b"4"]
    run(main())


def test_a_waiting_message_outlives_the_node_that_stored_it_and_that_node_rejoins(nats_cluster: NatsCluster) -> None:
    table = table_credentials(nats_cluster, "floor1", "bj-07")
    topic = "cardd/v1/floor1/bj-07/events"

    async def main() -> None:
        with pytest.raises(aiomqtt.MqttError):  # MQTT 3.1.1 only
            async with connected(nats_cluster.urls[0], table, protocol=V5):
                pass
        leader = nats_cluster.stream_leader("$MQTT_msgs")
        reader, publisher = [url for i, url in enumerate(nats_cluster.urls) if i != leader]
        await subscribe_retrying(reader, nats_cluster.floor, "floor-reader", "cardd/v1/#")
        await publish_retrying(publisher, table, "table", topic, b"waiting")
        nats_cluster.kill(leader)
        seen: set[bytes] = set()
        assert await receive_retrying(reader, nats_cluster.floor, "floor-reader", seen) == [b"waiting"]
        nats_cluster.start(leader)  # the same ports and store; ready once routed, current and serving MQTT
        await publish_retrying(nats_cluster.urls[leader], table, "table", topic, b"back")
        assert await receive_retrying(reader, nats_cluster.floor, "floor-reader", seen) == [b"back"]
    run(main())


def test_two_brokers_in_one_test_keep_to_their_own_folders_and_ports(mosquitto: Mosquitto,
                                                                      mosquitto_tls: Mosquitto) -> None:
    assert mosquitto.directory != mosquitto_tls.directory and mosquitto.port != mosquitto_tls.port
    assert mosquitto.floor.password != mosquitto_tls.floor.password

    async def main() -> None:
        for broker in (mosquitto, mosquitto_tls):
            async with connected(broker.url, broker.floor):
                pass
    run(main())
