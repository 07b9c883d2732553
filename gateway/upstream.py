"""Calling nodes: pre-built bodies (`gateway.documents`) posted over the gateway's long-lived
connections (`gateway.transport`).

A reply is turned into data, into one of the routing errors, or (when the node says the
arguments are bad) into a BadRequestError; the planner decides what to retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import orjson

from gateway.coalesce import Coalescer
from gateway.errors import (
    BadRequestError,
    NodeProtocolError,
    NodeTimeoutError,
    NodeUnavailableError,
    NotCaughtUpError,
    NotOwnerError,
)
from gateway.routing import NodeInfo

__all__ = ["Caller", "NodeReply", "Upstream"]


@dataclass(frozen=True)
class NodeReply:
    """The aliased field `r` of a node's answer, and the freshness entries it carried."""

    data: Any
    freshness: list[dict[str, Any]]


class Caller(Protocol):
    """What posts a JSON body to a node URL: the gateway's NodeConnections, or an
    HttpxCaller (`gateway.transport`). Failures are raised as httpx's exceptions."""

    async def post(self, url: str, body: bytes) -> tuple[int, bytes]: ...


class Upstream:
    """Posts pre-built bodies to nodes' `/graphql` under a deadline (event-loop time);
    `lookups` coalesces concurrent key lookups into one body per node (`gateway.coalesce`)."""

    def __init__(self, caller: Caller) -> None:
        self._caller = caller
        self.lookups = Coalescer(self.post)

    async def post(
        self,
        node: NodeInfo,
        body: bytes,
        *,
        view: str,
        partitions: Sequence[int],
        keys: Sequence[str] = (),
        deadline: float,
    ) -> NodeReply:
        where: dict[str, Any] = {"partitions": partitions, "node": node.node_id, "keys": keys}
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                status, content = await self._caller.post(node.graphql_url, body)
        except (TimeoutError, httpx.TimeoutException) as exc:
            detail = f"no answer from {node.url} before the request's deadline"
            raise NodeTimeoutError(view, detail, **where) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            detail = f"{node.url} unreachable: {type(exc).__name__}: {exc}"
            raise NodeUnavailableError(view, detail, **where) from exc
        return _decode(status, content, view, where)


def _decode(status: int, content: bytes, view: str, where: dict[str, Any]) -> NodeReply:
    if status >= 500:
        raise NodeUnavailableError(view, f"HTTP {status}", **where)
    if status != 200:
        text = content[:200].decode("utf-8", "replace")
        raise NodeProtocolError(view, f"HTTP {status}: {text!r}", **where)
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise NodeProtocolError(view, f"answer is not JSON: {exc}", **where) from exc
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
