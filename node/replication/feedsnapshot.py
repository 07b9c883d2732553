"""The first message of a snapshot follow: the current rows of the asked keys, per view kind.

Rows and offsets are read from one pinned view of the store (`PartitionStore.pinned`), so
the snapshot holds exactly the records below the offsets the follow then continues from.
A snapshot change's `offset` is the applied offset of its view's topic. Count and latest
views give one row per key (null when the key has none); windowed views give each
unexpired window of a key (at = [start]), or one null change when it has none. History
views have no current row: a follow of them starts from offsets instead.
"""

from __future__ import annotations

from collections.abc import Callable

from node.changes import change_json
from node.retention import expiry_horizon
from node.store import PartitionStore
from schema import View, ViewKind

__all__ = ["SNAPSHOT_KINDS", "snapshot_changes"]

# (store, view, keys, applied offset of the view's topic, now ms) -> snapshot changes' JSON
_Reader = Callable[[PartitionStore, View, list[str], int, int], list[bytes]]


def _counts(store: PartitionStore, view: View, keys: list[str], at: int, now: int) -> list[bytes]:
    rows = store.get_many(view.name, keys)
    return [
        change_json(view.name, key, at, row, snapshot=True)
        for key, row in zip(keys, rows, strict=True)
    ]


def _latest(store: PartitionStore, view: View, keys: list[str], at: int, now: int) -> list[bytes]:
    rows = store.latest_many(view.name, keys)
    return [
        change_json(view.name, key, at, row, snapshot=True)
        for key, row in zip(keys, rows, strict=True)
    ]


def _windows(store: PartitionStore, view: View, keys: list[str], at: int, now: int) -> list[bytes]:
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


SNAPSHOT_KINDS: dict[ViewKind, _Reader] = {
    ViewKind.COUNT: _counts,
    ViewKind.LATEST: _latest,
    ViewKind.WINDOWED_COUNT: _windows,
}


def snapshot_changes(
    store: PartitionStore, views: list[View], keys: list[str], now_ms: int
) -> tuple[list[bytes], dict[str, int]]:
    """The current rows of `keys` in `views` as snapshot changes' JSON, and the store's
    offsets, from one point in time; every view must be of a kind in SNAPSHOT_KINDS."""
    with store.pinned() as pinned:
        offsets = pinned.offsets()
        docs = []
        for view in views:
            at = offsets.get(view.changelog_topic, 0)
            docs.extend(SNAPSHOT_KINDS[view.kind](pinned, view, keys, at, now_ms))
    return docs, offsets
