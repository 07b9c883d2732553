"""A `LoopHistogram` is exposed exactly as prometheus_client's `Histogram` is for the same
observations, and a scrape from another thread always sees buckets that agree with their
`_count`."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import (
    CollectorRegistry,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
)
from prometheus_client import metrics as client_metrics
from prometheus_client.parser import text_string_to_metric_families

from runtime.metrics import LoopHistogram, MetricsServer, exposition

_CREATED = re.compile(r"^(\S+_created(?:\{[^}]*\})?) \S+$", re.MULTILINE)

_BUCKETS = st.lists(
    st.floats(0, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=8
).map(sorted)
# prometheus_client counts a NaN in no bucket, the LoopHistogram in the first (documented)
_AMOUNTS = st.floats(allow_nan=False) | st.integers(-5, 300)
_LABEL_VALUES = st.sampled_from(["a", "b", 'q"uo\\te', "é"])


def _pair(
    labelnames: list[str], buckets: list[float]
) -> tuple[CollectorRegistry, Histogram, CollectorRegistry, LoopHistogram]:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("h_seconds", "Help \\ with\nlines", labelnames, buckets=buckets,
                          registry=theirs)  # fmt: skip
    loop = LoopHistogram("h_seconds", "Help \\ with\nlines", labelnames, buckets=buckets,
                         registry=ours)  # fmt: skip
    return theirs, reference, ours, loop


def _without_created_times(text: bytes) -> str:
    return _CREATED.sub(r"\1 T", text.decode())


@given(_BUCKETS, st.lists(st.tuples(_LABEL_VALUES, _LABEL_VALUES, _AMOUNTS), max_size=60))
def test_labelled_exposition_is_prometheus_clients(
    buckets: list[float], observations: list[tuple[str, str, float]]
) -> None:
    theirs, reference, ours, loop = _pair(["first", "second"], buckets)
    for first, second, amount in observations:
        reference.labels(first, second).observe(amount)
        loop.labels(first, second).observe(amount)
    assert _without_created_times(exposition(ours)) == _without_created_times(exposition(theirs))


@given(_BUCKETS, st.lists(_AMOUNTS, max_size=60))
def test_unlabelled_exposition_is_prometheus_clients(
    buckets: list[float], amounts: list[float]
) -> None:
    theirs, reference, ours, loop = _pair([], buckets)
    for amount in amounts:
        reference.observe(amount)
        loop.labels().observe(amount)
    assert _without_created_times(exposition(ours)) == _without_created_times(exposition(theirs))


def test_created_series_follow_prometheus_clients_switch() -> None:
    theirs, reference, ours, loop = _pair(["node"], [0.001, 0.01, 1])
    for amount in (0.0005, 0.002, 3.0):
        reference.labels("n1").observe(amount)
        loop.labels("n1").observe(amount)
    created = exposition(ours).decode()
    assert "h_seconds_created{" in created and "# TYPE h_seconds_created gauge" in created
    was = client_metrics._use_created
    disable_created_metrics()
    try:
        assert exposition(ours) == exposition(theirs)
        assert b"_created" not in exposition(ours)
    finally:
        if was:
            enable_created_metrics()


def test_labels_returns_the_same_child_and_checks_its_arity() -> None:
    _, _, _, loop = _pair(["node"], [1.0])
    assert loop.labels("n1") is loop.labels("n1")
    with pytest.raises(ValueError, match=r"h_seconds takes labels \('node',\)"):
        loop.labels("n1", "extra")
    with pytest.raises(ValueError, match="use labels"):
        loop.observe(1.0)


def test_a_name_taken_in_the_registry_is_refused_as_prometheus_client_does() -> None:
    registry = CollectorRegistry()
    LoopHistogram("taken_seconds", "one", buckets=[1.0], registry=registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Histogram("taken_seconds", "two", buckets=[1.0], registry=registry)


@pytest.mark.parametrize("buckets", [[2.0, 1.0], [1.0, float("inf"), 2.0], [-1.0, 1.0], []])
def test_buckets_that_are_not_sorted_finite_bounds_are_refused(buckets: list[float]) -> None:
    with pytest.raises(ValueError, match=r"bad_seconds: buckets must be sorted"):
        LoopHistogram("bad_seconds", "bad", buckets=buckets, registry=CollectorRegistry())


def test_a_trailing_inf_bucket_is_the_one_prometheus_client_adds() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    Histogram("h", "h", buckets=[0.5, float("inf")], registry=theirs).observe(0.7)
    LoopHistogram("h", "h", buckets=[0.5, float("inf")], registry=ours).observe(0.7)
    assert _without_created_times(exposition(ours)) == _without_created_times(exposition(theirs))


_CHILDREN = 300


@pytest.fixture
def served() -> Iterator[tuple[LoopHistogram, str]]:
    registry = CollectorRegistry()
    loop = LoopHistogram("busy_seconds", "busy", ["op"], buckets=[0.1, 0.5, 2], registry=registry)
    server = MetricsServer(registry, "127.0.0.1", 0)
    server.start()
    try:
        yield loop, f"http://127.0.0.1:{server.port}/metrics"
    finally:
        server.stop()


def test_a_scrape_from_the_server_thread_sees_buckets_agreeing_with_count(
    served: tuple[LoopHistogram, str],
) -> None:
    loop, url = served
    stop = threading.Event()

    def observe() -> None:  # the one thread that observes, as the event loop would
        child, amounts = loop.labels("read"), (0.05, 0.3, 1.0, 7.0)
        i = 0
        while not stop.is_set():
            child.observe(amounts[i % 4])
            if i % 5_000 == 0 and i < _CHILDREN * 5_000:  # new children while scraped
                loop.labels(f"op{i}").observe(0.2)
            i += 1

    observer = threading.Thread(target=observe)
    observer.start()
    counts: list[float] = []
    try:
        with httpx.Client(trust_env=False) as client:
            series = 0
            while series < _CHILDREN + 1 or len(counts) < 20:
                response = client.get(url, timeout=5)
                assert response.status_code == 200, response.text
                series, count = _consistent_count(response.text)
                counts.append(count)
    finally:
        stop.set()
        observer.join()
    assert counts == sorted(counts), "a later scrape saw fewer observations"


def _consistent_count(text: str) -> tuple[int, float]:
    """The number of series in `text` and the `_count` of `op="read"`, every series'
    buckets checked against its `_count`."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    by_op: dict[str, dict[str, list[float]]] = {}
    for sample in families["busy_seconds"].samples:
        kind = sample.name.removeprefix("busy_seconds")
        by_op.setdefault(sample.labels["op"], {}).setdefault(kind, []).append(sample.value)
    for op, series in by_op.items():
        buckets, (count,) = series["_bucket"], series["_count"]
        assert buckets == sorted(buckets), f"{op}: buckets not cumulative: {buckets}"
        assert buckets[-1] == count, f"{op}: +Inf bucket {buckets[-1]} is not _count {count}"
    return len(by_op), by_op["read"]["_count"][0]
