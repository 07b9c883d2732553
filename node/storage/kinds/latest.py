"""LATEST views on a node: one record per key holds its newest event."""

from __future__ import annotations

from confluent_kafka import Message

from node.storage.changes import ChangeBatch, change_json
from node.storage.kinds.kind import StoredKind, entity_key
from node.storage.layout import Table
from node.storage.store import PartitionStore
from schema import View, decode_event

__all__ = ["LATEST"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        batch.delete_latest(view.name, entity_key(message))
        return
    batch.put_latest(view.name, decode_event(value))


def _snapshot(store: PartitionStore, view: View, keys: list[str], at: int, now: int) -> list[bytes]:
    rows = store.latest_many(view.name, keys)
    return [
        change_json(view.name, key, at, row, snapshot=True)
        for key, row in zip(keys, rows, strict=True)
    ]


LATEST = StoredKind(apply=_apply, snapshot=_snapshot, rows=Table.LATEST)
