"""COUNT views on a node: one record per key holds its absolute count. A lower count than
the key's is a replay of at-least-once output and changes nothing (node.storage.changes)."""

from __future__ import annotations

from confluent_kafka import Message

from node.storage.changes import ChangeBatch, change_json
from node.storage.kinds.kind import StoredKind, entity_key
from node.storage.layout import Table
from node.storage.store import PartitionStore
from schema import View, decode_count

__all__ = ["COUNT"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        # a tombstone deletes the key (the pipeline does not write them today)
        batch.delete(view.name, entity_key(message))
        return
    batch.put_count(view.name, decode_count(value))


def _snapshot(store: PartitionStore, view: View, keys: list[str], at: int, now: int) -> list[bytes]:
    rows = store.get_many(view.name, keys)
    return [
        change_json(view.name, key, at, row, snapshot=True)
        for key, row in zip(keys, rows, strict=True)
    ]


COUNT = StoredKind(apply=_apply, snapshot=_snapshot, rows=Table.COUNT)
