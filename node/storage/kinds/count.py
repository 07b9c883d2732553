"""COUNT views on a node: one record per key holds its count."""

from __future__ import annotations

from confluent_kafka import Message

from node.changes import ChangeBatch
from node.fields import count_fields
from node.kinds.kind import NodeKind, entity_key
from schema import View, decode_count

__all__ = ["COUNT"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        # a tombstone deletes the key (the pipeline does not write them today)
        batch.delete(view.name, entity_key(message))
        return
    batch.put_count(view.name, decode_count(value))


COUNT = NodeKind(apply=_apply, fields=count_fields)
