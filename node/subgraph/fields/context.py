"""What one GraphQL request of the node sees: the held partitions, now, what it read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import strawberry

from node.changelog.partitions import PartitionRegistry
from node.errors import NotOwnerError
from node.storage.store import PartitionStore
from node.times import iso_ms
from runtime.clock import Clock, wall_clock_ms
from schema import PartitionStatus, Role, View

__all__ = ["ReadContext", "context_of"]

T = TypeVar("T")


@dataclass
class ReadContext:
    """One request's view of the node: where to read, the time of the request (one `now`
    for every read, so retention cuts the same everywhere) and what was read (freshness).
    `roles`: the copies it may read; STANDBY copies only when the caller asked for them.
    `proved`: per partition the offsets (per topic) its copy was proved current at
    (node.reads.currency); such a copy is read even while it restores. `positions`: per
    partition read, the next offset of the changelog of each view read there that its reads
    reflect (the freshness entry's `positions`, from which the gateway builds read tokens).
    `applied`: per partition read, the least offset of each of those changelogs its copy had
    applied at one of the reads: equal to the position when every read of it saw no batch
    being written, so its rows are exactly those of that position (the gateway's cache
    fills from such reads)."""

    registry: PartitionRegistry
    clock: Clock = wall_clock_ms
    roles: tuple[Role, ...] = (Role.ACTIVE,)
    proved: dict[int, dict[str, int]] = field(default_factory=dict)
    freshness: dict[int, PartitionStatus] = field(default_factory=dict)
    positions: dict[int, dict[str, int]] = field(default_factory=dict)
    applied: dict[int, dict[str, int]] = field(default_factory=dict)
    executed: bool = False
    _now_ms: int | None = field(default=None, init=False, repr=False)

    @property
    def node_id(self) -> str:
        return self.registry.node_id

    @property
    def now_ms(self) -> int:
        if self._now_ms is None:
            self._now_ms = self.clock()
        return self._now_ms

    def read(
        self, view: View, partition: int, reader: Callable[[PartitionStore], T], key: str | None
    ) -> T:
        """`reader(store)` on `partition`, or `NotOwnerError` naming `key` when not held."""
        result = self.try_read(view, partition, reader)
        if result is None:
            raise self.not_owner(view, partition, key=key)
        return result[0]

    def not_owner(
        self,
        view: View,
        partition: int,
        key: str | None = None,
        partitions: list[int] | None = None,
    ) -> NotOwnerError:
        """The NOT_OWNER of a read of `partition` this node refused, with the reason."""
        reason = self.registry.refusal_reason(partition)
        return NotOwnerError(view.name, partition, self.node_id, key, partitions, reason)

    def try_read(
        self, view: View, partition: int, reader: Callable[[PartitionStore], T]
    ) -> tuple[T] | None:
        """`(reader(store),)` of `view` on `partition`, or None when this node does not
        hold it."""
        result = self.registry.read_at(partition, reader, self.roles, self.proved.get(partition))
        if result is None:
            return None
        value, status, positions, applied = result
        self.freshness.setdefault(partition, status)
        # the position of the view's changelog only: the gateway's read token needs no other
        topic = view.changelog_topic
        seen = self.positions.setdefault(partition, {})
        seen[topic] = max(seen.get(topic, 0), positions.get(topic, 0))
        done = self.applied.setdefault(partition, {})
        done[topic] = min(done.get(topic, seen[topic]), applied.get(topic, 0))
        return (value,)

    def forget_reads(self) -> None:
        """Report nothing of the reads so far: their answer is dropped (a fast lookup that
        execution answers instead), and what execution reads is reported."""
        self.freshness.clear()
        self.positions.clear()
        self.applied.clear()

    def holds(self, partition: int) -> bool:
        """Whether this request may read `partition` here."""
        return self.registry.holds(partition, self.roles, self.proved.get(partition))

    def freshness_entries(self) -> list[dict[str, Any]]:
        """One entry per partition read; `lagUnknownSince` only while the lag is unknown
        (the broker does not answer): `lag` is then the last one known, as of that time."""
        return [
            _freshness(
                partition,
                self.node_id,
                s,
                self.positions.get(partition, {}),
                self.applied.get(partition, {}),
            )
            for partition, s in sorted(self.freshness.items())
        ]


def _freshness(
    partition: int,
    node_id: str,
    status: PartitionStatus,
    positions: dict[str, int],
    applied: dict[str, int],
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "partition": partition,
        "node": node_id,
        "role": status.role.value,
        "appliedOffset": status.applied_offset,
        "lag": status.lag,
        "positions": positions,
        "applied": applied,
    }
    if status.lag_unknown_since_ms is not None:
        entry["lagUnknownSince"] = iso_ms(status.lag_unknown_since_ms)
    return entry


def context_of(info: strawberry.Info) -> ReadContext:
    context = info.context
    assert isinstance(context, ReadContext), "execute the subgraph with a ReadContext"
    return context
