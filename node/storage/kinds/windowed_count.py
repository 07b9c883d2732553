"""WINDOWED_COUNT views on a node: one record per (key, window); windows past the view's
retention expire."""

from __future__ import annotations

from confluent_kafka import Message

from node.changes import ChangeBatch
from node.fields import windowed_fields
from node.kinds.kind import NodeKind, record_key
from node.retention import expiry_horizon
from schema import View, decode_window

__all__ = ["WINDOWED_COUNT"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        key, start_ms = record_key(view, message, str, int)
        batch.delete_window(view.name, key, start_ms)
        return
    batch.put_window(view.name, decode_window(value))


def _expire(batch: ChangeBatch, view: View, now_ms: int) -> None:
    batch.expire_windows(view.name, expiry_horizon(view, now_ms))


WINDOWED_COUNT = NodeKind(apply=_apply, fields=windowed_fields, expire=_expire)
