"""What one node call amounts to: the aliased field `r` and its freshness, or a gateway error
that names the view, node, partitions and keys the call was for.

The one place in the gateway where a node call's failure becomes an error: no connection or
a broken one (`transport_failure`), no answer by the deadline (`past_deadline`), an HTTP
status, a body or GraphQL errors (`decode_reply`), data the gateway cannot read
(`read_answer`, `other_partitions`), and one waiter's share of a shared call's failure
(`for_waiter`). The planner then decides what to retry from the error's class."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from gateway.model.errors import (
    BadRequestError,
    NodeProtocolError,
    NodeTimeoutError,
    NodeUnavailableError,
    NotCaughtUpError,
    NotOwnerError,
)
from gateway.nodes.transport import NodeTransportError

__all__ = [
    "NodeReply",
    "decode_reply",
    "for_waiter",
    "other_partitions",
    "past_deadline",
    "read_answer",
    "refused_follow",
    "transport_failure",
]

T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeReply:
    """The aliased field `r` of a node's answer, and the freshness entries it carried."""

    data: Any
    freshness: list[dict[str, Any]]


def decode_reply(status: int, content: bytes, view: str, where: dict[str, Any]) -> NodeReply:
    """The node's answer to one call, or the gateway error it amounts to."""
    if status >= 500:
        raise NodeUnavailableError(view, f"HTTP {status}", **where)
    # what the node answered goes to the operator's log, not into the client's error
    if status != 200:
        log.warning("node %s answered HTTP %s: %r", where["node"], status, content[:200])
        raise NodeProtocolError(view, f"HTTP {status}", **where)
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        log.warning("node %s answered no JSON (%s): %r", where["node"], exc, content[:200])
        raise NodeProtocolError(view, "answer is not JSON", **where) from exc
    if not isinstance(doc, dict):
        raise NodeProtocolError(view, "answer is not a JSON object", **where)
    if doc.get("errors"):
        raise _node_error(doc["errors"], view, where)
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("r") is None:
        raise NodeProtocolError(view, "answer has no data and no errors", **where)
    extensions = doc.get("extensions")
    freshness = extensions.get("freshness") if isinstance(extensions, dict) else None
    entries = [e for e in freshness if isinstance(e, dict)] if isinstance(freshness, list) else []
    return NodeReply(data=data["r"], freshness=entries)


def _node_error(errors: Any, view: str, where: dict[str, Any]) -> Exception:
    first = errors[0] if isinstance(errors, list) and isinstance(errors[0], dict) else {}
    message = str(first.get("message", errors))[:300]
    extensions = first.get("extensions")
    extensions = extensions if isinstance(extensions, dict) else {}
    code = extensions.get("code")
    if code == "NOT_OWNER":
        disowned = extensions.get("partitions") or [extensions.get("partition")]
        named = [p for p in disowned if isinstance(p, int)] or list(where["partitions"])
        return NotOwnerError(
            view, f"NOT_OWNER: {message}", partitions=named, node=where["node"], keys=where["keys"]
        )
    if code == "NOT_CAUGHT_UP":
        return NotCaughtUpError(view, message, **where)
    if code == "BAD_USER_INPUT":  # e.g. a cursor only the node can decode: the client's mistake
        return BadRequestError(view, f"node {where['node']} rejected the arguments: {message}")
    return NodeProtocolError(view, f"node error {code or 'without code'}: {message}", **where)


def transport_failure(
    exc: NodeTransportError, view: str, where: dict[str, Any], url: str
) -> NodeUnavailableError:
    """A call that got no complete HTTP answer: clients learn the node's id and what failed;
    its URL and the socket's error text are for the operator's log."""
    log.warning("node %s at %s unreachable: %s", where["node"], url, exc)
    return NodeUnavailableError(view, f"unreachable ({type(exc).__name__})", **where)


def past_deadline(view: str, where: dict[str, Any]) -> NodeTimeoutError:
    """A call (or a wait for a shared one) still unanswered at the request's deadline."""
    return NodeTimeoutError(view, "no answer before the request's deadline", **where)


def read_answer(read: Callable[[Any], T], reply: NodeReply, view: str, where: dict[str, Any]) -> T:
    """`read(reply.data)`, or the NodeProtocolError saying the node answered what the gateway
    cannot read (what it answered is for the log, not the client)."""
    try:
        return read(reply.data)
    except (ValueError, TypeError) as exc:
        log.warning("node %s answered %.200s: %s", where["node"], reply.data, exc)
        raise NodeProtocolError(view, "answered data the gateway cannot read", **where) from exc


def other_partitions(view: str, where: dict[str, Any]) -> NodeProtocolError:
    """An answer about other partitions than the call asked for."""
    return NodeProtocolError(view, "answered slices of other partitions than asked", **where)


def refused_follow(view: str, partition: int, node: str) -> NodeProtocolError:
    """A follow of `view`'s changes the node refused (a view it does not serve); its answer
    is for the log (`gateway.nodes.hub`), not the client."""
    return NodeProtocolError(
        view,
        "the node refused to follow the view's changes: it serves another catalogue or "
        "version than the gateway (the gateway's log has its answer); subscribe again once "
        "every node serves the view",
        partitions=[partition],
        node=node,
    )


def for_waiter(
    exc: NodeUnavailableError, partitions: Sequence[int], keys: Sequence[str]
) -> NodeUnavailableError:
    """A shared call's failure as it concerns one of its waiters: its partitions and keys."""
    scoped = type(exc)(exc.view, exc.detail, partitions=partitions, node=exc.node, keys=keys)
    scoped.__cause__ = exc.__cause__
    return scoped
