"""Prometheus metrics shared by every part: one registry per app, served as `/metrics`.

Each part keeps its metrics in its own `CollectorRegistry` (never the process-wide default
one), so several apps in one process (tests) do not collide. Counters and histograms are
updated where things happen, at most one observation a request; figures that a part already
keeps (offsets, lag, restore progress, cache counts) are read when Prometheus scrapes, by a
collector (`Collected`), so nothing is done per record on a hot path. Names follow the
Prometheus conventions (`statefed_<part>_..._seconds`, `..._total`), and no label takes a
key or anything else unbounded.

A histogram observed on every request is a `LoopHistogram`, not prometheus_client's
`Histogram`: that one takes a lock for its sum and again for the bucket, and finds the bucket
by a linear scan of the bounds, about 1 us an observation, a few a request, which is most of
what the metrics cost when one connection's latency is the CPU of two hops. A
`LoopHistogram` is only observed from the event loop (one thread), so it needs no lock: it
finds the bucket by `bisect` and adds 1 to a list of counts and the amount to a float. A
scrape may run on another thread (`MetricsServer` serves `/metrics` from a WSGI thread;
the gateway and node answer it on their loop): it copies each child's count list once
(one C call, atomic under the GIL) and computes the cumulative buckets and `_count` from
that copy, so the `+Inf` bucket always equals `_count`; the sum is read apart and may hold
an observation more or fewer than that copy, which the next scrape settles. Its exposition
is prometheus_client's, byte for byte (names, HELP, TYPE, `le` strings, `_count`, `_sum`,
`_created`), but for a NaN observation (prometheus_client counts it in no bucket, this in
the first): nothing observes NaN here.

Who may scrape is a `MetricsGuard`'s call: anyone by default (the figures are counts,
latencies and offsets, never a view's keys or values), or, with STATEFED_METRICS_TOKEN_FILE,
only a request sending that file's token as `Authorization: Bearer <token>`, which is what
Prometheus sends for a scrape config's `authorization: credentials_file`. The token is read
at start-up and compared in constant time; a scrape without it gets 401 naming the variable,
from the gateway and nodes (`MetricsGuard.serve`, ASGI) and from `MetricsServer` (WSGI) alike.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import socket
import threading
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Sequence
from http import HTTPStatus
from itertools import accumulate
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

import orjson
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    generate_latest,
    make_wsgi_app,
)
from prometheus_client import metrics as client_metrics
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from runtime.config import ConfigError
from runtime.graphql_http import MediaType, RequestError, Scope, Send, send_body, send_json
from runtime.graphql_http.asgi import Headers

__all__ = [
    "METRICS_PATH",
    "MIN_TOKEN_BYTES",
    "TOKEN_VARIABLE",
    "Collected",
    "LoopHistogram",
    "LoopHistogramChild",
    "MetricsGuard",
    "MetricsServer",
    "bounded",
    "exposition",
    "read_token",
    "send_metrics",
]

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
TOKEN_VARIABLE = "STATEFED_METRICS_TOKEN_FILE"
MIN_TOKEN_BYTES = 32  # as the cluster secret (runtime.trust)
_CONTENT_TYPE = CONTENT_TYPE_LATEST.encode()
_CHALLENGE = ((b"www-authenticate", b'Bearer realm="statefed-metrics"'),)
_JSON_TYPE = MediaType.JSON.content_type.decode()
_MAKE_ONE = "make one with `openssl rand -hex 32 > {path}`"


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry's metrics in the Prometheus text format."""
    return generate_latest(registry)


async def send_metrics(send: Send, registry: CollectorRegistry) -> None:
    """Answer `GET /metrics` with the registry's metrics."""
    await send_body(send, 200, exposition(registry), _CONTENT_TYPE)


def read_token(path: Path) -> bytes:
    """The metrics token in `path` (surrounding whitespace stripped); ConfigError naming
    STATEFED_METRICS_TOKEN_FILE when the file is missing, unreadable or holds no usable token."""
    try:
        token = path.read_bytes().strip()
    except OSError as exc:
        raise ConfigError(
            TOKEN_VARIABLE,
            f"cannot read the metrics token {str(path)!r}: {exc.strerror}; give the file "
            "Prometheus's `credentials_file` names, or unset it to leave /metrics open",
        ) from exc
    made = _MAKE_ONE.format(path=path)
    if not token:
        raise ConfigError(TOKEN_VARIABLE, f"{str(path)!r} is empty: {made}")
    if len(token) < MIN_TOKEN_BYTES:
        raise ConfigError(
            TOKEN_VARIABLE,
            f"{str(path)!r} holds {len(token)} bytes, a metrics token needs at least "
            f"{MIN_TOKEN_BYTES}: {made}",
        )
    if any(byte < 0x21 or byte > 0x7E for byte in token):
        raise ConfigError(
            TOKEN_VARIABLE,
            f"{str(path)!r} holds spaces or characters other than printable ASCII, which an "
            f"Authorization header cannot carry: {made}",
        )
    return token


