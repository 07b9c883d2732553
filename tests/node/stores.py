"""Every store backend the contract suites run against, as factories of store handles."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from node.storage.store import LevelDBStore, PartitionStore
from tests.node.memory_store import MemoryStore

StoreMaker = Callable[[], PartitionStore]
BACKENDS = ["leveldb", "memory"]


def store_maker(backend: str, directory: Path) -> StoreMaker:
    """A factory of stores that share one location: a new handle reopens the same data."""
    if backend == "leveldb":
        return lambda: LevelDBStore(directory / "partition-0", cache_mb=1)
    shared = MemoryStore()
    return lambda: shared
