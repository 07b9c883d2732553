"""Fake nodes speaking the node HTTP protocol of the team brief, and helpers around them.

A `FakeNode` is an ASGI app serving the node subgraph of one COUNT view with graphql-core
(parsed from SDL, so the gateway's documents must be valid against the contract), holding
a dict of counts per partition. It counts what it was asked, so tests can assert on
requests per node and partitions read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import httpx
import orjson
import uvicorn
from graphql import GraphQLError, build_schema, graphql

from gateway.app import GatewayApp
from gateway.config import GatewayConfig
from gateway.routing import RoutingFeed, RoutingTable, build_routing_table
from node.broker import free_port
from schema import (
    CATALOGUE,
    MemberRecord,
    NodeState,
    PartitionStatus,
    Role,
    View,
    partition_for,
)

WORDS = CATALOGUE[0]


def node_sdl(view: View) -> str:
    t, k = view.type_name, view.key_field
    return f"""
    type {t} {{ {k}: String!  count: Int! }}
    type Query {{
      {view.point_field}({k}: String!): {t}
      {view.many_field}({view.keys_arg}: [String!]!): [{t}]!
      {view.top_field}(limit: Int!, partitions: [Int!]): [{t}!]!
    }}
    """


def split(counts: Mapping[str, int], partitions: int) -> dict[int, dict[str, int]]:
    """`counts` by partition, as the pipeline would have written them."""
    out: dict[int, dict[str, int]] = {p: {} for p in range(partitions)}
    for key, count in counts.items():
        out[partition_for(key, partitions)][key] = count
    return out


class FakeNode:
    """An ASGI node holding `held` partitions of `data` (partition -> key -> count)."""

    def __init__(
        self,
        node_id: str,
        data: Mapping[int, Mapping[str, int]],
        held: Iterable[int],
        partitions: int,
        view: View = WORDS,
        delay_s: float = 0.0,
    ) -> None:
        self.node_id = node_id
        self.data = data
        self.held = set(held)
        self.partitions = partitions
        self.view = view
        self.delay_s = delay_s
        self.requests = 0
        self.partitions_read: list[int] = []  # by topN, one entry per partition per request
        self.keys_asked: list[str] = []
        self._schema = build_schema(node_sdl(view))
        self._root = {
            view.point_field: self._point,
            view.many_field: self._many,
            view.top_field: self._top,
        }

    def url(self) -> str:
        return f"http://{self.node_id}.test"

    def _row(self, key: str) -> dict[str, Any] | None:
        count = self.data.get(partition_for(key, self.partitions), {}).get(key)
        return None if count is None else {self.view.key_field: key, "count": count}

    def _not_owner(self, foreign: Sequence[int], what: str) -> GraphQLError:
        return GraphQLError(
            f"view {self.view.name}: {what} is in partition {foreign[0]}, which node "
            f"{self.node_id} does not hold",
            extensions={
                "code": "NOT_OWNER",
                "view": self.view.name,
                "partition": foreign[0],
                "partitions": list(foreign),
                "node": self.node_id,
            },
        )

    def _check_keys(self, info: Any, keys: Sequence[str]) -> None:
        if any(not k for k in keys):
            raise GraphQLError("empty key", extensions={"code": "BAD_USER_INPUT"})
        parts = [partition_for(k, self.partitions) for k in keys]
        foreign = sorted({p for p in parts if p not in self.held})
        if foreign:
            bad = keys[parts.index(foreign[0])]
            raise self._not_owner(foreign, f"key {bad!r}")
        info.context["read"].update(parts)

    def _point(self, info: Any, **args: Any) -> dict[str, Any] | None:
        key = args[self.view.key_field]
        self.keys_asked.append(key)
        self._check_keys(info, [key])
        return self._row(key)

    def _many(self, info: Any, **args: Any) -> list[dict[str, Any] | None]:
        keys = args[self.view.keys_arg]
        self.keys_asked.extend(keys)
        self._check_keys(info, keys)
        return [self._row(k) for k in keys]

    def _top(self, info: Any, limit: int, partitions: list[int] | None = None) -> list[Any]:
        if not 1 <= limit <= 10_000:
            raise GraphQLError("bad limit", extensions={"code": "BAD_USER_INPUT"})
        wanted = sorted(self.held) if partitions is None else partitions
        foreign = sorted({p for p in wanted if p not in self.held})
        if foreign:
            raise self._not_owner(foreign, f"partition {foreign[0]}")
        self.partitions_read.extend(wanted)
        info.context["read"].update(wanted)
        rows = [(k, c) for p in wanted for k, c in self.data.get(p, {}).items()]
        rows.sort(key=lambda kc: (-kc[1], kc[0]))
        return [{self.view.key_field: k, "count": c} for k, c in rows[:limit]]

    def freshness(self, read: Iterable[int]) -> list[dict[str, Any]]:
        return [
            {
                "partition": p,
                "node": self.node_id,
                "role": "ACTIVE",
                "appliedOffset": 100 + p,
                "lag": 0,
            }
            for p in sorted(read)
        ]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.requests += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if scope["path"] == "/health":
            doc: dict[str, Any] = {
                "node_id": self.node_id,
                "state": "RUNNING",
                "active": sorted(self.held),
                "standby": [],
            }
        else:
            doc = await self._graphql(orjson.loads(body))
        payload = orjson.dumps(doc)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _graphql(self, request: dict[str, Any]) -> dict[str, Any]:
        context: dict[str, Any] = {"read": set()}
        result = await graphql(
            self._schema,
            request["query"],
            root_value=self._root,
            variable_values=request.get("variables"),
            context_value=context,
        )
        doc: dict[str, Any] = {"data": result.data}
        if result.errors:
            doc["errors"] = [e.formatted for e in result.errors]
        doc["extensions"] = {"freshness": self.freshness(context["read"])}
        return doc


def member(
    node_id: str,
    url: str,
    active: Iterable[int],
    heartbeat_ms: int,
    interval_ms: int = 1000,
    state: NodeState = NodeState.RUNNING,
) -> MemberRecord:
    return MemberRecord(
        node_id=node_id,
        url=url,
        state=state,
        heartbeat_ms=heartbeat_ms,
        heartbeat_interval_ms=interval_ms,
        partitions=tuple(PartitionStatus(p, Role.ACTIVE, 100 + p, 100 + p) for p in active),
    )


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def table_for(
    claims: Mapping[str, tuple[str, Iterable[int]]],
    partitions: int,
    view: View = WORDS,
    heartbeat_ms: int | None = None,
) -> RoutingTable:
    """A routing table where node id -> (url, claimed partitions), all alive."""
    beat = now_ms() if heartbeat_ms is None else heartbeat_ms
    members = {
        node_id: member(node_id, url, parts, beat) for node_id, (url, parts) in claims.items()
    }
    return build_routing_table(members, {view.name: partitions}, beat)


def feed_for(nodes: Sequence[FakeNode], partitions: int) -> RoutingFeed:
    """A feed whose table says each fake node owns what it holds."""
    return RoutingFeed(table_for({n.node_id: (n.url(), n.held) for n in nodes}, partitions))


def client_for(
    nodes: Sequence[FakeNode], extra: Mapping[str, httpx.AsyncBaseTransport] | None = None
) -> httpx.AsyncClient:
    """One httpx client reaching every fake node (and `extra` transports) by its URL."""
    mounts: dict[str, httpx.AsyncBaseTransport] = {
        n.url(): httpx.ASGITransport(app=n) for n in nodes
    }
    mounts.update(extra or {})
    return httpx.AsyncClient(mounts=mounts)


def round_robin(partitions: int, nodes: int) -> list[list[int]]:
    """Partition p goes to node p % nodes."""
    return [[p for p in range(partitions) if p % nodes == i] for i in range(nodes)]


class ServerThread:
    """An ASGI app under a real uvicorn on a loopback port, in a thread, owned by this handle."""

    def __init__(self, app: Callable[..., Any], port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            loop="asyncio",
            log_level="warning",
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"uvicorn on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)


@contextlib.asynccontextmanager
async def running_gateway(
    nodes: Sequence[FakeNode],
    partitions: int,
    config: GatewayConfig | None = None,
    feed: RoutingFeed | None = None,
    extra: Mapping[str, httpx.AsyncBaseTransport] | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway app over fake nodes, started, with an httpx client talking to it."""
    upstream = client_for(nodes, extra)
    app = GatewayApp(
        config or GatewayConfig(), feed=feed or feed_for(nodes, partitions), clients=[upstream]
    )
    await app.startup()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
            yield http
    finally:
        await app.shutdown()
        await upstream.aclose()


async def post_query(
    http: httpx.AsyncClient, query: str, variables: Mapping[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    response = await http.post("/graphql", json={"query": query, "variables": variables})
    return response.status_code, response.json()


def top_truth(counts: Mapping[str, int], limit: int) -> list[dict[str, Any]]:
    ranked = sorted(counts.items(), key=lambda kc: (-kc[1], kc[0]))[:limit]
    return [{"word": k, "count": c} for k, c in ranked]
