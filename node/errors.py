"""The node's exceptions, one tree.

```
NodeError                          anything the node raises on purpose
├── ConfigError (ValueError)       a STATEFED_* variable is invalid (runtime.config's)
├── TopologyError                  changelog topics missing or not co-partitioned
├── ReplayError                    the change feed cannot read a changelog back to where a
│                                  follow asked (records gone, broker silent)
├── QueryError                     a caller's request the node refuses (a GraphQL error)
│   ├── BadRequestError            BAD_USER_INPUT: empty key, limit out of range, ...
│   ├── BadRepresentationError     BAD_USER_INPUT: an `_entities` representation names no
│   │                              entity type or lacks its key
│   ├── NotOwnerError              NOT_OWNER: the key's partition is not held here
│   ├── NotCurrentError            NOT_OWNER: a read accepting no lag found a copy here
│   │                              that could not be proved current (node.reads.currency)
│   ├── NotCaughtUpError           NOT_CAUGHT_UP: a copy has not applied the offset a
│   │                              read-your-writes request waits for, within its wait
│   └── MalformedRequestError      BAD_REQUEST: the HTTP body is no GraphQL request
└── StoreError                     a partition store failed
    ├── StoreClosedError           used after close (or never opened)
    ├── SerializationError         a stored value cannot be decoded
    ├── StoreDamagedError          its files are damaged (removed, truncated, corrupt):
    │                              the node moves it aside and rebuilds the partition
    └── StoreWriteError            a write failed and wrote nothing; the node retries
        └── DiskFullError          ... because the disk is full
```

Messages name the view, key, partition and node they are about. `QueryError`s become
GraphQL errors with `extensions.code` in one place: `node.serve.graphql_http` (`error_extensions`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import runtime.config

__all__ = [
    "AWAITING_GROUP",
    "LEASE_LAPSED",
    "STORE_DAMAGED",
    "BadRepresentationError",
    "BadRequestError",
    "ConfigError",
    "DiskFullError",
    "MalformedRequestError",
    "NodeError",
    "NotCaughtUpError",
    "NotCurrentError",
    "NotOwnerError",
    "QueryError",
    "ReplayError",
    "SerializationError",
    "StoreClosedError",
    "StoreDamagedError",
    "StoreError",
    "StoreWriteError",
    "TopologyError",
]


class NodeError(Exception):
    """Base of every error the node raises on purpose."""


class ReplayError(NodeError):
    """The change feed could not read a changelog back to where a follow asked (e.g. its
    records are gone, or the broker does not answer): the follow ends with an error."""


class ConfigError(NodeError, runtime.config.ConfigError):
    """A configuration variable is invalid; the message starts with the variable's name."""


class TopologyError(NodeError):
    """The changelog topics cannot be served: missing, or with differing partition counts."""


class QueryError(NodeError):
    """A request the node refuses; carries the GraphQL error code and extensions."""

    code: ClassVar[str] = "BAD_USER_INPUT"

    def graphql_extensions(self) -> dict[str, Any]:
        return {"code": self.code}


class BadRequestError(QueryError):
    """Invalid arguments: an empty key, a limit or partition out of range."""

    def __init__(self, view: str, problem: str):
        super().__init__(f"view {view}: {problem}")
        self.view = view


class BadRepresentationError(QueryError):
    """A representation of `_entities` that names no entity type or lacks its key."""

    def __init__(self, index: int, problem: str):
        super().__init__(f"_entities representation {index}: {problem}")
        self.index = index


# NOT_OWNER's reason while the node's lease has lapsed (node.changelog.lease)
LEASE_LAPSED = "LEASE_LAPSED"
# NOT_OWNER's reason for a copy whose store a read found damaged, until it is rebuilt
STORE_DAMAGED = "STORE_DAMAGED"
# NOT_OWNER's reason for a copy held through a broker outage once the broker answers again,
# until the group assigns this node's partitions again (another node may own it already)
AWAITING_GROUP = "AWAITING_GROUP"


