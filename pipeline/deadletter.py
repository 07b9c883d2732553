"""The dead-letter record: why an input record was rejected and where it came from.

Written to `statefed.deadletter` with the original key; the value is JSON with the
reason, the source topic, partition and offset, the event time (null if missing) and the
original key and value in base64, so a record can be inspected or replayed.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pyarrow as pa

__all__ = ["DeadLetter", "dead_letters", "decode_dead_letter", "encode_dead_letter"]


@dataclass(frozen=True)
class DeadLetter:
    """One rejected input record."""

    reason: str
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def encode_dead_letter(letter: DeadLetter) -> bytes:
    return orjson.dumps(
        {
            "reason": letter.reason,
            "topic": letter.topic,
            "partition": letter.partition,
            "offset": letter.offset,
            "timestamp_ms": letter.timestamp_ms,
            "key_base64": _b64(letter.key),
            "value_base64": _b64(letter.value),
        }
    )


def decode_dead_letter(value: bytes) -> DeadLetter:
    try:
        doc = orjson.loads(value)
        return DeadLetter(
            reason=doc["reason"],
            topic=doc["topic"],
            partition=int(doc["partition"]),
            offset=int(doc["offset"]),
            timestamp_ms=doc["timestamp_ms"],
            key=_unb64(doc["key_base64"]),
            value=_unb64(doc["value_base64"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"undecodable dead-letter record {value[:200]!r}") from exc


def dead_letters(rows: pa.Table) -> Iterator[DeadLetter]:
    """The rejected rows of one micro-batch (columns of `records.rejected_records`)."""
    for row in rows.to_pylist():
        yield DeadLetter(
            reason=row["reason"],
            topic=row["topic"],
            partition=row["partition"],
            offset=row["offset"],
            timestamp_ms=row["timestamp_ms"],
            key=row["key"],
            value=row["value"],
        )
