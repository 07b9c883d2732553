"""A read that finds a store damaged (issue #26: it was an internal error): the node refuses
the copy with NOT_OWNER and reason STORE_DAMAGED, so the gateway reads another copy, and
its holder takes it to set it aside and rebuild it from the changelog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import plyvel
import pytest

from node.changelog.partitions import PartitionRegistry
from node.errors import STORE_DAMAGED
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.changes import ChangeBatch
from node.storage.store import LevelDBStore
from node.subgraph.schema import build_subgraph
from schema import WORD_COUNTS, CountRow, Role, partition_for

P = 2
TOPIC = WORD_COUNTS.changelog_topic
WORD = next(f"w{i}" for i in range(100) if partition_for(f"w{i}", P) == 0)
POINT = "query($w: String!) { wordCount(word: $w) { count } }"


class RottenStore(LevelDBStore):
    """A store whose reads meet a bad block once `rotten` is set."""

    rotten = False

    def get_many(self, view: str, keys: list[str]) -> list[CountRow | None]:
        if self.rotten:
            raise plyvel.CorruptionError(b"Corruption: block checksum mismatch (injected)")
        return super().get_many(view, keys)

    def get(self, view: str, key: str) -> CountRow | None:
        if self.rotten:
            raise plyvel.CorruptionError(b"Corruption: block checksum mismatch (injected)")
        return super().get(view, key)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[PartitionRegistry, RottenStore]]:
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({TOPIC: P})
    store = RottenStore(tmp_path / "partition-0").open()
    batch = ChangeBatch(offsets={TOPIC: 3})
    batch.put_count(WORD_COUNTS.name, CountRow(WORD, 3, 0))
    store.apply(batch)
    registry.attach(0, store, Role.ACTIVE, store.offsets())
    yield registry, store
    store.close()


def test_a_damaged_store_found_by_a_read_is_refused_and_handed_to_its_holder(
    held: tuple[PartitionRegistry, RottenStore],
) -> None:
    registry, store = held
    endpoint = GraphQLEndpoint(build_subgraph((WORD_COUNTS,)), registry)
    assert endpoint.execute(POINT, {"w": WORD})["data"] == {"wordCount": {"count": 3}}

    store.rotten = True
    refused = endpoint.execute(POINT, {"w": WORD})
    (error,) = refused["errors"]
    assert error["extensions"]["code"] == "NOT_OWNER", refused
    assert error["extensions"]["reason"] == STORE_DAMAGED
    assert "rebuilds it from the changelog" in error["message"]
    # refused from now on, without touching the store again, until it is rebuilt
    store.rotten = False
    assert endpoint.execute(POINT, {"w": WORD})["errors"][0]["extensions"]["code"] == "NOT_OWNER"
    assert registry.take_damaged([1]) == {}, "only its holder's partitions are handed over"
    (why,) = registry.take_damaged([0, 1]).values()
    assert "block checksum mismatch" in why
    assert registry.take_damaged([0]) == {}, "handed over once"

    registry.restart_restore(0, {})  # the holder set it aside and restored it again
    registry.record_applied(0, {TOPIC: 3})
    registry.record_restore(0, 3, 3, restoring=False)
    assert endpoint.execute(POINT, {"w": WORD})["data"] == {"wordCount": {"count": 3}}