class NotOwnerError(QueryError):
    """The request reads a partition this node does not hold (any more, or not yet)."""

    code: ClassVar[str] = "NOT_OWNER"

    def __init__(
        self,
        view: str,
        partition: int,
        node: str,
        key: str | None = None,
        partitions: list[int] | None = None,
        reason: str | None = None,
    ):
        if key is None:
            what = f"partition {partition} is requested"
        else:
            what = f"key {key!r} is in partition {partition}"
        message = f"view {view}: {what}, which node {node} does not hold"
        if partitions is not None and len(partitions) > 1:
            message += f" (partitions not held: {partitions})"
        if reason == LEASE_LAPSED:
            message += (
                ": its lease lapsed (the node was paused or starved for longer than its term), "
                "so it serves no ACTIVE copy until the consumer group confirms its assignment"
            )
        elif reason == AWAITING_GROUP:
            message += (
                ": it was held through a broker outage, and the broker answers again; until "
                "the consumer group assigns the node's partitions again another node may own it"
            )
        elif reason == STORE_DAMAGED:
            message += (
                ": a read found its store damaged; the node sets it aside and rebuilds it "
                "from the changelog, and serves it again once restored"
            )
        super().__init__(message)
        self.view = view
        self.partition = partition
        self.node = node
        self.key = key
        self.partitions = partitions
        self.reason = reason

    def graphql_extensions(self) -> dict[str, Any]:
        extensions: dict[str, Any] = {
            "code": self.code,
            "view": self.view,
            "partition": self.partition,
            "node": self.node,
        }
        if self.partitions is not None:
            extensions["partitions"] = self.partitions
        if self.reason is not None:
            extensions["reason"] = self.reason
        return extensions


class NotCaughtUpError(QueryError):
    """A copy read by the request has not applied `wanted` (the next offset of `topic`)
    within the wait the request allowed."""

    code: ClassVar[str] = "NOT_CAUGHT_UP"

    def __init__(
        self, topic: str, partition: int, applied: int, wanted: int, node: str, wait_ms: int
    ):
        super().__init__(
            f"topic {topic} partition {partition} on node {node} has applied up to offset "
            f"{applied}, not {wanted} as asked, within {wait_ms} ms"
        )
        self.topic = topic
        self.partition = partition
        self.applied = applied
        self.wanted = wanted
        self.node = node

    def graphql_extensions(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "topic": self.topic,
            "partition": self.partition,
            "applied": self.applied,
            "wanted": self.wanted,
            "node": self.node,
        }


class NotCurrentError(QueryError):
    """Copies of `partitions` of `topic` could not be proved current for a read that
    accepts no lag; NOT_OWNER, so the caller asks another copy."""

    code: ClassVar[str] = "NOT_OWNER"

    def __init__(self, topic: str, partitions: list[int], node: str, why: str):
        super().__init__(
            f"topic {topic} partitions {partitions} on node {node}: the copy could not be "
            f"proved current: {why}"
        )
        self.topic = topic
        self.partitions = partitions
        self.node = node

    def graphql_extensions(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "reason": "NOT_CURRENT",
            "topic": self.topic,
            "partition": self.partitions[0],
            "partitions": self.partitions,
            "node": self.node,
        }


class MalformedRequestError(QueryError):
    """The HTTP request carries no GraphQL request: bad JSON, no query, wrong types."""

    code: ClassVar[str] = "BAD_REQUEST"


class StoreError(NodeError):
    """A partition store failed to open, read or write."""


class StoreClosedError(StoreError):
    """A partition store was used while closed."""


class SerializationError(StoreError):
    """A stored value cannot be decoded: the store is corrupt or from another format."""


class StoreDamagedError(StoreError):
    """A partition store's files are damaged: removed, truncated or corrupt. Its data
    cannot be trusted; the partition is rebuilt from the changelog."""


class StoreWriteError(StoreError):
    """A write to a partition store failed as a whole: nothing of the batch was stored."""


class DiskFullError(StoreWriteError):
    """A write failed because the disk of the partition store is full."""
