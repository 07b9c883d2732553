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
├── ForbiddenError                  FORBIDDEN           the principal lacks the scope a view, the
│                                                       produce mutation or node URLs need
├── ConsistencyTimeoutError         CONSISTENCY_TIMEOUT the pipeline had not processed the
│                                                       write of an `atLeast` token in time
├── ProduceError                    PRODUCE_FAILED      the produce mutation's write failed
│   ├── ProduceDisabledError        PRODUCE_DISABLED    the mutation is switched off
│   └── RateLimitedError            RATE_LIMITED        the principal produced more records
│                                                       per second than allowed
├── SlowSubscriberError             SUBSCRIBER_TOO_SLOW more history events waited for one
│                                                       subscriber than it may hold (it
│                                                       resumes with its token)
├── SubscriptionsOffError           SUBSCRIPTIONS_UNAVAILABLE the gateway follows no node feeds
│                                                       (shutting down, or built without)
└── RoutingError                    PARTITION_UNAVAILABLE (per partition that could not be read)
    ├── RoutingNotReadyError        ROUTING_NOT_READY   partition count not read from metadata yet
    ├── PartitionUnassignedError    no live node holds the partition ACTIVE; names the node
    │                               that last did and when
    ├── PartitionNeverAssignedError no node has held it ACTIVE in the membership read so far
    ├── NodeUnavailableError        connection refused or reset, HTTP 5xx
    │   ├── NodeTimeoutError        no answer before the request's deadline
    │   └── NodeSuspectError        not asked: the node missed heartbeats or left calls
    │                               unanswered (gateway.nodes.hedging), and no standby is in maxLag
    ├── NotOwnerError               the node says it does not hold the partition (NOT_OWNER)
    ├── NotCaughtUpError            CONSISTENCY_TIMEOUT the node had not applied what an
    │                                                   `atLeast` read waits for in time
    └── NodeProtocolError           the node answered something the protocol does not allow
