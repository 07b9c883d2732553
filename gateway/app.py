"""The gateway's ASGI app: POST/GET /graphql, GraphiQL, /health and the GraphiQL assets.

A plain ASGI app (no web framework): GraphQL requests run on graphql-core over the
strawberry schema with cached documents (`gateway.execution`), bodies are encoded with
orjson. The lifespan starts the membership and pipeline
status readers and the connections to the nodes and stops them; nothing is opened before
start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import httpx
import orjson

from gateway.config import GatewayConfig
from gateway.execution import Documents, ReadOnlyRequestError, UnknownOperationError
from gateway.graphiql import STATIC_PREFIX, StaticAssets, graphiql_page
from gateway.kinds import kind_of
from gateway.limits import QueryLimits
from gateway.membership import MembershipReader
from gateway.planner import Planner
from gateway.producer import EventProducer
from gateway.request import RequestContext
from gateway.responses import request_error, response_body
from gateway.routing import RoutingFeed, RoutingTable
from gateway.schema import build_schema
from gateway.status import PipelineStatusReader, StatusBoard
from gateway.transport import HttpxCaller, NodeConnections
from gateway.upstream import Upstream
from runtime.clock import wall_clock_ms
from schema import CATALOGUE, View

__all__ = ["GatewayApp", "health_body"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON = b"application/json"


@dataclass
class _Runtime:
    """What lives from start-up to shutdown."""

    feed: RoutingFeed
    planner: Planner
    reader: MembershipReader | None
    statuses: StatusBoard
    status_reader: PipelineStatusReader | None
    connections: NodeConnections | None  # None when the app was given a client
    producer: EventProducer | None  # connects on the first produce mutation


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, code: str = "BAD_REQUEST") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class GatewayApp:
    """The gateway as an ASGI app.

    Inject `feed` to route from tables you publish yourself instead of reading membership
    from Kafka, `statuses` to show pipeline statuses you put there yourself instead of
    reading `statefed.pipeline` (with an injected feed and no board, nothing is read from
    Kafka and every view shows no status), and `client` to call nodes through your own
    httpx client (it is then yours to close). `catalogue` is the views to serve.
    """

    def __init__(
        self,
        config: GatewayConfig,
        *,
        feed: RoutingFeed | None = None,
        client: httpx.AsyncClient | None = None,
        statuses: StatusBoard | None = None,
        catalogue: Iterable[View] = CATALOGUE,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self._catalogue = tuple(catalogue)
        self._schema = build_schema(self._catalogue)
        limits = QueryLimits(config, self._schema._schema, self._catalogue)
        self._documents = Documents(self._schema, limits)
        self._feed = feed
        self._statuses = statuses
        self._client = client
        self._clock = clock
        self._assets = StaticAssets()
        self._page = graphiql_page("/graphql", _default_query(self._catalogue))
        self._runtime: _Runtime | None = None

    @property
    def feed(self) -> RoutingFeed | None:
        """The routing feed in use (None before start-up)."""
        return self._runtime.feed if self._runtime else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def startup(self) -> None:
        """Open the connections to the nodes and start following membership."""
        feed = self._feed or RoutingFeed()
        reader = None
        if self._feed is None:
            reader = MembershipReader(
                self.config.bootstrap,
                feed,
                lookback_ms=self.config.members_lookback_ms,
                catalogue=self._catalogue,
                clock=self._clock,
            )
            reader.start(asyncio.get_running_loop())
        statuses, status_reader = self._statuses or StatusBoard(), None
        if self._statuses is None and self._feed is None:
            status_reader = PipelineStatusReader(
                self.config.bootstrap, statuses, tail_records=self.config.status_tail_records
            )
            status_reader.start()
        connections = None
        if self._client is not None:
            upstream = Upstream(HttpxCaller(self._client))
        else:
            connections = NodeConnections(self.config.upstream_connections)
            upstream = Upstream(connections)
        planner = Planner(feed, upstream, self.config, self._catalogue)
        producer = None
        if self.config.produce:
            producer = EventProducer(self.config.bootstrap, self.config.timeout_s)
        self._runtime = _Runtime(
            feed, planner, reader, statuses, status_reader, connections, producer
        )

    async def shutdown(self) -> None:
        runtime, self._runtime = self._runtime, None
        if runtime is None:
            return
        for reader in (runtime.reader, runtime.status_reader):
            if reader is not None:
                await asyncio.to_thread(reader.stop)
        if runtime.producer is not None:
            await asyncio.to_thread(runtime.producer.close)
        if runtime.connections is not None:
            await runtime.connections.aclose()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    log.exception("gateway start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        try:
            if path == "/graphql":
                await self._graphql(scope, receive, send, method)
            elif path == "/health" and method in ("GET", "HEAD"):
                await _respond(send, 200, orjson.dumps(health_body(self._table(), self._clock())))
            elif path.startswith(STATIC_PREFIX) and method in ("GET", "HEAD"):
                await self._static(send, path.removeprefix(STATIC_PREFIX))
            elif path == "/" and method in ("GET", "HEAD"):
                await _respond(send, 307, b"", b"text/plain", [(b"location", b"/graphql")])
            else:
                raise _HTTPError(404, f"no route for {method} {path}", "NOT_FOUND")
        except _HTTPError as exc:
            await _respond(send, exc.status, orjson.dumps(request_error(str(exc), exc.code)))

    def _table(self) -> RoutingTable:
        if self._runtime is None:
            raise _HTTPError(503, "the gateway is not started", "UNAVAILABLE")
        return self._runtime.feed.current

    async def _graphql(self, scope: Scope, receive: Receive, send: Send, method: str) -> None:
        limit = self.config.max_body_bytes
        if method == "POST":
            request = _decode_request(await _read_body(scope, receive, limit))
        elif method in ("GET", "HEAD"):
            query_string = scope.get("query_string", b"")
            if len(query_string) > limit:
                raise _HTTPError(414, _too_large("query string", limit), "URI_TOO_LONG")
            params = parse_qs(query_string.decode("latin-1"))
            if "query" not in params:
                await _respond(send, 200, self._page, b"text/html; charset=utf-8")
                return
            request = _request_from_params(params)
        else:
            raise _HTTPError(405, "GraphQL takes GET or POST", "METHOD_NOT_ALLOWED")
        # a GET must not change anything: mutations only by POST
        body = await self._execute(*request, mutations=method == "POST")
        await _respond(send, 200, orjson.dumps(body))

    async def _execute(
        self,
        query: str,
        variables: dict[str, Any] | None,
        operation: str | None,
        mutations: bool,
    ) -> dict[str, Any]:
        runtime = self._runtime
        if runtime is None:
            raise _HTTPError(503, "the gateway is not started", "UNAVAILABLE")
        context = RequestContext(
            planner=runtime.planner,
            feed=runtime.feed,
            config=self.config,
            deadline=runtime.planner.deadline(),
            clock=self._clock,
            statuses=runtime.statuses,
            producer=runtime.producer,
        )
        table = runtime.feed.current
        try:
            result = await self._documents.run(
                query,
                variables,
                operation,
                context,
                lambda view: _partitions(table, view),
                mutations=mutations,
            )
        except (UnknownOperationError, ReadOnlyRequestError) as exc:
            raise _HTTPError(400, f"cannot run this operation: {exc}") from exc
        return response_body(result, context)

    async def _static(self, send: Send, name: str) -> None:
        asset = self._assets.get(name)
        if asset is None:
            raise _HTTPError(404, f"no asset {name!r}", "NOT_FOUND")
        content, content_type = asset
        cache = [(b"cache-control", b"public, max-age=86400")]
        await _respond(send, 200, content, content_type.encode(), cache)


def _default_query(catalogue: Sequence[View]) -> str:
    """GraphiQL's first query: the first example a view's kind gives, else the cluster."""
    for view in catalogue:
        example = kind_of(view).example(view)
        if example is not None:
            return example
    return "{\n  cluster { nodes { id state } views { name kind lateDropped } }\n}\n"


def health_body(table: RoutingTable, now_ms: int) -> dict[str, Any]:
    """GET /health: P, the partitions with a live ACTIVE owner, and the known nodes."""
    count = table.max_partition_count()
    routable = table.routable(count) if count else []
    return {
        "ready": count is not None and len(routable) == count,
        "partitions": count,
        "routable": routable,
        "routing_version": table.version,
        "nodes": [
            {
                "id": node.node_id,
                "url": node.url,
                "state": node.state.value,
                "alive": node.alive,
                "heartbeat_age_ms": max(0, now_ms - node.heartbeat_ms),
                "active": node.active(),
                "standby": node.standby(),
            }
            for node in sorted(table.nodes.values(), key=lambda n: n.node_id)
        ],
    }


def _partitions(table: RoutingTable, view: View) -> int:
    """P of `view` for the cost of a fan-out; before metadata is read the read fails anyway."""
    return table.partition_counts.get(view.name) or table.max_partition_count() or 1


def _too_large(what: str, limit: int) -> str:
    return f"the {what} is larger than {limit} bytes (STATEFED_GATEWAY_MAX_BODY_BYTES)"


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed `limit` bytes."""
    declared = dict(scope.get("headers", ())).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        raise _HTTPError(413, _too_large("request body", limit), "PAYLOAD_TOO_LARGE")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _HTTPError(400, "the client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _HTTPError(413, _too_large("request body", limit), "PAYLOAD_TOO_LARGE")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


Request = tuple[str, dict[str, Any] | None, str | None]


def _checked(query: Any, variables: Any, operation: Any) -> Request:
    if not isinstance(query, str) or not query.strip():
        raise _HTTPError(400, "the request has no GraphQL query (a string in `query`)")
    if variables is not None and not isinstance(variables, dict):
        raise _HTTPError(400, "`variables` must be a JSON object")
    if operation is not None and not isinstance(operation, str):
        raise _HTTPError(400, "`operationName` must be a string")
    return query, variables, operation


def _decode_request(body: bytes) -> Request:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _HTTPError(400, f"the body is not JSON: {exc}") from exc
    if isinstance(doc, list):
        raise _HTTPError(400, "batched requests are not supported: send one operation")
    if not isinstance(doc, dict):
        raise _HTTPError(400, "the body must be a JSON object with `query`")
    return _checked(doc.get("query"), doc.get("variables"), doc.get("operationName"))


def _request_from_params(params: dict[str, list[str]]) -> Request:
    variables: Any = None
    if "variables" in params:
        try:
            variables = orjson.loads(params["variables"][0])
        except orjson.JSONDecodeError as exc:
            raise _HTTPError(400, f"`variables` is not JSON: {exc}") from exc
    operation = params.get("operationName", [None])[0]
    return _checked(params["query"][0], variables, operation)


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes = _JSON,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
