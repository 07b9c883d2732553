"""The first message of a snapshot follow: the current rows of the asked keys, per view kind.

Rows and offsets are read from one pinned view of the store (`PartitionStore.pinned`), so
the snapshot holds exactly the records below the offsets the follow then continues from.
A snapshot change's `offset` is the applied offset of its view's topic. Count and latest
views give one row per key (null when the key has none); windowed views give each
unexpired window of a key (at = [start]), or one null change when it has none. History
views have no current row: a follow of them starts from offsets instead.
"""

from __future__ import annotations

from node.storage.kinds import kind_of
from node.storage.store import PartitionStore
from schema import View

__all__ = ["has_snapshot", "snapshot_changes"]


def has_snapshot(view: View) -> bool:
    """Whether a follow of `view` can start from a snapshot of its current rows."""
    return kind_of(view).snapshot is not None


def snapshot_changes(
    store: PartitionStore, views: list[View], keys: list[str], now_ms: int
) -> tuple[list[bytes], dict[str, int]]:
    """The current rows of `keys` in `views` as snapshot changes' JSON, and the store's
    offsets, from one point in time; every view must have a snapshot (`has_snapshot`)."""
    with store.pinned() as pinned:
        offsets = pinned.offsets()
        docs = []
        for view in views:
            at = offsets.get(view.changelog_topic, 0)
            read = kind_of(view).snapshot
            if read is None:
                raise ValueError(f"view {view.name}: a {view.kind.value} view has no snapshot")
            docs.extend(read(pinned, view, keys, at, now_ms))
    return docs, offsets
