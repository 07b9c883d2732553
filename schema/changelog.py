"""The changelog record: what the pipeline writes and the nodes materialize.

Topic `statefed.<view>.changelog`, same partition count as the view's input topic, key =
UTF-8 entity key, explicit partition = `partition_for(key, P)`, value = JSON of the FULL
current aggregate (never a delta), so replaying a record is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

__all__ = ["DEADLETTER_TOPIC", "CountRow", "decode_count", "encode_count"]

DEADLETTER_TOPIC = "statefed.deadletter"


@dataclass(frozen=True)
class CountRow:
    """Events seen for one key, and the newest event time among them (ms since epoch)."""

    key: str
    count: int
    last_event_ms: int


def encode_count(row: CountRow) -> bytes:
    return orjson.dumps({"key": row.key, "count": row.count, "last_event_ms": row.last_event_ms})


def decode_count(value: bytes) -> CountRow:
    try:
        doc = orjson.loads(value)
        return CountRow(
            key=doc["key"], count=int(doc["count"]), last_event_ms=int(doc["last_event_ms"])
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"undecodable count changelog value {value[:200]!r}") from exc
