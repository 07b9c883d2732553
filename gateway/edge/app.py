"""The gateway's ASGI app: GET/POST /graphql, GraphiQL, /health, /metrics (Prometheus,
`gateway.metrics`), the status page /status and its data /status.json
(`gateway.edge.statuspage`, `gateway.cluster.overview`) and the assets of both pages.

A plain ASGI app (no web framework): `/graphql` is the shared GraphQL-over-HTTP layer
(`gateway.execute.execution`), every route behind the CORS allowlist (`gateway.cors`); WebSockets
to `/graphql` speak graphql-transport-ws (`gateway.edge.ws`), `/graphql/stream` GraphQL over
Server-Sent Events (`gateway.edge.sse`). With authentication off (or
STATEFED_GATEWAY_ALLOWED_HOSTS set) every request and handshake first passes the `Host` check
against DNS rebinding (runtime.hosts). The lifespan starts the membership and pipeline status
readers and the connections to the nodes and stops them; nothing is opened before start-up.
With STATEFED_CLUSTER_SECRET_FILE, start-up reads the cluster secret: node calls are signed
with it and only nodes whose membership records it verifies are routed to (runtime.trust);
beyond loopback the configuration requires it unless STATEFED_GATEWAY_CLUSTER_AUTH=none.
With STATEFED_METRICS_TOKEN_FILE, start-up reads the bearer token `/metrics` then needs
(runtime.metrics); without it `/metrics` is open, as `/health` is, whatever the
authentication of GraphQL: Prometheus sends a fixed token, not a JWT.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import strawberry
from prometheus_client.core import Metric

from gateway.api.kinds import kind_of
from gateway.api.request import RequestContext
from gateway.api.schema import build_schema
from gateway.auth.bearer import (
    Authenticator,
    Unauthenticated,
    authenticator_for,
    authorization,
    refusal,
)
from gateway.cluster.membership import MembershipReader
from gateway.cluster.overview import node_entries, status_body
from gateway.cluster.pipeline import PipelineStatusReader, StatusBoard
from gateway.cluster.routing import RoutingFeed, RoutingTable
from gateway.config import GatewayConfig
from gateway.cors import Cors, CorsPolicy
from gateway.edge.graphiql import STATIC_PREFIX, StaticAssets, graphiql_page
from gateway.edge.operations import Operations
from gateway.edge.slots import Slots
from gateway.edge.sse import STREAM_PATH, GraphQLEventStream
from gateway.edge.statuspage import (
    STATUS_JSON_PATH,
    STATUS_PAGE_HEADERS,
    STATUS_PAGE_POLICY,
    STATUS_PATH,
    status_page,
)
from gateway.edge.workermetrics import WorkerMetrics
from gateway.edge.ws import GraphQLWebSocket
from gateway.execute.execution import GatewayEndpoint
from gateway.execute.limits import QueryLimits
from gateway.execute.persisted import PersistedQueries
from gateway.metrics import GatewayMetrics, runtime_figures
from gateway.model.principal import ANONYMOUS, Principal
from gateway.nodes.hub import FeedHub
from gateway.nodes.transport import HttpxCaller, NodeConnections
from gateway.nodes.upstream import Upstream
from gateway.reads.cache import GatewayCache
from gateway.reads.planner import Planner
from gateway.reads.whole import views_to_hold
from gateway.writes.policy import RateLimiter
from gateway.writes.producer import EventProducer
from runtime.clock import wall_clock_ms
from runtime.config import ConfigError
from runtime.graphql_http import (
    Receive,
    RequestError,
    Scope,
    Send,
    send_body,
    send_json,
    send_page,
)
from runtime.hosts import HostCheck
from runtime.looplag import LoopLag
from runtime.metrics import METRICS_PATH, MetricsGuard
from runtime.startup import log_start_failure
from runtime.trust import ClusterSecret, NodeCallSigner
from schema import CATALOGUE, View

__all__ = ["GatewayApp", "health_body"]

log = logging.getLogger(__name__)


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
    hub: FeedHub | None = None  # follows the nodes' change feeds for subscriptions
    cache: GatewayCache | None = None  # lookups from memory, kept exact by the feeds


class GatewayApp:
    """The gateway as an ASGI app.

    Inject `feed` to route from tables you publish yourself instead of reading membership
    from Kafka, `statuses` to show pipeline statuses you put there yourself instead of
    reading `statefed.pipeline` (with an injected feed and no board, nothing is read from
    Kafka and every view shows no status), and `client` to call nodes through your own
    httpx client (it is then yours to close). `catalogue` is the views to serve. `producer`
    writes the produce mutation's events instead of a Kafka producer made at start-up (when
    STATEFED_GATEWAY_PRODUCE is on; it is then yours to close). `clock` is the gateway's
    time: membership ages, health, produce's eventTime bounds and rate, re-reads of a JWKS
    (`gateway.auth.keys`). `schema` serves that schema instead of the catalogue's (tests of the
    subscription transports). `metrics` holds the app's Prometheus registry (`/metrics`);
    `workers` makes it one of several worker processes whose `/metrics` answers for all of
    them (`gateway.edge.workermetrics`).
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
        producer: EventProducer | None = None,
        schema: strawberry.Schema | None = None,
        workers: WorkerMetrics | None = None,
    ) -> None:
        self.config = config
        self._workers = workers
        self._catalogue = tuple(catalogue)
        self._check_whole_views()
        self._schema = schema or build_schema(self._catalogue)
        limits = QueryLimits(config, self._schema._schema, self._catalogue)
        self._feed = feed
        self._statuses = statuses
        self._client = client
        self._clock = clock
        self._producer = producer
        self._produce_rate = RateLimiter(config.produce_rate, clock)
        self._assets = StaticAssets()
        self._runtime: _Runtime | None = None
        self._authenticator: Authenticator = authenticator_for(config, clock)
        self.metrics = GatewayMetrics()
        self._loop_lag = LoopLag(self.metrics.loop_lag)
        self._metrics_guard = MetricsGuard(config.metrics_token_file)
        self.persisted = PersistedQueries(
            config.apq_mb << 20 if config.apq else None, config.trusted_documents
        )
        self._graphql = GatewayEndpoint(
            self._schema,
            limits,
            self._authenticator,
            self._context,
            graphiql_page("/graphql", _default_query(self._catalogue)),
            config.max_body_bytes,
            config.max_tokens,
            self.metrics,
            self._catalogue,
            self.persisted,
            config.normalize_literals,
        )
        self._documents = self._graphql.documents
        self.metrics.watch(self._figures)
        self.metrics.watch(self.persisted.figures)
        cors = CorsPolicy(config.cors_origins)
        self._serve = Cors(self._http, cors)
        slots = self._slots = Slots(
            config.max_subscriptions, config.max_subscriptions_per_connection
        )
        operations = self._operations = Operations(self._graphql, self._schema, slots)
        self._websocket = GraphQLWebSocket(
            operations,
            self._authenticator,
            cors,
            init_timeout_s=config.live_init_timeout_ms / 1000,
            send_buffer=config.live_send_buffer,
            max_operations=config.max_operations_per_connection,
        )
        self._events = GraphQLEventStream(
            operations,
            self._authenticator,
            max_body_bytes=config.max_body_bytes,
            send_buffer=config.live_send_buffer,
            max_operations=config.max_operations_per_connection,
        )
        self._entrance = HostCheck.around(self._route, config.host_policy())

    @property
    def feed(self) -> RoutingFeed | None:
        """The routing feed in use (None before start-up)."""
        return self._runtime.feed if self._runtime else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._entrance(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._serve(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def startup(self) -> None:
        """Load the token keys, read the cluster secret and the metrics token, open the
        connections to the nodes and start following membership; in trusted-documents mode,
        read the manifest first."""
        self.persisted.start()
        await self._authenticator.start()
        _log_authentication(self.config)
        self._metrics_guard.load()
        secret = _read_cluster_secret(self.config)
        feed = self._feed or RoutingFeed()
        reader = None
        if self._feed is None:
            reader = MembershipReader(
                self.config.kafka,
                feed,
                lookback_ms=self.config.members_lookback_ms,
                catalogue=self._catalogue,
                clock=self._clock,
                secret=secret,
            )
            reader.start(asyncio.get_running_loop())
        statuses, status_reader = self._statuses or StatusBoard(), None
        if self._statuses is None and self._feed is None:
            status_reader = PipelineStatusReader(
                self.config.kafka, statuses, tail_records=self.config.status_tail_records
            )
            status_reader.start()
        connections = None
        signer = NodeCallSigner(secret, self._clock)
        if self._client is not None:
            upstream = Upstream(HttpxCaller(self._client), signer, self.metrics)
        else:
            connections = NodeConnections(self.config.upstream_connections, self.config.node_ca)
            upstream = Upstream(connections, signer, self.metrics)
        hub = FeedHub(feed, signer, self.config.max_lag, self.config.node_ca)
        await hub.start()
        cache = None
        if self.config.cache:
            cache = GatewayCache(
                hub,
                feed,
                self._catalogue,
                self.config.cache_mb << 20,
                self.config.cache_admit_after,
                whole=self.config.cache_whole_views,
            )
            await cache.start()
        planner = Planner(
            feed,
            upstream,
            self.config,
            self._catalogue,
            cache=cache,
            on_batch=self.metrics.coalesced,
        )
        producer = None
        if self.config.produce:
            producer = self._producer or EventProducer(self.config.kafka, self.config.timeout_s)
        self._loop_lag.start()
        if self._workers is not None:
            await self._workers.start(self.metrics.registry)
        self._runtime = _Runtime(
            feed, planner, reader, statuses, status_reader, connections, producer, hub, cache
        )

    async def shutdown(self) -> None:
        runtime, self._runtime = self._runtime, None
        if runtime is None:
            return
        await self._loop_lag.stop()
        if self._workers is not None:
            await self._workers.stop()
        if runtime.cache is not None:
            await runtime.cache.stop()
        if runtime.hub is not None:
            await runtime.hub.stop()
        for reader in (runtime.reader, runtime.status_reader):
            if reader is not None:
                await asyncio.to_thread(reader.stop)
        if runtime.producer is not None and runtime.producer is not self._producer:
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
                    log_start_failure(log, "gateway start-up failed", exc)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/graphql":
            await self._graphql(scope, receive, send)
            return
        if path == STREAM_PATH:
            await self._events(scope, receive, send)
            return
        try:
            if path == "/health" and method in ("GET", "HEAD"):
                await self._health(scope, send)
            elif path == STATUS_PATH and method in ("GET", "HEAD"):
                await send_page(send, status_page(), STATUS_PAGE_POLICY, STATUS_PAGE_HEADERS)
            elif path == STATUS_JSON_PATH and method in ("GET", "HEAD"):
                await self._status(scope, send)
            elif path == METRICS_PATH and method in ("GET", "HEAD"):
                if self._workers is None:
                    await self._metrics_guard.serve(scope, send, self.metrics.registry)
                else:
                    await self._metrics_guard.serve_with(scope, send, self._workers.gather)
            elif path.startswith(STATIC_PREFIX) and method in ("GET", "HEAD"):
                await self._static(send, path.removeprefix(STATIC_PREFIX))
            elif path == "/" and method in ("GET", "HEAD"):
                await send_body(send, 307, b"", b"text/plain", [(b"location", b"/graphql")])
            else:
                raise RequestError(f"no route for {method} {path}", 404, "NOT_FOUND")
        except RequestError as exc:
            await send_json(send, exc.status, exc.body(), headers=exc.headers)

    def _check_whole_views(self) -> None:
        """STATEFED_GATEWAY_CACHE_WHOLE_VIEWS names views the cache can hold, or says which."""
        try:
            views_to_hold(self._catalogue, self.config.cache_whole_views)
        except ValueError as exc:
            raise ConfigError("STATEFED_GATEWAY_CACHE_WHOLE_VIEWS", str(exc)) from None

    def _started(self) -> _Runtime:
        if self._runtime is None:
            raise RequestError("the gateway is not started", 503, "UNAVAILABLE")
        return self._runtime

    def _context(self, principal: Principal) -> RequestContext:
        """The context of one GraphQL request's resolvers, made for `principal`."""
        runtime = self._started()
        return RequestContext(
            planner=runtime.planner,
            feed=runtime.feed,
            config=self.config,
            deadline=runtime.planner.deadline(),
            clock=self._clock,
            statuses=runtime.statuses,
            producer=runtime.producer,
            produce_rate=self._produce_rate,
            principal=principal,
            hub=runtime.hub,
            cache=runtime.cache,
        )

    async def _health(self, scope: Scope, send: Send) -> None:
        """/health stays public (probes send no token); with authentication on, node URLs
        are shown only to a valid token with the operator scope."""
        urls = True
        if self.config.authenticates:
            try:
                principal = await self._authenticator.principal(authorization(scope["headers"]))
            except Unauthenticated:
                principal = ANONYMOUS
            urls = principal.may(self.config.operator_scope)
        runtime = self._started()
        table = runtime.feed.current
        suspects = runtime.planner.suspects(table)
        body = health_body(table, self._clock(), urls=urls, suspects=suspects)
        if runtime.cache is not None:
            fast = self._graphql.fast_path
            body["cache"] = {**runtime.cache.stats(), "fast": fast.answered if fast else 0}
        await send_json(send, 200, body)

    async def _status(self, scope: Scope, send: Send) -> None:
        """/status.json: what `/status` and `statefed status` show; with authentication on,
        only for a token with the operator scope."""
        if self.config.authenticates:
            try:
                principal = await self._authenticator.principal(authorization(scope["headers"]))
            except Unauthenticated as exc:
                raise refusal(exc) from None
            scope_name = self.config.operator_scope
            if not principal.may(scope_name):
                raise RequestError(
                    f"the cluster status needs a token with the operator scope {scope_name!r} "
                    "(STATEFED_GATEWAY_OPERATOR_SCOPE)",
                    403,
                    "FORBIDDEN",
                )
        runtime = self._started()
        table = runtime.feed.current
        suspects = runtime.planner.suspects(table)
        body = status_body(table, runtime.statuses, self._catalogue, self._clock(), suspects)
        await send_json(send, 200, body, headers=((b"cache-control", b"no-store"),))

    def _figures(self) -> list[Metric]:
        """What `/metrics` reads of the running gateway at each scrape."""
        runtime = self._runtime
        if runtime is None:
            return []
        cache = None if runtime.cache is None else runtime.cache.stats()
        events = self._operations.events
        return runtime_figures(
            cache,
            self._slots.running,
            runtime.planner.watch.hedged_reads,
            (events.written, events.executed),
            runtime.feed.current.stale_since_ms is not None,
        )

    async def _static(self, send: Send, name: str) -> None:
        asset = self._assets.get(name)
        if asset is None:
            raise RequestError(f"no asset {name!r}", 404, "NOT_FOUND")
        content, content_type = asset
        cache = [(b"cache-control", b"public, max-age=86400")]
        await send_body(send, 200, content, content_type.encode(), cache)


_GUIDE = """\
# statefed: one GraphQL endpoint, every view.
#
# Run the query below: the run button, or
# Ctrl-Enter. extensions.freshness in each
# answer says which node and copy answered,
# and how far behind it was.
#
# One query per view follows, commented out.
# To run one, comment out the query above
# (select it, Ctrl-/), then uncomment the one
# you want the same way. The Docs pane (top
# left) lists every field; the last two,
# _entities and _service, are for federation
# routers.

"""

_CLUSTER = "{\n  cluster { nodes { id state } views { name kind lateDropped } }\n}\n"


def view_examples(catalogue: Sequence[View]) -> list[str]:
    """One query per view of `catalogue` that has one (its kind's example), then the
    cluster's."""
    examples = [kind_of(view).example(view) for view in catalogue]
    return [example for example in examples if example is not None] + [_CLUSTER]


def _default_query(catalogue: Sequence[View]) -> str:
    """GraphiQL's first document: a guide, the first view's query to run, then every other
    view's query commented out (one runnable operation keeps the run button a button)."""
    first, *others = view_examples(catalogue)
    commented = ["".join(f"# {line}\n" for line in query.splitlines()) for query in others]
    return _GUIDE + first + "".join(f"\n{query}" for query in commented)


def _read_cluster_secret(config: GatewayConfig) -> ClusterSecret | None:
    """The cluster secret, or None (logged): on loopback, or beyond it with
    STATEFED_GATEWAY_CLUSTER_AUTH=none (the configuration refuses it otherwise)."""
    if config.cluster_secret_file is not None:
        return ClusterSecret.read(config.cluster_secret_file)
    if config.cluster_auth == "none":
        log.warning(
            "no STATEFED_CLUSTER_SECRET_FILE, STATEFED_GATEWAY_CLUSTER_AUTH=none: node calls are "
            "not signed and unsigned membership records are routed to (serving on %s)",
            config.host,
        )
    else:
        log.info("no STATEFED_CLUSTER_SECRET_FILE: node calls and membership are not signed")
    return None


def _log_authentication(config: GatewayConfig) -> None:
    if config.authenticates:
        log.info("authentication: bearer JWTs (STATEFED_GATEWAY_AUTH=jwt)")
    elif config.auth is None:
        log.warning(
            "authentication is off: every caller is anonymous, as STATEFED_GATEWAY_AUTH is "
            "unset and the gateway serves on loopback (%s) only",
            config.host,
        )
    else:
        log.warning("authentication is off: every caller is anonymous (STATEFED_GATEWAY_AUTH)")


def health_body(
    table: RoutingTable, now_ms: int, *, urls: bool = True, suspects: Collection[str] = ()
) -> dict[str, Any]:
    """GET /health: P, the partitions with a live ACTIVE owner, and the known nodes (with
    their URLs when `urls`, and whether reads avoid them: `suspects`);
    `routing_stale_since_ms` while membership is stalled."""
    count = table.max_partition_count()
    routable = table.routable(count) if count else []
    return {
        "ready": count is not None and len(routable) == count,
        "partitions": count,
        "routable": routable,
        "routing_version": table.version,
        "routing_stale_since_ms": table.stale_since_ms,
        "nodes": node_entries(table, now_ms, urls=urls, suspects=suspects),
    }
