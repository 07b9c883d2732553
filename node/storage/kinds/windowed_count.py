"""WINDOWED_COUNT views on a node: one record per (key, window); windows past the view's
retention expire. WINDOWED_AGGREGATE views' windows hold their results too, and are
ranked per window by each numeric one."""

from __future__ import annotations

from confluent_kafka import Message

from node.storage.changes import ChangeBatch, change_json
from node.storage.kinds.kind import StoredKind, record_key
from node.storage.retention import expiry_horizon
from node.storage.store import PartitionStore
from schema import View, decode_window

__all__ = ["WINDOWED_COUNT"]


def _apply(batch: ChangeBatch, view: View, message: Message) -> None:
    value = message.value()
    if value is None:
        key, start_ms = record_key(view, message, str, int)
        batch.delete_window(view.name, key, start_ms, view.ranked_fields)
        return
    batch.put_window(view.name, decode_window(value), view.ranked_fields)


def _expire(batch: ChangeBatch, view: View, now_ms: int) -> None:
    batch.expire_windows(view.name, expiry_horizon(view, now_ms))


def _snapshot(store: PartitionStore, view: View, keys: list[str], at: int, now: int) -> list[bytes]:
    horizon = expiry_horizon(view, now)
    docs: list[bytes] = []
    for key in keys:
        windows = store.windows(view.name, key, None, None, horizon)
        docs.extend(
            change_json(view.name, key, at, w, (w.start_ms,), snapshot=True) for w in windows
        )
        if not windows:
            docs.append(change_json(view.name, key, at, None, snapshot=True))
    return docs


WINDOWED_COUNT = StoredKind(apply=_apply, expire=_expire, snapshot=_snapshot)
