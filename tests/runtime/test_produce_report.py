"""What `produce_records` says when some records are not delivered: how many were, so
that a person knows what to produce again (over a stand-in for the producer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError

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
    """Delivers every record but those whose key is in `refused`, at flush."""

    def __init__(self, refused: set[bytes]) -> None:
        self.refused = refused
        self.reports: list[tuple[bytes, Callable[..., None]]] = []

    def produce(self, topic: str, key: bytes, on_delivery: Callable[..., None], **_: Any) -> None:
        self.reports.append((key, on_delivery))

    def flush(self, timeout: float) -> int:
        for offset, (key, report) in enumerate(self.reports):
            refused = key in self.refused
            report(
                KafkaError(KafkaError.MSG_SIZE_TOO_LARGE) if refused else None, _Sent(key, offset)
            )
        return 0


def test_a_failed_produce_says_how_many_records_were_delivered() -> None:
    records = [Record(key, b"{}") for key in ("a", "b", "c")]
    with pytest.raises(
        ProduceError, match=r": 2 records delivered, 0 undelivered after 30 s, 1 failed"
    ):
        produce_records("127.0.0.1:1", "words", records, _Producer({b"b"}))  # type: ignore[arg-type]
