"""SASL over TLS against a real broker: the `STATEFED_KAFKA_SASL_*` settings get a client in
(metadata, topic creation), and a wrong password is refused with a message that names the
SASL settings and does not show the password."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.kafka import KafkaConnectionError
from runtime.topics import ensure_topics, partition_count
from tests.kafka_tls.tls import TlsBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    """A broker whose one client listener is SASL_SSL with PLAIN."""
    broker = TlsBroker(Path(tmp_path_factory.mktemp("kafka-sasl")), sasl=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def test_the_user_and_password_get_a_client_in(sasl_broker: TlsBroker) -> None:
    topic = "test.kafka-sasl.created"
    ensure_topics(sasl_broker.settings(), {topic: 3})
    assert partition_count(sasl_broker.settings(), topic) == 3


def test_a_wrong_password_names_the_sasl_settings(sasl_broker: TlsBroker) -> None:
    wrong = sasl_broker.settings(password="not-the-password")
    with pytest.raises(KafkaConnectionError) as caught:
        partition_count(wrong, "test.kafka-sasl.created", timeout_s=5.0)
    message = str(caught.value)
    assert "an authentication error: check sasl.mechanism (now PLAIN)" in message
    assert "sasl.username and sasl.password" in message
    assert "not-the-password" not in message
