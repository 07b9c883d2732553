"""Calling nodes: pre-built bodies (`gateway.nodes.documents`) posted over the gateway's long-lived
connections (`gateway.nodes.transport`).

Every call carries the callers it is made for and a request id, and with the cluster
secret its signature (`runtime.trust`), built once per call over the body as sent; also the
client request's `x-request-id` and `traceparent` with a new span id (`runtime.tracing`:
for the logs and traces, not signed; a coalesced call carries those of the request that
opened the batch). A reply is turned into data, into one of the routing errors, or (when
the node says the arguments are bad) into a BadRequestError; the planner decides what to
retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import httpx

from gateway.cluster.routing import NodeInfo
from gateway.metrics import GatewayMetrics, NodeCallFailure
from gateway.nodes.reply import NodeReply, decode_reply, past_deadline, transport_failure
from gateway.nodes.transport import Headers, NodeTransportError
from runtime.tracing import Span, outgoing_headers
from runtime.trust import NodeCallSigner

__all__ = ["Caller", "Upstream"]


class Caller(Protocol):
    """What posts a JSON body to a node URL: the gateway's NodeConnections, or an
    HttpxCaller (`gateway.nodes.transport`). Failures are raised as `NodeTransportError`s, a
    call past its `deadline` (event-loop time) as `NodeTransportTimeoutError`."""

    async def post(
        self, url: str, body: bytes, headers: Headers = (), *, deadline: float | None = None
    ) -> tuple[int, bytes]: ...


class Upstream:
    """Posts pre-built bodies to nodes' `/graphql` under a deadline (event-loop time), with
    the headers of `signer` (unsigned, naming the callers, by default). Key lookups come
    through a `Coalescer` (`gateway.nodes.coalesce`) that wraps `post`."""

    def __init__(
        self,
        caller: Caller,
        signer: NodeCallSigner | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self._caller = caller
        self._signer = signer or NodeCallSigner(None)
        self._targets: dict[str, bytes] = {}  # node /graphql URL -> request target
        self._metrics = metrics

    async def post(
        self,
        node: NodeInfo,
        body: bytes,
        *,
        view: str,
        partitions: Sequence[int],
        keys: Sequence[str] = (),
        deadline: float,
        callers: Sequence[str] = (),
    ) -> NodeReply:
        """The node's reply to `body`, asked for `callers` (principal subjects; none: the
        gateway's own call). Past the deadline already, nothing is sent, and the timeout is
        not counted as a failure of the node's."""
        where: dict[str, Any] = {"partitions": partitions, "node": node.node_id, "keys": keys}
        url = node.graphql_url
        headers = self._signer.headers(b"POST", self._target(url), body, callers)
        loop = asyncio.get_running_loop()
        started = loop.time()
        if deadline <= started:
            raise past_deadline(view, where)
        if self._metrics is not None:
            self._metrics.node_known(node.node_id)
        try:
            # the client request's id and trace go along (a new span per call), for the logs
            with Span("node call", node=node.node_id, view=view):
                headers.extend(outgoing_headers())
                status, content = await self._caller.post(url, body, headers, deadline=deadline)
        except TimeoutError as exc:  # NodeTransportTimeoutError: the deadline passed
            self._failed(node.node_id, "timeout")
            raise past_deadline(view, where) from exc
        except NodeTransportError as exc:
            self._failed(node.node_id, "unavailable")
            raise transport_failure(exc, view, where, node.url) from exc
        if self._metrics is not None:
            self._metrics.node_answered(node.node_id, loop.time() - started)
        return decode_reply(status, content, view, where)

    def _failed(self, node_id: str, reason: NodeCallFailure) -> None:
        if self._metrics is not None:
            self._metrics.node_failed(node_id, reason)

    def _target(self, url: str) -> bytes:
        """The request target of `url` as sent (path and query string, as the transport
        writes it); an invalid URL fails in the transport, with the transport's error."""
        target = self._targets.get(url)
        if target is None:
            try:
                target = httpx.URL(url).raw_path
            except httpx.InvalidURL:
                return b"/"
            if len(self._targets) < 4096:  # node URLs come from membership
                self._targets[url] = target
        return target
