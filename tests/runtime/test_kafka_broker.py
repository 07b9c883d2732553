"""Clients against a real Kafka broker: one that cannot reach it says which setting to
look at, and statefed's producers are idempotent."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from node.serve.app import changelog_partition_counts
from runtime.config import ConfigError
from runtime.kafka import KafkaConnectionError, KafkaProperties, KafkaSettings
from runtime.produce import ProduceError, Record, new_producer, produce_records, producer_config
from runtime.topics import ensure_topics, partition_count
from schema import CATALOGUE, MEMBERS_TOPIC
from tooling.broker import KafkaBroker
from tooling.processes import wait_until


def test_a_wrong_port_names_the_bootstrap_setting() -> None:
    with pytest.raises(KafkaConnectionError) as caught:
        partition_count("127.0.0.1:1", MEMBERS_TOPIC, timeout_s=2.0)
    message = str(caught.value)
    assert "STATEFED_BOOTSTRAP (127.0.0.1:1)" in message
    assert "STATEFED_KAFKA_CONFIG" in message  # a secured cluster needs more settings


def test_tls_against_a_plaintext_listener_names_the_tls_settings(broker: KafkaBroker) -> None:
    environ = {
        "STATEFED_KAFKA_SECURITY_PROTOCOL": "SSL",
        # a plaintext listener drops a TLS hello: do not retry it for long
        "STATEFED_KAFKA_SOCKET_CONNECTION_SETUP_TIMEOUT_MS": "1000",
    }
    tls = KafkaSettings(broker.bootstrap, KafkaProperties.from_env(environ))
    with pytest.raises(KafkaConnectionError) as caught:
        changelog_partition_counts(tls, CATALOGUE[:1])  # what a node does at start-up
    message = str(caught.value)
    assert "ssl.ca.location" in message
    assert "a TLS error" in message and "security.protocol (now SSL)" in message


def test_the_same_broker_answers_plaintext(broker: KafkaBroker) -> None:
    topic = "test.kafka-settings.plaintext"
    ensure_topics(KafkaSettings(broker.bootstrap), {topic: 2})
    assert partition_count(KafkaSettings(broker.bootstrap), topic, timeout_s=10.0) == 2


def test_a_producer_stays_idempotent_whatever_the_user_sets() -> None:
    with pytest.raises(ConfigError, match="STATEFED_KAFKA_ENABLE_IDEMPOTENCE: sets enable"):
        KafkaProperties.from_env({"STATEFED_KAFKA_ENABLE_IDEMPOTENCE": "false"})
    config = producer_config(KafkaSettings("127.0.0.1:1"), {"enable.idempotence": False})
    assert config["enable.idempotence"] is True
    assert config["partitioner"] == "murmur2_random"


def test_an_idempotent_producer_writes_each_record_once_in_order(broker: KafkaBroker) -> None:
    topic = f"test.produce.idempotent-{uuid.uuid4().hex[:8]}"
    ensure_topics(broker.bootstrap, {topic: 1})
    records = [Record(f"k{i % 7}", b"%d" % i) for i in range(500)]
    producer = new_producer(broker.bootstrap, {"acks": "all"})
    try:
        writes = produce_records(broker.bootstrap, topic, records, producer)
    finally:
        producer.close()
    assert [w.offset for w in writes] == list(range(len(records)))
    assert [w.key for w in writes] == [r.key for r in records]
    assert _values(broker.bootstrap, topic, len(records)) == [r.value for r in records]


def test_a_record_over_the_producers_limit_stops_a_produce_once_the_ones_before_land(
    broker: KafkaBroker,
) -> None:
    topic = f"test.produce.too-large-{uuid.uuid4().hex[:8]}"
    ensure_topics(broker.bootstrap, {topic: 1})
    records = [Record("a", b"1"), Record("b", b"2"), Record("big", b"x" * 5_000), Record("c", b"3")]
    producer = new_producer(broker.bootstrap, {"message.max.bytes": 2_000})
    try:
        with pytest.raises(ProduceError) as failed:
            produce_records(broker.bootstrap, topic, records, producer)
    finally:
        producer.close()
    message = str(failed.value)
    assert message.startswith(f"producing to {topic} on {broker.bootstrap}: 2 records delivered;")
    assert "key 'big' refused before sending (" in message and "Produce again only" in message
    assert _values(broker.bootstrap, topic, 2) == [b"1", b"2"]


def test_ensure_topics_names_the_existing_topics_whose_partition_count_differs(
    broker: KafkaBroker,
) -> None:
    kept, fresh = (f"test.ensure.{name}-{uuid.uuid4().hex[:8]}" for name in ("kept", "fresh"))
    assert ensure_topics(broker.bootstrap, {kept: 2}) == {}
    assert ensure_topics(broker.bootstrap, {kept: 4, fresh: 3}) == {kept: 2}
    assert ensure_topics(broker.bootstrap, {kept: 2, fresh: 3}) == {}


def _values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The values of the first `count` records of partition 0 of `topic`, in offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:

        def read() -> bool:
            values.extend(m.value() or b"" for m in consumer.consume(500, 0.5) if not m.error())
            return len(values) >= count

        wait_until(read, 20, f"{count} records of {topic}", 0)
    finally:
        consumer.close()
    return values
