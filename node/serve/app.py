"""The node's ASGI app: `/graphql` (POST, or GET for queries), `GET /health`, `GET /metrics`
(Prometheus, node.serve.metrics), the `/feed` WebSocket of the change feed
(node.replication.feedsocket), and a lifespan that runs the node. Without the cluster secret
(or with STATEFED_NODE_ALLOWED_HOSTS set) every request and handshake first passes the `Host`
check against DNS rebinding (runtime.hosts): IP addresses, localhost, the host of its URL and
the names listed.

Constructing the app opens nothing. Lifespan startup reads the cluster secret (when
STATEFED_CLUSTER_SECRET_FILE names one: from then on `/graphql` answers only calls the gateway
signed, node.replication.trust), the metrics token (when STATEFED_METRICS_TOKEN_FILE names one:
`/metrics` then needs it, runtime.metrics; else it is open, as `/health` is) and the changelog
topics' partition counts from metadata, then starts the materializer, the standby replicator (unless
STATEFED_STANDBY_REPLICAS is 0), the end-offset probe of `readCurrent`
reads and the membership publisher; shutdown stops the probe, stops consuming and closes the
stores, publishes the membership tombstone, and leaves the consumer group, in that order.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any

from node.changelog.feed import ChangeFeed
from node.changelog.materializer import Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import TopologyError
from node.reads.endprobe import EndProbe
from node.replication.feedsocket import FeedEndpoint
from node.replication.membership import MembershipPublisher
from node.replication.standby import StandbyReplicator
from node.replication.trust import CallGuard
from node.serve.graphql_http import GraphQLEndpoint
from node.serve.metrics import NodeMetrics
from node.subgraph.schema import build_subgraph
from node.times import iso_ms
from runtime.clock import Clock, wall_clock_ms
from runtime.graphql_http import Receive, RequestError, Scope, Send, send_json
from runtime.hosts import HostCheck
from runtime.kafka import KafkaConnectionError, KafkaSettings
from runtime.metrics import METRICS_PATH, MetricsGuard
from runtime.startup import log_start_failure
from runtime.topics import partition_count
from runtime.trust import ClusterSecret, RequestVerifier
from schema import CATALOGUE, Role, View
from schema.feed import FEED_PATH

__all__ = ["NodeApp", "changelog_partition_counts"]

log = logging.getLogger(__name__)


def changelog_partition_counts(
    kafka: str | KafkaSettings, catalogue: Iterable[View]
) -> dict[str, int]:
    """Partition count of every changelog topic, which must all be equal (co-partitioned);
    an unreachable Kafka is a KafkaConnectionError naming the settings to check."""
    counts: dict[str, int] = {}
    for view in catalogue:
        try:
            counts[view.changelog_topic] = partition_count(kafka, view.changelog_topic)
        except KafkaConnectionError:
            raise
        except RuntimeError as exc:
            raise TopologyError(f"view {view.name}: {exc}") from exc
    if len(set(counts.values())) > 1:
        raise TopologyError(
            f"changelog topics must have one partition count (a node holds partition p of "
            f"every changelog topic), got {counts}"
        )
    return counts


def _lag_unknown_since(since_ms: int | None) -> dict[str, str]:
    return {} if since_ms is None else {"lagUnknownSince": iso_ms(since_ms)}


class NodeApp:
    """The ASGI application of one node; run it under uvicorn with `lifespan="on"`."""

    def __init__(
        self,
        config: NodeConfig,
        catalogue: Iterable[View] = CATALOGUE,
        *,
        registry: PartitionRegistry | None = None,
        clock: Clock = wall_clock_ms,
    ):
        self.config = config
        self.catalogue = tuple(catalogue)
        self.registry = registry or PartitionRegistry(config.node_id)
        # one clock for retention: what the materializer purges, the subgraph never returns
        self.clock = clock
        self.metrics = NodeMetrics(self.registry, self.catalogue)
        self.metrics_guard = MetricsGuard(config.metrics_token_file)
        self.graphql = GraphQLEndpoint(build_subgraph(self.catalogue), self.registry, clock, config)
        # this process, as its membership records and the feed's handshakes name it
        self.incarnation = secrets.token_hex(8)
        self.guard = CallGuard(
            config.node_id,
            self.incarnation,
            config.checks_calls,
            self.graphql.max_body_bytes,
            self.graphql.limit_hint,
        )
        self.feed = ChangeFeed(config.feed_buffer_mb << 20, self.catalogue)
        self.feed_endpoint = FeedEndpoint(
            self.feed, self.registry, config, self.catalogue, self.guard, clock
        )
        self.secret: ClusterSecret | None = None  # read at start-up
        self.materializer: Materializer | None = None
        self.standby: StandbyReplicator | None = None
        self.publisher: MembershipPublisher | None = None
        self.probe: EndProbe | None = None
        self.failure: BaseException | None = None
        self._stopped = False
        # called from the materializer thread when it dies; run_node stops the server
        self.on_fatal: Callable[[BaseException], None] | None = None
        self._entrance = HostCheck.around(self._route, config.host_policy())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._entrance(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            if scope["path"] == FEED_PATH:
                await self.feed_endpoint(scope, receive, send)
            else:
                await receive()
                await send({"type": "websocket.close", "code": 4404})
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if path == "/graphql":
            try:
                receive = await self.guard.admit(scope, receive)
            except RequestError as exc:
                await send_json(send, exc.status, exc.body(), headers=exc.headers)
                return
            if self.config.test_delay_ms:  # STATEFED_NODE_TEST_DELAY_MS: tests only
                await asyncio.sleep(self.config.test_delay_ms / 1000)
            started = time.perf_counter()
            await self.graphql(scope, receive, send)
            self.metrics.answered(time.perf_counter() - started)
        elif path == "/health" and scope["method"] in ("GET", "HEAD"):
            status, document = self.health()
            if not self.metrics_guard.admits(scope["headers"]):
                document = _without_details(document)
            await send_json(send, status, document)
        elif path == METRICS_PATH and scope["method"] in ("GET", "HEAD"):
            await self.metrics_guard.serve(scope, send, self.metrics.registry)
        else:
            await send_json(send, 404, {"error": f"no route {scope['method']} {path}"})

    def health(self) -> tuple[int, dict[str, Any]]:
        """HTTP status and body of `GET /health`, with every detail (see
        `_without_details`)."""
        statuses = self.registry.statuses()
        document: dict[str, Any] = {
            "node_id": self.config.node_id,
            "url": self.config.url,
            "incarnation": self.incarnation,  # this process's, as its membership records say
            "state": self.registry.state.value,
            "active": self.registry.partitions(Role.ACTIVE),
            "standby": self.registry.partitions(Role.STANDBY),
            "partitions": [
                {
                    "partition": s.partition,
                    "role": s.role.value,
                    "appliedOffset": s.applied_offset,
                    "endOffset": s.end_offset,
                    "lag": s.lag,
                    "restoring": s.restoring,
                    "restoreDone": s.restore_done,
                    "restoreTotal": s.restore_total,
                    **_lag_unknown_since(s.lag_unknown_since_ms),
                    "storeError": s.store_error,
                }
                for s in statuses
            ],
            # copies whose store cannot be written now (a full disk): applying is paused
            "storeErrors": [
                {"partition": s.partition, "role": s.role.value, "error": s.store_error}
                for s in statuses
                if s.store_error is not None
            ],
            # damaged stores moved aside since start-up; their partitions were rebuilt
            "storesSetAside": [
                {
                    "partition": a.partition,
                    "reason": a.reason,
                    "movedTo": a.moved_to,
                    "atMs": a.at_ms,
                }
                for a in self.registry.set_aside()
            ],
            "broker_unreachable_since_ms": self.registry.broker_unreachable_since_ms,
        }
        if self.failure is not None:
            document["state"] = "FAILED"
            document["error"] = str(self.failure)
            return 503, document
        return 200, document

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.feed.bind(asyncio.get_running_loop())
                try:
                    await asyncio.to_thread(self.start)
                except Exception as exc:
                    what = f"node {self.config.node_id} failed to start"
                    log_start_failure(log, what, exc, explained=(TopologyError,))
                    await asyncio.to_thread(self.stop)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.to_thread(self.stop)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def start(self) -> None:
        """Read the secret, the metrics token and the topic layout, then start materializing
        and publishing membership."""
        self._read_secret()
        self.metrics_guard.load()
        counts = changelog_partition_counts(self.config.kafka, self.catalogue)
        self.registry.set_partition_counts(counts)
        if self.config.standby_replicas > 0:
            self.standby = StandbyReplicator(
                self.config,
                self.catalogue,
                self.registry,
                on_fatal=self._fatal,
                clock=self.clock,
                secret=self.secret,
                feed=self.feed,
            )
        self.materializer = Materializer(
            self.config,
            self.catalogue,
            self.registry,
            on_fatal=self._fatal,
            clock=self.clock,
            handoff=self.standby,
            feed=self.feed,
        )
        self.publisher = MembershipPublisher(
            self.config, self.registry, secret=self.secret, incarnation=self.incarnation
        )
        self.probe = EndProbe(self.config)
        self.probe.start()
        self.graphql.probe = self.probe
        self.materializer.start()
        if self.standby is not None:
            self.standby.start()
        self.publisher.start()
        log.info(
            "node %s: serving %s at %s (partitions per topic: %s)",
            self.config.node_id,
            ", ".join(v.name for v in self.catalogue),
            self.config.url,
            sorted(set(counts.values())),
        )

    def _read_secret(self) -> None:
        """Read the cluster secret; arm the guard of /graphql with it unless it is open."""
        config = self.config
        if config.cluster_secret_file is not None:
            self.secret = ClusterSecret.read(config.cluster_secret_file)
        if config.checks_calls:
            assert self.secret is not None
            self.guard.arm(RequestVerifier(self.secret, self.clock))
            log.info(
                "node %s: /graphql answers only calls signed with the cluster secret",
                config.node_id,
            )
        elif config.auth == "none":
            log.warning(
                "node %s: /graphql answers anyone on %s (STATEFED_NODE_AUTH=none)",
                config.node_id,
                config.host,
            )
        else:
            log.warning(
                "node %s: /graphql answers anyone on loopback %s: no STATEFED_CLUSTER_SECRET_FILE",
                config.node_id,
                config.host,
            )

    def stop(self) -> None:
        """Stop consuming and close stores, publish the tombstone, then leave the group."""
        if self._stopped:
            return
        self._stopped = True
        self.graphql.probe = None
        if self.probe is not None:
            self.probe.stop()
        # standbys first: stores the materializer releases must not reopen as standbys
        if self.standby is not None:
            self.standby.stop()
        if self.materializer is not None:
            self.materializer.stop()
        if self.publisher is not None:
            self.publisher.stop()
        if self.materializer is not None:
            self.materializer.close()
        if self.standby is not None:
            self.standby.close()
        log.info("node %s: stopped", self.config.node_id)

    def _fatal(self, exc: BaseException) -> None:
        self.failure = exc
        if self.on_fatal is not None:
            self.on_fatal(exc)


_HIDDEN = "hidden: send the metrics token (STATEFED_METRICS_TOKEN_FILE) to see it"


def _without_details(document: dict[str, Any]) -> dict[str, Any]:
    """`/health` for a caller without the metrics token, when one is set: states, roles,
    offsets and counts, not the text of failures and store errors nor where damaged stores
    were moved, which name the node's files."""
    shown = dict(document)
    shown["partitions"] = [
        {**p, "storeError": None if p.get("storeError") is None else _HIDDEN}
        for p in document.get("partitions", [])
    ]
    shown["storeErrors"] = [{**e, "error": _HIDDEN} for e in document.get("storeErrors", [])]
    shown["storesSetAside"] = [
        {**a, "reason": _HIDDEN, "movedTo": None} for a in document.get("storesSetAside", [])
    ]
    if "error" in shown:
        shown["error"] = _HIDDEN
    return shown
