"""Calling nodes: pre-built bodies (`gateway.documents`) posted over the gateway's long-lived
connections (`gateway.transport`).

A reply is turned into data, into one of the routing errors, or (when the node says the
arguments are bad) into a BadRequestError; the planner decides what to retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from gateway.coalesce import Coalescer
from gateway.errors import (
    NodeTimeoutError,
    NodeUnavailableError,
)
from gateway.reply import NodeReply, decode_reply
from gateway.routing import NodeInfo
from gateway.transport import NodeTransportError

__all__ = ["Caller", "Upstream"]

log = logging.getLogger(__name__)


class Caller(Protocol):
    """What posts a JSON body to a node URL: the gateway's NodeConnections, or an
    HttpxCaller (`gateway.transport`). Failures are raised as `NodeTransportError`s."""

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
        except TimeoutError as exc:  # the deadline, or NodeTransportTimeoutError
            detail = "no answer before the request's deadline"
            raise NodeTimeoutError(view, detail, **where) from exc
        except NodeTransportError as exc:
            # clients learn the node's id and what failed; its URL and the socket's error text
            # are for the operator's log
            log.warning("node %s at %s unreachable: %s", node.node_id, node.url, exc)
            raise NodeUnavailableError(
                view, f"unreachable ({type(exc).__name__})", **where
            ) from exc
        return decode_reply(status, content, view, where)
