"""The dead-letter record: why an input record was rejected and where it came from.

Written to `statefed.deadletter` with the original key; the value is JSON with the
reason, the source topic, partition and offset, the event time (null if missing) and the
original key and value in base64, so a record can be inspected or replayed.

A dead letter must be small enough to produce whatever it rejects (a producer refuses a
record over its `message.max.bytes`, 1,000,000 by default, and the batch would fail on
every replay): it keeps the first `KEPT_BYTES` of the key and of the value, and the first
`KEPT_REASON_CHARS` of the reason, at most 0.4 MB in all. `key_size` and `value_size` give
the original sizes in bytes (null for a null key or value) and `truncated` says whether the
base64 holds only a prefix of either; records written before these fields held them whole.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pyarrow as pa

__all__ = [
    "KEPT_BYTES",
    "KEPT_REASON_CHARS",
    "DeadLetter",
    "bounded",
    "dead_letters",
    "decode_dead_letter",
    "encode_dead_letter",
]

KEPT_BYTES = 100_000  # of the key and of the value: 133,336 characters of base64 each
KEPT_REASON_CHARS = 2_000  # a reason may quote the key (schema.recordkeys)
_CUT = "..."


@dataclass(frozen=True)
class DeadLetter:
    """One rejected input record; `key_size` (`value_size`) is the original's size when
    `key` (`value`) holds only its first bytes, else None."""

    reason: str
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    key_size: int | None = None
    value_size: int | None = None

    @property
    def truncated(self) -> bool:
        """Whether the key or the value holds only a prefix of the original's."""
        return self.key_size is not None or self.value_size is not None


def _kept(data: bytes | None, size: int | None) -> tuple[bytes | None, int | None]:
    """`data` cut to `KEPT_BYTES`, and the original size when it is cut (or was)."""
    if data is None or len(data) <= KEPT_BYTES:
        return data, size
    return data[:KEPT_BYTES], len(data) if size is None else size


def bounded(letter: DeadLetter) -> DeadLetter:
    """`letter` as it is written: key and value cut to `KEPT_BYTES`, the reason to
    `KEPT_REASON_CHARS` (see the module's docs)."""
    key, key_size = _kept(letter.key, letter.key_size)
    value, value_size = _kept(letter.value, letter.value_size)
    reason = letter.reason
    if len(reason) > KEPT_REASON_CHARS:
        reason = reason[: KEPT_REASON_CHARS - len(_CUT)] + _CUT
    return dataclasses.replace(
        letter, reason=reason, key=key, key_size=key_size, value=value, value_size=value_size
    )


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _size(data: bytes | None, size: int | None) -> int | None:
    return None if data is None else len(data) if size is None else size


def encode_dead_letter(letter: DeadLetter) -> bytes:
    """The dead-letter record's value, `bounded`: produce it with `bounded(letter).key`."""
    letter = bounded(letter)
    return orjson.dumps(
        {
            "reason": letter.reason,
            "topic": letter.topic,
            "partition": letter.partition,
            "offset": letter.offset,
            "timestamp_ms": letter.timestamp_ms,
            "key_base64": _b64(letter.key),
            "value_base64": _b64(letter.value),
            "key_size": _size(letter.key, letter.key_size),
            "value_size": _size(letter.value, letter.value_size),
            "truncated": letter.truncated,
        }
    )


def _cut_size(data: bytes | None, size: object) -> int | None:
    """The original size when `data` holds less (None: whole, or a record without sizes)."""
    return int(size) if isinstance(size, int) and data is not None and size > len(data) else None


def decode_dead_letter(value: bytes) -> DeadLetter:
    try:
        doc = orjson.loads(value)
        key, data = _unb64(doc["key_base64"]), _unb64(doc["value_base64"])
        return DeadLetter(
            reason=doc["reason"],
            topic=doc["topic"],
            partition=int(doc["partition"]),
            offset=int(doc["offset"]),
            timestamp_ms=doc["timestamp_ms"],
            key=key,
            value=data,
            key_size=_cut_size(key, doc.get("key_size")),
            value_size=_cut_size(data, doc.get("value_size")),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"undecodable dead-letter record {value[:200]!r}") from exc


def dead_letters(rows: pa.Table) -> Iterator[DeadLetter]:
    """The rejected rows of one micro-batch (columns of `records.rejected_records`),
    `bounded` as they are written."""
    for row in rows.to_pylist():
        yield bounded(
            DeadLetter(
                reason=row["reason"],
                topic=row["topic"],
                partition=row["partition"],
                offset=row["offset"],
                timestamp_ms=row["timestamp_ms"],
                key=row["key"],
                value=row["value"],
            )
        )
