"""The gateway's exceptions; each carries the GraphQL `extensions.code` it becomes.

```
GatewayError                        code
├── BadRequestError                 BAD_USER_INPUT      empty key, too many keys, limit or first
│                                                       out of range, unaligned window, from after
│                                                       to, no UTC offset, bad cursor (also when
│                                                       the node rejects the arguments)
└── RoutingError                    PARTITION_UNAVAILABLE (per partition that could not be read)
    ├── RoutingNotReadyError        ROUTING_NOT_READY   partition count not read from metadata yet
    ├── PartitionUnassignedError    no live node holds the partition ACTIVE
    ├── NodeUnavailableError        connection refused or reset, HTTP 5xx
    │   └── NodeTimeoutError        no answer before the request's deadline
    ├── NotOwnerError               the node says it does not hold the partition (NOT_OWNER)
    └── NodeProtocolError           the node answered something the protocol does not allow
```

Messages name the view, key, partition and node. The conversion to GraphQL errors
happens in one place, `gateway.responses`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
    "BadRequestError",
    "GatewayError",
    "NodeProtocolError",
    "NodeTimeoutError",
    "NodeUnavailableError",
    "NotOwnerError",
    "PartitionUnassignedError",
    "RoutingError",
    "RoutingNotReadyError",
]


class GatewayError(Exception):
    """Base of every error the gateway reports to a client."""

    code: ClassVar[str] = "INTERNAL_SERVER_ERROR"

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code}


class BadRequestError(GatewayError):
    """The query's arguments are outside what the view accepts."""

    code = "BAD_USER_INPUT"

    def __init__(self, view: str, message: str) -> None:
        super().__init__(f"view {view}: {message}")
        self.view = view

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code, "view": self.view}


def _keys_text(keys: Sequence[str]) -> str:
    if not keys:
        return ""
    shown = ", ".join(repr(k) for k in keys[:3])
    more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
    return f" (keys {shown}{more})"


class RoutingError(GatewayError):
    """Some partitions of a view could not be read from the node that should hold them."""

    code = "PARTITION_UNAVAILABLE"
    reason: ClassVar[str] = "UNAVAILABLE"

    def __init__(
        self,
        view: str,
        detail: str,
        *,
        partitions: Sequence[int] = (),
        node: str | None = None,
        keys: Sequence[str] = (),
    ) -> None:
        where = ""
        if partitions:
            on = f" on node {node}" if node else ""
            numbers = ", ".join(str(p) for p in partitions)
            where = f"partition {numbers}{_keys_text(keys)}{on}: "
        super().__init__(f"view {view}: {where}{detail}")
        self.view = view
        self.detail = detail
        self.partitions = tuple(partitions)
        self.node = node
        self.keys = tuple(keys)

    def extensions(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "reason": self.reason,
            "view": self.view,
            "partitions": list(self.partitions),
            "node": self.node,
        }


class RoutingNotReadyError(RoutingError):
    """The partition count of the view's changelog topic is not known yet."""

    code = "ROUTING_NOT_READY"
    reason = "ROUTING_NOT_READY"

    def __init__(self, view: str, topic: str) -> None:
        super().__init__(
            view,
            f"the partition count of topic {topic} has not been read from the broker yet "
            "(is the topic created and the broker reachable?)",
        )


class PartitionUnassignedError(RoutingError):
    reason = "UNASSIGNED"

    def __init__(self, view: str, partitions: Sequence[int], keys: Sequence[str] = ()) -> None:
        super().__init__(view, "no live node holds it", partitions=partitions, keys=keys)


class NodeUnavailableError(RoutingError):
    reason = "NODE_UNAVAILABLE"


class NodeTimeoutError(NodeUnavailableError):
    reason = "TIMEOUT"


class NotOwnerError(RoutingError):
    """The node disclaimed `partitions` (a rebalance moved them); the routing table is stale."""

    reason = "NOT_OWNER"


class NodeProtocolError(RoutingError):
    reason = "PROTOCOL_ERROR"
