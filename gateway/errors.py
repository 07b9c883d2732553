"""The gateway's exceptions; each carries the GraphQL `extensions.code` it becomes.

```
GatewayError                        code
├── BadRequestError                 BAD_USER_INPUT      empty or too long key, too many keys,
│   │                                                   limit or first out of range, unaligned
│   │                                                   window, from after to, no UTC offset, bad
│   │                                                   cursor (also when the node rejects the
│   │                                                   arguments)
│   ├── BadRepresentationError                          an `_entities` representation names no
│   │                                                   entity type or lacks its key
│   └── TooManyRepresentationsError                     an `_entities` call carries more
│                                                       representations than the gateway takes
├── QueryLimitError                                     the document exceeds a configured limit
│   ├── QueryTooDeepError           QUERY_TOO_DEEP      fields nested deeper than max depth
│   ├── TooManyAliasesError         TOO_MANY_ALIASES
│   ├── TooManyRootFieldsError      TOO_MANY_ROOT_FIELDS
│   ├── QueryTooCostlyError         QUERY_TOO_COSTLY    partitions x limit, keys, first, ...
│   └── IntrospectionDisabledError  INTROSPECTION_DISABLED  __schema or __type, switched off
├── ForbiddenError                  FORBIDDEN           the principal lacks the scope a view, the
│                                                       produce mutation or node URLs need
├── ConsistencyTimeoutError         CONSISTENCY_TIMEOUT the pipeline had not processed the
│                                                       write of an `atLeast` token in time
├── ProduceError                    PRODUCE_FAILED      the produce mutation's write failed
│   └── ProduceDisabledError        PRODUCE_DISABLED    the mutation is switched off
└── RoutingError                    PARTITION_UNAVAILABLE (per partition that could not be read)
    ├── RoutingNotReadyError        ROUTING_NOT_READY   partition count not read from metadata yet
    ├── PartitionUnassignedError    no live node holds the partition ACTIVE
    ├── NodeUnavailableError        connection refused or reset, HTTP 5xx
    │   └── NodeTimeoutError        no answer before the request's deadline
    ├── NotOwnerError               the node says it does not hold the partition (NOT_OWNER)
    ├── NotCaughtUpError            CONSISTENCY_TIMEOUT the node had not applied what an
    │                                                   `atLeast` read waits for in time
    └── NodeProtocolError           the node answered something the protocol does not allow
```

Outside the tree, as they never become GraphQL errors of an executed request:
`gateway.auth.Unauthenticated` (no usable bearer token: an HTTP 401 before any GraphQL
work) and `gateway.keys.KeySetError` (token keys unreadable: start-up fails, a later
re-read keeps the keys held).

Messages name the view, key, partition and node. The conversion to GraphQL errors
happens in one place, `gateway.responses`. A node call's own failures
(`gateway.transport.NodeTransportError`) become NodeUnavailableError or NodeTimeoutError
in one place too, `gateway.upstream`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
    "BadRepresentationError",
    "BadRequestError",
    "ConsistencyTimeoutError",
    "ForbiddenError",
    "GatewayError",
    "IntrospectionDisabledError",
    "NodeProtocolError",
    "NodeTimeoutError",
    "NodeUnavailableError",
    "NotCaughtUpError",
    "NotOwnerError",
    "PartitionUnassignedError",
    "ProduceDisabledError",
    "ProduceError",
    "QueryLimitError",
    "QueryTooCostlyError",
    "QueryTooDeepError",
    "RoutingError",
    "RoutingNotReadyError",
    "TooManyAliasesError",
    "TooManyRepresentationsError",
    "TooManyRootFieldsError",
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


class BadRepresentationError(BadRequestError):
    """An `_entities` representation the gateway cannot resolve; the others still are."""

    def __init__(self, index: int, message: str, view: str | None = None) -> None:
        GatewayError.__init__(self, f"_entities representation {index}: {message}")
        self.view = view or ""
        self.index = index

    def extensions(self) -> dict[str, Any]:
        named = {"view": self.view} if self.view else {}
        return {"code": self.code, **named, "representation": self.index}


class TooManyRepresentationsError(BadRequestError):
    """An `_entities` call carries more representations than `limit`, set by the
    environment variable `variable`."""

    def __init__(self, actual: int, limit: int, variable: str) -> None:
        GatewayError.__init__(
            self,
            f"_entities got {actual} representations, at most {limit} per call (set by "
            f"{variable}): send them in several calls",
        )
        self.view = ""
        self.actual = actual
        self.limit = limit
        self.variable = variable

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code, "actual": self.actual, "limit": self.limit}


class QueryLimitError(GatewayError):
    """The document asks more than a configured limit allows: `actual` against `limit`, set
    by the environment variable `variable`."""

    def __init__(self, message: str, *, actual: int, limit: int, variable: str) -> None:
        super().__init__(f"{message} (set by {variable})")
        self.actual = actual
        self.limit = limit
        self.variable = variable

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code, "actual": self.actual, "limit": self.limit}


class QueryTooDeepError(QueryLimitError):
    code = "QUERY_TOO_DEEP"


class TooManyAliasesError(QueryLimitError):
    code = "TOO_MANY_ALIASES"


class TooManyRootFieldsError(QueryLimitError):
    code = "TOO_MANY_ROOT_FIELDS"


class QueryTooCostlyError(QueryLimitError):
    code = "QUERY_TOO_COSTLY"


class IntrospectionDisabledError(QueryLimitError):
    code = "INTROSPECTION_DISABLED"

    def __init__(self, variable: str) -> None:
        super().__init__(
            "introspection (__schema, __type) is turned off on this gateway; __typename works",
            actual=1,
            limit=0,
            variable=variable,
        )

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code}


class ForbiddenError(GatewayError):
    """The request's principal may not read or do `what`: it needs `scope`."""

    code = "FORBIDDEN"

    def __init__(self, what: str, scope: str, subject: str) -> None:
        super().__init__(f"{what} needs the scope {scope!r}, which {subject} does not have")
        self.scope = scope

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code, "scope": self.scope}


class ConsistencyTimeoutError(GatewayError):
    """The pipeline's status did not show the token's write processed before the deadline."""

    code = "CONSISTENCY_TIMEOUT"

    def __init__(self, view: str, token: str, processed: int | None) -> None:
        upto = "reported nothing" if processed is None else f"processed up to offset {processed}"
        super().__init__(
            f"view {view}: the write {token} was not processed by the pipeline before the "
            f"request's deadline (it {upto} of that partition); retry, or raise "
            "STATEFED_GATEWAY_TIMEOUT_MS"
        )
        self.view = view
        self.token = token

    def extensions(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "reason": "PIPELINE_BEHIND",
            "view": self.view,
            "token": self.token,
        }


class ProduceError(GatewayError):
    """The produce mutation could not write the event; the message says why."""

    code = "PRODUCE_FAILED"


class ProduceDisabledError(ProduceError):
    code = "PRODUCE_DISABLED"

    def __init__(self) -> None:
        super().__init__(
            "the produce mutation is switched off on this gateway (STATEFED_GATEWAY_PRODUCE)"
        )


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
    # the code of the per-partition error a response carries for it (gateway.responses)
    partition_code: ClassVar[str] = "PARTITION_UNAVAILABLE"

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


class NotCaughtUpError(RoutingError):
    """The node had not applied the changelog offsets an `atLeast` read waits for."""

    reason = "NODE_BEHIND"
    partition_code = "CONSISTENCY_TIMEOUT"


class NodeProtocolError(RoutingError):
    reason = "PROTOCOL_ERROR"
