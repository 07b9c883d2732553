"""What `produce_records` says when some records are not delivered: how many were, and
which keys were not, so that a person produces again only those (over a stand-in for the
producer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from runtime.produce import ProduceError, Record, produce_records


class _Sent:
    """What the delivery report is about: a record's key and where it landed."""

    def __init__(self, key: bytes, offset: int) -> None:
        self._key, self._offset = key, offset

    def key(self) -> bytes:
        return self._key

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


class _Producer:
    """Delivers every record but those whose key is in `refused`, at flush; raises as
    librdkafka does for a key in `too_large`, before queuing it."""

    def __init__(self, refused: set[bytes], too_large: frozenset[bytes] = frozenset()) -> None:
        self.refused, self.too_large = refused, too_large
        self.reports: list[tuple[bytes, Callable[..., None]]] = []
        self.flushed = False

    def produce(self, topic: str, key: bytes, on_delivery: Callable[..., None], **_: Any) -> None:
        if key in self.too_large:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        self.reports.append((key, on_delivery))

    def flush(self, timeout: float) -> int:
        self.flushed = True
        for offset, (key, report) in enumerate(self.reports):
            refused = key in self.refused
            report(
                KafkaError(KafkaError.MSG_SIZE_TOO_LARGE) if refused else None, _Sent(key, offset)
            )
        return 0


def test_a_failed_produce_names_the_keys_not_delivered_in_order_and_counts_the_rest() -> None:
    keys = ["a", "b", "c", "d", *(f"k{i}" for i in range(30))]
    refused = {b"d", b"b", *(f"k{i}".encode() for i in range(30))}
    records = [Record(key, b"{}") for key in keys]
    with pytest.raises(ProduceError) as failed:
        produce_records("127.0.0.1:1", "words", records, _Producer(refused))  # type: ignore[arg-type]
    message = str(failed.value)
    assert message.startswith("producing to words on 127.0.0.1:1: 2 records delivered; 32 not ")
    named = message.split("not delivered: ")[1]
    assert named.startswith("'b' (Broker: Message size too large), 'd' (Broker: Message size")
    assert "'k17' (" in named and "'k18' (" not in named and "and 12 more" in named
    assert "Produce again only those" in message


def test_a_record_the_client_refuses_stops_the_produce_after_those_before_it_are_sent() -> None:
    producer = _Producer(set(), too_large=frozenset({b"c"}))
    records = [Record(key, b"{}") for key in ("a", "b", "c", "d")]
    with pytest.raises(ProduceError) as failed:
        produce_records("127.0.0.1:1", "words", records, producer)  # type: ignore[arg-type]
    assert producer.flushed and [key for key, _ in producer.reports] == [b"a", b"b"]
    message = str(failed.value)
    assert message.startswith("producing to words on 127.0.0.1:1: 2 records delivered; key 'c' ")
    assert "refused before sending (Broker: Message size too large)" in message
    assert "it and what follows unsent" in message and " not delivered: " not in message
