"""A client that cannot reach Kafka says which setting to look at (embedded broker)."""

from __future__ import annotations

import pytest

from node.app import changelog_partition_counts
from runtime.kafka import KafkaConnectionError, KafkaProperties, KafkaSettings
from runtime.topics import ensure_topics, partition_count
from schema import CATALOGUE, MEMBERS_TOPIC
from tooling.broker import KafkaBroker


def test_a_wrong_port_names_the_bootstrap_setting() -> None:
    with pytest.raises(KafkaConnectionError) as caught:
        partition_count("127.0.0.1:1", MEMBERS_TOPIC, timeout_s=2.0)
    message = str(caught.value)
    assert "STATEFED_BOOTSTRAP (127.0.0.1:1)" in message
    assert "STATEFED_KAFKA_CONFIG" in message  # a secured cluster needs more settings


def test_tls_against_a_plaintext_listener_names_the_tls_settings(broker: KafkaBroker) -> None:
    environ = {
        "STATEFED_KAFKA_SECURITY_PROTOCOL": "SSL",
        # the broker leaves a TLS hello unanswered: give up on it soon
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
