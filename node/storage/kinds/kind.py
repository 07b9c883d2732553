"""What a view kind provides on a node, and how its changelog record keys are read."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message

from node.changes import ChangeBatch
from node.fields import ViewFields
from schema import View, unpack

__all__ = ["Applier", "NodeKind", "entity_key", "record_key"]

# one changelog record of a view into store changes; ValueError or SerializationError
# when the record cannot be read (the materializer skips it)
Applier = Callable[[ChangeBatch, View, Message], None]


@dataclass(frozen=True)
class NodeKind:
    """A kind on a node: `apply` stores one changelog record, `fields` builds the view's
    subgraph fields, and `expire`, for kinds whose rows expire, adds to a batch the removal
    of what is past the view's retention at `now_ms` (with every batch and sweep)."""

    apply: Applier
    fields: Callable[[View], ViewFields]
    expire: Callable[[ChangeBatch, View, int], None] | None = None


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
