"""LATEST views on a node: one record per key holds its newest event."""

from __future__ import annotations

from confluent_kafka import Message

from node.changes import ChangeBatch
from node.fields import latest_fields
from node.kinds.kind import NodeKind, entity_key
from schema import View, decode_event

__all__ = ["LATEST"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        batch.delete_latest(view.name, entity_key(message))
        return
    batch.put_latest(view.name, decode_event(value))


LATEST = NodeKind(apply=_apply, fields=latest_fields)
