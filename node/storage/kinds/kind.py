"""How a view kind is stored on a node, and how its changelog record keys are read."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message

from node.storage.changes import ChangeBatch
from node.storage.layout import Table
from node.storage.store import PartitionStore
from schema import View, unpack

__all__ = ["Applier", "SnapshotReader", "StoredKind", "entity_key", "record_key"]

# one changelog record of a view into store changes; ValueError or SerializationError
# when the record cannot be read (the materializer skips it)
Applier = Callable[[ChangeBatch, View, Message], None]
# (store, view, keys, applied offset of the view's topic, now ms) -> snapshot changes' JSON
SnapshotReader = Callable[[PartitionStore, View, list[str], int, int], list[bytes]]


@dataclass(frozen=True)
class StoredKind:
    """A kind in a node's store: `apply` stores one changelog record; `expire`, for kinds
    whose rows expire, adds to a batch the removal of what is past the view's retention at
    `now_ms` (with every batch and sweep); `snapshot`, for kinds with a current row per key,
    reads the first message of a snapshot follow (`node.replication.feedsnapshot`); `rows`,
    for kinds with one row per key in one table, is that table (a snapshot of every key
    walks it)."""

    apply: Applier
    expire: Callable[[ChangeBatch, View, int], None] | None = None
    snapshot: SnapshotReader | None = None
    rows: Table | None = None


def entity_key(message: Message) -> str:
    """The record key as the entity key (count and latest records)."""
    return (message.key() or b"").decode("utf-8")


def record_key(view: View, message: Message, *types: type) -> tuple[Any, ...]:
    """The parts of a packed record key (e.g. (key, window start)), checked against `types`."""
    try:
        parts = unpack(message.key() or b"")
    except struct.error as exc:  # a truncated integer; every other defect is a ValueError
        raise ValueError(f"view {view.name}: record key {message.key()!r} is cut short") from exc
    if len(parts) != len(types) or not all(
        isinstance(part, t) for part, t in zip(parts, types, strict=True)
    ):
        raise ValueError(f"view {view.name}: record key {message.key()!r} is not {types}")
    return parts
