"""An in-memory PartitionStore: the reference model the store contract suite also runs on."""

from __future__ import annotations

from typing import Self

from node.errors import StoreClosedError
from node.store import ChangeBatch, PartitionStore
from schema import CountRow


class MemoryStore(PartitionStore):
    """Rows and offsets in dicts; they survive close() like files on disk would."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, CountRow]] = {}
        self._offsets: dict[str, int] = {}
        self._open = False

    def open(self) -> Self:
        self._open = True
        return self

    def close(self) -> None:
        self._open = False

    @property
    def closed(self) -> bool:
        return not self._open

    def _require_open(self) -> None:
        if not self._open:
            raise StoreClosedError("memory store is closed")

    def apply(self, batch: ChangeBatch) -> None:
        self._require_open()
        for (view, key), row in batch.counts.items():
            rows = self._rows.setdefault(view, {})
            if row is None:
                rows.pop(key, None)
            else:
                rows[key] = row
        self._offsets.update(batch.offsets)

    def get(self, view: str, key: str) -> CountRow | None:
        self._require_open()
        return self._rows.get(view, {}).get(key)

    def top(self, view: str, limit: int) -> list[CountRow]:
        self._require_open()
        ranked = sorted(self._rows.get(view, {}).values(), key=lambda r: (-r.count, r.key))
        return ranked[: max(limit, 0)]

    def offsets(self) -> dict[str, int]:
        self._require_open()
        return dict(self._offsets)
