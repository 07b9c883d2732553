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
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from wsgiref.simple_server import WSGIServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client import metrics as client_metrics
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from runtime.graphql_http import Send, send_body

__all__ = [
    "METRICS_PATH",
    "Collected",
    "LoopHistogram",
    "LoopHistogramChild",
    "MetricsServer",
    "bounded",
    "exposition",
    "send_metrics",
]

METRICS_PATH = "/metrics"
_CONTENT_TYPE = CONTENT_TYPE_LATEST.encode()


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry's metrics in the Prometheus text format."""
    return generate_latest(registry)


async def send_metrics(send: Send, registry: CollectorRegistry) -> None:
    """Answer `GET /metrics` with the registry's metrics."""
    await send_body(send, 200, exposition(registry), _CONTENT_TYPE)


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
    server of its own (the pipeline's driver)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry = registry
        self._address = (host, port)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from prometheus_client import start_http_server

        self._server, self._thread = start_http_server(
            self._address[1], self._address[0], registry=self._registry
        )

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
