"""AGGREGATE views on a node: one record per key holds its row of results, stored as a
latest view's event (`pipeline.kinds.aggregate`), and ranked by each numeric result."""

from __future__ import annotations

from confluent_kafka import Message

from node.storage.changes import ChangeBatch
from node.storage.kinds.kind import StoredKind, entity_key
from node.storage.kinds.latest import LATEST
from schema import View, decode_event

__all__ = ["AGGREGATE"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        batch.delete_latest(view.name, entity_key(message), view.ranked_fields)
        return
    batch.put_latest(view.name, decode_event(value), view.ranked_fields)


AGGREGATE = StoredKind(apply=_apply, snapshot=LATEST.snapshot, rows=LATEST.rows)
