"""The first message of a snapshot follow: the current rows of the asked keys, per view kind.

Rows and offsets are read from one pinned view of the store (`PartitionStore.pinned`), so
the snapshot holds exactly the records below the offsets the follow then continues from.
A snapshot change's `offset` is the applied offset of its view's topic. Count and latest
views give one row per key (null when the key has none); windowed views give each
unexpired window of a key (at = [start]), or one null change when it has none. History
views have no current row: a follow of them starts from offsets instead.

A snapshot of every key (`keys` None: the gateway holding a whole view) is of count, latest
and aggregate views only, and of at most `limit` rows: a partition holding more is refused
(`SnapshotTooLarge`) after reading `limit + 1` rows, never all of them, and one whose JSON
passes `WHOLE_MAX_BYTES` is refused too: the node builds it whole before sending it, in
frames of `feedsocket.SNAPSHOT_FRAME_ROWS` rows.
"""

from __future__ import annotations

from node.storage.changes import change_json
from node.storage.kinds import kind_of
from node.storage.layout import ScanSpan
from node.storage.store import PartitionStore
from schema import View

__all__ = [
    "WHOLE_MAX_BYTES",
    "SnapshotTooLarge",
    "has_snapshot",
    "has_whole_snapshot",
    "snapshot_changes",
]

WHOLE_MAX_BYTES = 48 << 20


class SnapshotTooLarge(ValueError):
    """A snapshot of every key would hold more rows than the follow's limit."""


def has_snapshot(view: View) -> bool:
    """Whether a follow of `view` can start from a snapshot of its current rows."""
    return kind_of(view).snapshot is not None


def has_whole_snapshot(view: View) -> bool:
    """Whether a follow of `view` can start from a snapshot of every key's row."""
    return kind_of(view).rows is not None


def snapshot_changes(
    store: PartitionStore, views: list[View], keys: list[str] | None, now_ms: int, limit: int = 0
) -> tuple[list[bytes], dict[str, int]]:
    """The current rows of `keys` (None: of every key, at most `limit` rows in all, else
    SnapshotTooLarge) in `views` as snapshot changes' JSON, and the store's offsets, from one
    point in time; every view must have such a snapshot (`has_snapshot`, `has_whole_snapshot`)."""
    with store.pinned() as pinned:
        offsets = pinned.offsets()
        docs: list[bytes] = []
        for view in views:
            at = offsets.get(view.changelog_topic, 0)
            if keys is None:
                docs.extend(_every_row(pinned, view, at, limit - len(docs)))
                continue
            read = kind_of(view).snapshot
            if read is None:
                raise ValueError(f"view {view.name}: a {view.kind.value} view has no snapshot")
            docs.extend(read(pinned, view, keys, at, now_ms))
    return docs, offsets


def _every_row(pinned: PartitionStore, view: View, at: int, limit: int) -> list[bytes]:
    table = kind_of(view).rows
    if table is None:
        raise ValueError(f"view {view.name}: a {view.kind.value} view has no row per key")
    rows = pinned.scan(view.name, table, ScanSpan(), limit + 1, horizon_ms=0)
    if len(rows) > limit:
        raise SnapshotTooLarge(f"more than {limit} rows of view {view.name}")
    docs = [change_json(view.name, row.key, at, row, snapshot=True) for _, row in rows]
    size = sum(map(len, docs))
    if size > WHOLE_MAX_BYTES:
        raise SnapshotTooLarge(
            f"{size} bytes of rows of view {view.name}, more than the {WHOLE_MAX_BYTES} a "
            "snapshot of every key may take"
        )
    return docs
