"""HISTORY views on a node: one record per event, keyed (key, event_ms, source partition,
source offset)."""

from __future__ import annotations

from confluent_kafka import Message

from node.storage.changes import ChangeBatch
from node.storage.kinds.kind import StoredKind, record_key
from schema import View, decode_event

__all__ = ["HISTORY"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        key, event_ms, partition, offset = record_key(view, message, str, int, int, int)
        batch.delete_event(view.name, key, (event_ms, partition, offset))
        return
    batch.put_event(view.name, decode_event(value))


HISTORY = StoredKind(apply=_apply)