```

The query limits' errors (QueryTooDeepError, TooManyAliasesError, TooManyRootFieldsError,
QueryTooCostlyError, IntrospectionDisabledError under QueryLimitError) are the shared ones
of `runtime.graphql_http.limits`, re-exported here; the shared layer gives them their codes.

Outside the tree, as they never become GraphQL errors of an executed request:
`gateway.auth.bearer.Unauthenticated` (no usable bearer token: an HTTP 401 before any GraphQL
work) and `gateway.auth.keys.KeySetError` (token keys unreadable: start-up fails, a later
re-read keeps the keys held).

Every error of a partition says why with a `Reason` (`extensions.reason`): the one list of
reasons, each documented in docs/troubleshooting.md.

Messages name the view, key, partition and node (by id: node URLs and the text of lower
layers' exceptions go to the log, never to a client). The conversion to GraphQL errors
happens in one place, `gateway.api.responses`. A node call's own failures
(`gateway.nodes.transport.NodeTransportError`) become NodeUnavailableError or NodeTimeoutError
in one place too, `gateway.nodes.upstream`.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, ClassVar

from gateway.model.timestamps import iso_ms
from runtime.graphql_http.limits import (
    IntrospectionDisabledError,
    QueryLimitError,
    QueryTooCostlyError,
    QueryTooDeepError,
    TooManyAliasesError,
    TooManyRootFieldsError,
)

__all__ = [
    "BadRepresentationError",
    "BadRequestError",
    "ConsistencyTimeoutError",
    "ForbiddenError",
    "GatewayError",
    "IntrospectionDisabledError",
    "NodeProtocolError",
    "NodeSuspectError",
    "NodeTimeoutError",
    "NodeUnavailableError",
    "NotCaughtUpError",
    "NotOwnerError",
    "PartitionNeverAssignedError",
    "PartitionUnassignedError",
    "ProduceDisabledError",
    "ProduceError",
    "QueryLimitError",
    "QueryTooCostlyError",
    "QueryTooDeepError",
    "RateLimitedError",
    "Reason",
    "RoutingError",
    "RoutingNotReadyError",
    "SlowSubscriberError",
    "SubscriptionsOffError",
    "TooManyAliasesError",
    "TooManyRepresentationsError",
    "TooManyRootFieldsError",
]


class Reason(StrEnum):
    """Why a read could not be answered (`extensions.reason`): the documented list
    (docs/troubleshooting.md); every routing and consistency error carries one of these."""

    UNASSIGNED = "UNASSIGNED"  # no live ACTIVE copy; `node` is the last one seen serving it
    NEVER_ASSIGNED = "NEVER_ASSIGNED"  # no node seen serving it since the gateway started
    NODE_UNAVAILABLE = "NODE_UNAVAILABLE"  # connection refused or reset, HTTP 5xx
    TIMEOUT = "TIMEOUT"  # the node did not answer before the request's deadline
    SUSPECT = "SUSPECT"  # the node missed heartbeats or calls; no standby within maxLag
    NOT_OWNER = "NOT_OWNER"  # the node disclaimed the partition and nobody else holds it
    PROTOCOL_ERROR = "PROTOCOL_ERROR"  # the node answered what the protocol does not allow
    NODE_BEHIND = "NODE_BEHIND"  # CONSISTENCY_TIMEOUT: the copy had not applied the token
    PIPELINE_BEHIND = "PIPELINE_BEHIND"  # CONSISTENCY_TIMEOUT: the write not processed yet
    ROUTING_NOT_READY = "ROUTING_NOT_READY"  # the partition count is not known yet


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
            "reason": Reason.PIPELINE_BEHIND.value,
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
            "the produce mutation is switched off on this gateway (STATEFED_GATEWAY_PRODUCE "
            "is false, the default): set STATEFED_GATEWAY_PRODUCE=true to write through it"
        )


class RateLimitedError(ProduceError):
    """`subject` asked for more than `rate` records a second (set by `variable`); a token
    frees up after `retry_after_ms`."""

    code = "RATE_LIMITED"

    def __init__(self, subject: str, rate: int, retry_after_ms: int, variable: str) -> None:
        super().__init__(
            f"principal {subject!r} produces more than {rate} records per second (set by "
            f"{variable}): retry in {retry_after_ms} ms"
        )
        self.rate = rate
        self.retry_after_ms = retry_after_ms

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code, "limit": self.rate, "retryAfterMs": self.retry_after_ms}


class SlowSubscriberError(GatewayError):
    """A subscriber took its updates too slowly for every one to be kept (`bound`)."""

    code = "SUBSCRIBER_TOO_SLOW"

    def __init__(self, view: str, bound: int, variable: str) -> None:
        super().__init__(
            f"view {view}: more than {bound} updates were waiting for this subscription (set by "
            f"{variable}); subscribe again with `after` set to the token of the last update you "
            "received to get the rest"
        )
        self.view = view

    def extensions(self) -> dict[str, Any]:
        return {"code": self.code, "view": self.view}


class SubscriptionsOffError(GatewayError):
    """The gateway serves no subscriptions: built without a feed hub, or shutting down."""

    code = "SUBSCRIPTIONS_UNAVAILABLE"


def _keys_text(keys: Sequence[str]) -> str:
    if not keys:
        return ""
    shown = ", ".join(repr(k) for k in keys[:3])
    more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
    return f" (keys {shown}{more})"


class RoutingError(GatewayError):
    """Some partitions of a view could not be read: `node` is the node asked, or (when
    `node_was_asked` is False) the one last known to hold them."""

    code = "PARTITION_UNAVAILABLE"
    reason: ClassVar[Reason]
    # the code of the per-partition error a response carries for it (gateway.api.responses)
    partition_code: ClassVar[str] = "PARTITION_UNAVAILABLE"
    node_was_asked: ClassVar[bool] = True

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
            on = f" on node {node}" if node and self.node_was_asked else ""
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
            "reason": self.reason.value,
            "view": self.view,
            "partitions": list(self.partitions),
            "node": self.node,
        }

    def partition_extensions(self, partition: int) -> dict[str, Any]:
        """The extensions of the error of one of its partitions (gateway.api.responses)."""
        return {
            "code": self.partition_code,
            "reason": self.reason.value,
            "view": self.view,
            "partition": partition,
            "node": self.node,
        }


class RoutingNotReadyError(RoutingError):
    """The partition count of the view's changelog topic is not known yet."""

    code = "ROUTING_NOT_READY"
    reason = Reason.ROUTING_NOT_READY

    def __init__(self, view: str, topic: str) -> None:
        super().__init__(
            view,
            f"the partition count of topic {topic} has not been read from the broker yet "
            "(is the topic created and the broker reachable?)",
        )


class PartitionUnassignedError(RoutingError):
    """No live node holds `partitions` ACTIVE; `node` did last, as its membership record
    of `last_seen_ms` (its own clock, ms since the epoch) said."""

    reason = Reason.UNASSIGNED
    node_was_asked = False

    def __init__(
        self,
        view: str,
        partitions: Sequence[int],
        keys: Sequence[str] = (),
        *,
        node: str,
        last_seen_ms: int,
    ) -> None:
        super().__init__(
            view,
            f"no live node holds it; node {node} last did (as of {iso_ms(last_seen_ms)}) "
            "and is gone or gave it up, and no node has taken it over yet: retry once the "
            "consumer group has moved it, or allow a standby copy with maxLag > 0",
            partitions=partitions,
            node=node,
            keys=keys,
        )
        self.last_seen_ms = last_seen_ms

    def extensions(self) -> dict[str, Any]:
        return {**super().extensions(), "lastSeen": iso_ms(self.last_seen_ms)}

    def partition_extensions(self, partition: int) -> dict[str, Any]:
        last_seen = iso_ms(self.last_seen_ms)
        return {**super().partition_extensions(partition), "lastSeen": last_seen}


class PartitionNeverAssignedError(RoutingError):
    """No node has held `partitions` ACTIVE in the membership the gateway has read."""

    reason = Reason.NEVER_ASSIGNED
    node_was_asked = False

    def __init__(self, view: str, partitions: Sequence[int], keys: Sequence[str] = ()) -> None:
        super().__init__(
            view,
            "no node has held it since the gateway started reading membership: are the "
            "nodes running, RUNNING, and in one consumer group for this view's changelog?",
            partitions=partitions,
            keys=keys,
        )


class NodeUnavailableError(RoutingError):
    reason = Reason.NODE_UNAVAILABLE


class NodeTimeoutError(NodeUnavailableError):
    reason = Reason.TIMEOUT


class NodeSuspectError(NodeUnavailableError):
    """`node` is suspect (gateway.nodes.hedging) and no standby copy within `max_lag` holds
    `partitions`: they fail at once instead of waiting out the deadline."""

    reason = Reason.SUSPECT

    def __init__(
        self, view: str, node: str, partitions: Sequence[int], keys: Sequence[str], max_lag: int
    ) -> None:
        super().__init__(
            view,
            "not asked: the node missed heartbeats or left calls without an answer, and no "
            f"standby copy is within maxLag {max_lag}; retry, or allow a larger maxLag",
            partitions=partitions,
            node=node,
            keys=keys,
        )


class NotOwnerError(RoutingError):
    """The node disclaimed `partitions` (a rebalance moved them); the routing table is stale."""

    reason = Reason.NOT_OWNER


class NotCaughtUpError(RoutingError):
    """The node had not applied the changelog offsets an `atLeast` read waits for."""

    reason = Reason.NODE_BEHIND
    partition_code = "CONSISTENCY_TIMEOUT"


class NodeProtocolError(RoutingError):
    reason = Reason.PROTOCOL_ERROR