class MetricsGuard:
    """Who may scrape `/metrics`: anyone when `token_file` is None, else only a request with
    `Authorization: Bearer <the file's token>`, once `load` has read it (503 until then)."""

    def __init__(self, token_file: Path | None) -> None:
        self.token_file = token_file
        self._digest: bytes | None = None

    def load(self) -> None:
        """Read the token at start-up (ConfigError as `read_token`) and log who may scrape."""
        if self.token_file is None:
            log.info(
                "/metrics answers anyone who reaches the port (counts and latencies, no view "
                "data): set %s to require a bearer token",
                TOKEN_VARIABLE,
            )
            return
        # digests of equal length: the comparison tells nothing of the token's length either
        self._digest = hashlib.sha256(read_token(self.token_file)).digest()
        log.info("/metrics answers only scrapes with the bearer token of %s", TOKEN_VARIABLE)

    def admits(self, headers: Headers) -> bool:
        """Whether a request with these headers may see what `/metrics` shows (and a
        node's `/health` details): always when no token is set."""
        try:
            self.check(headers)
        except RequestError:
            return False
        return True

    def check(self, headers: Headers) -> None:
        """Admit a scrape with these request headers; RequestError 401 without the token."""
        if self.token_file is None:
            return
        if self._digest is None:
            raise RequestError("/metrics is starting: try again shortly", 503, "UNAVAILABLE")
        given = _bearer(headers)
        if given is None:
            raise RequestError(
                f"/metrics needs `Authorization: Bearer <token>` with the token of "
                f"{TOKEN_VARIABLE}",
                401,
                "UNAUTHENTICATED",
                _CHALLENGE,
            )
        if not hmac.compare_digest(hashlib.sha256(given).digest(), self._digest):
            raise RequestError(
                f"/metrics: the bearer token is not the one of {TOKEN_VARIABLE}",
                401,
                "UNAUTHENTICATED",
                _CHALLENGE,
            )

    async def serve(self, scope: Scope, send: Send, registry: CollectorRegistry) -> None:
        """Answer `GET /metrics` with the registry's metrics, or with the refusal."""

        async def metrics() -> bytes:
            return exposition(registry)

        await self.serve_with(scope, send, metrics)

    async def serve_with(
        self, scope: Scope, send: Send, metrics: Callable[[], Awaitable[bytes]]
    ) -> None:
        """Answer `GET /metrics` with what `metrics` gathers (the text format), or with the
        refusal, before gathering anything."""
        try:
            self.check(scope["headers"])
        except RequestError as exc:
            await send_json(send, exc.status, exc.body(), headers=exc.headers)
            return
        await send_body(send, 200, await metrics(), _CONTENT_TYPE)


def _bearer(headers: Headers) -> bytes | None:
    """The token of the first Authorization header if it is a Bearer one, else None."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() != b"bearer" or not token.strip():
                return None
            return token.strip()
    return None


class Collected(Collector):
    """A collector whose metrics `collect` builds at scrape time."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


class LoopHistogramChild:
    """The counts of one label set of a `LoopHistogram`; observe only from the event loop."""

    __slots__ = ("_bounds", "counts", "created", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        # one count a bound, the last one for +Inf (above every finite bound)
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        self.counts[bisect_left(self._bounds, amount)] += 1
        self.sum += amount


class LoopHistogram(Collector):
    """A histogram observed from one thread without locks, exposed as prometheus_client's
    `Histogram` with the same name, help, label names and buckets is (module docstring)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds and bounds[-1] == float("inf"):
            bounds.pop()  # +Inf is always the last bucket
        if not bounds or bounds != sorted(bounds) or bounds[0] < 0 or "le" in labelnames:
            raise ValueError(
                f"{name}: buckets must be sorted, non-negative, with a finite bound, and "
                f"no label may be named 'le' (buckets {list(buckets)}, labels {labelnames})"
            )
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._bounds = tuple(bounds)
        self._le = (*(floatToGoString(b) for b in bounds), "+Inf")
        self._children: dict[tuple[str, ...], LoopHistogramChild] = {}
        self._unlabelled = None if labelnames else self._add(())
        registry.register(self)

    def labels(self, *values: str) -> LoopHistogramChild:
        """The child of these label values (made on first use, then the same one); with no
        label names, `labels()` is the only child (observing it saves a call)."""
        child = self._children.get(values)
        return self._add(values) if child is None else child

    def observe(self, amount: float) -> None:
        """Observe `amount` on a histogram without labels."""
        if self._unlabelled is None:
            raise ValueError(f"{self._name} has labels {self._labelnames}: use labels(...)")
        self._unlabelled.observe(amount)

    def describe(self) -> Iterable[Metric]:
        return [HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        created = getattr(client_metrics, "_use_created", True)  # prometheus_client's switch
        for values, child in list(self._children.items()):
            counts = child.counts.copy()  # one copy: the buckets and _count agree
            cumulative = [float(c) for c in accumulate(counts)]
            family.add_metric(values, list(zip(self._le, cumulative, strict=True)), child.sum)
            if created:
                labels = dict(zip(self._labelnames, values, strict=True))
                family.add_sample(f"{self._name}_created", labels, child.created)
        return [family]

    def _add(self, values: tuple[str, ...]) -> LoopHistogramChild:
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name} takes labels {self._labelnames}, got {values}")
        child = self._children[values] = LoopHistogramChild(self._bounds)
        return child


def bounded(value: str, known: set[str], limit: int = 64, other: str = "other") -> str:
    """`value` as a label value while fewer than `limit` distinct values were seen (they
    are added to `known`), else `other`: a label fed by a peer stays bounded."""
    if value in known:
        return value
    if len(known) < limit:
        known.add(value)
        return value
    return other


class MetricsServer:
    """`/metrics` of `registry` on `host:port` in a thread, for a part without an HTTP
    server of its own (the pipeline's driver), behind `guard` when given: what
    prometheus_client's `start_http_server` serves (its WSGI app, on a threading wsgiref
    server that logs no request), but a scrape the guard refuses gets the 401 (challenge
    and JSON error) the gateway and nodes answer. `start` reads the guard's token first."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        guard: MetricsGuard | None = None,
    ) -> None:
        self._registry = registry
        self._address = (host, port)
        self._guard = guard
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Read the token (ConfigError as `read_token`), bind (OSError), then serve."""
        app: WSGIApplication = make_wsgi_app(self._registry)
        if self._guard is not None:
            self._guard.load()
            app = _guarded(app, self._guard)
        host, port = self._address
        # as start_http_server: the address family of the host (IPv6 too)
        family, _, _, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        server = _ThreadingServer(family, (str(sockaddr[0]), port))
        server.set_app(app)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="statefed-metrics", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The port served on (the one the OS chose, for port 0)."""
        assert self._server is not None, "start() the server first"
        return int(self._server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None


class _QuietHandler(WSGIRequestHandler):
    """Logs no request (as prometheus_client's server): a scrape is no news."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """A thread per request, as prometheus_client's `ThreadingWSGIServer`; daemon threads,
    so a scrape in progress never holds the process up (nor a list of threads grow)."""

    daemon_threads = True

    def __init__(self, family: socket.AddressFamily, address: tuple[str, int]) -> None:
        self.address_family = family
        super().__init__(address, _QuietHandler)


def _guarded(app: WSGIApplication, guard: MetricsGuard) -> WSGIApplication:
    """`app` answering only the scrapes `guard` admits; the others get its refusal as JSON."""

    def guarded(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        given = environ.get("HTTP_AUTHORIZATION")
        # WSGI gives header values as latin-1 strings: back to the bytes that were sent
        headers = () if given is None else ((b"authorization", given.encode("latin-1")),)
        try:
            guard.check(headers)
        except RequestError as exc:
            body = orjson.dumps(exc.body())
            start_response(
                f"{exc.status} {HTTPStatus(exc.status).phrase}",
                [
                    ("Content-Type", _JSON_TYPE),
                    ("Content-Length", str(len(body))),
                    *(
                        (name.decode("latin-1"), value.decode("latin-1"))
                        for name, value in exc.headers
                    ),
                ],
            )
            return [body]
        return app(environ, start_response)

    return guarded
