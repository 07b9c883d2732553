"""Pipeline throughput per aggregate function, against a count view, in one Spark process.

`VIEWS` is the catalogue of a second pipeline this step starts beside the cluster's: a
count view and one aggregate view per function (COUNT, SUM, MIN, MAX and AVG of an
`amount`, COUNT_DISTINCT of a `product`), each on a topic of its own. The same burst of
JSON orders (Zipf-like customers as keys) goes to each topic in turn, and a changelog
consumer follows the view until every event is counted: a count row's `count`, an
aggregate row's position (the events it aggregated). Throughput = burst / (last event
counted - first produced), as in the throughput step; the ratio to the count view's rate
is the cost of the function (and of decoding the JSON value, which the count view skips).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import orjson
from confluent_kafka import Consumer, TopicPartition

from runtime.topics import ensure_topics, statefed_topics
from schema import (
    Aggregate,
    AggregateFunction,
    FieldType,
    ValueField,
    View,
    ViewKind,
    decode_count,
    decode_event,
)
from tests.bench.cpu import retire_descendants
from tests.bench.report import Report, fmt_num
from tests.bench.session import BenchSession
from tests.bench.throughput import Burst, count_burst, produce_burst
from tooling.processes import ManagedProcess

__all__ = ["NAME", "VIEWS", "measure"]

NAME = "aggregates"
TITLE = "Pipeline throughput per aggregate function vs count (Spark local[2])"
CATALOGUE = "tests.bench.aggregates:VIEWS"
_TIMEOUT_S = 120.0
_PRODUCTS = 500
_FIELDS = (ValueField("amount", FieldType.FLOAT), ValueField("product"))


def _aggregate_view(label: str, function: AggregateFunction, of: str | None) -> View:
    name = f"bench_{label}"
    type_name = "Bench" + "".join(part.title() for part in label.split("_"))
    field = type_name[0].lower() + type_name[1:]
    return View(
        name=name,
        topic=f"bench-{label.replace('_', '-')}",
        kind=ViewKind.AGGREGATE,
        key_field="customer",
        type_name=type_name,
        point_field=field,
        many_field=f"{field}Many",
        top_field=f"top{type_name}",
        value_fields=_FIELDS,
        aggregates=(Aggregate("result", function, of),),
    )


COUNT_VIEW = View(
    name="bench_count",
    topic="bench-count",
    kind=ViewKind.COUNT,
    key_field="customer",
    type_name="BenchCount",
    point_field="benchCount",
    many_field="benchCountMany",
    top_field="topBenchCount",
)
VIEWS: tuple[View, ...] = (
    COUNT_VIEW,
    _aggregate_view("count_events", AggregateFunction.COUNT, None),
    _aggregate_view("sum", AggregateFunction.SUM, "amount"),
    _aggregate_view("min", AggregateFunction.MIN, "amount"),
    _aggregate_view("max", AggregateFunction.MAX, "amount"),
    _aggregate_view("avg", AggregateFunction.AVG, "amount"),
    _aggregate_view("count_distinct", AggregateFunction.COUNT_DISTINCT, "product"),
)


def _orders(count: int, customers: int) -> list[tuple[bytes, bytes]]:
    """`count` (key, JSON value) orders of Zipf-like customers; values repeat, by reference."""
    rng = random.Random(0)
    keys = [f"c{rank:05d}".encode() for rank in range(1, customers + 1)]
    weights = [1.0 / rank**1.1 for rank in range(1, customers + 1)]
    values = [
        orjson.dumps({"amount": rng.randrange(1, 100_000) / 100, "product": f"p{i % _PRODUCTS}"})
        for i in range(4 * _PRODUCTS)
    ]
    return list(zip(rng.choices(keys, weights, k=count), rng.choices(values, k=count), strict=True))


def _events_of(view: View) -> Callable[[bytes], int]:
    """How many events a changelog row of `view` has counted."""
    if view.kind is ViewKind.COUNT:
        return lambda value: decode_count(value).count
    return lambda value: decode_event(value).source_offset


def _follow(session: BenchSession, view: View, burst: Burst, timeout_s: float) -> None:
    """Sum each key's latest event count in the view's changelog until it is the burst."""
    consumer = Consumer(
        {
            "bootstrap.servers": session.cluster.bootstrap,
            "group.id": f"bench-aggregates-{time.time_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        partitions = range(session.settings.partitions)
        consumer.assign([TopicPartition(view.changelog_topic, p, 0) for p in partitions])
        what = f"view {view.name}: the changelog"
        count_burst(consumer, burst, _events_of(view), timeout_s, what=what)
    finally:
        consumer.close()


def _run(session: BenchSession, view: View, orders: list[tuple[bytes, bytes]]) -> Burst:
    burst = Burst(len(orders))
    producing = threading.Thread(
        target=produce_burst,
        args=(session.cluster.bootstrap, view.topic, orders, burst),
        daemon=True,
    )
    producing.start()
    _follow(session, view, burst, session.timeout_s(_TIMEOUT_S))
    producing.join(30.0)
    return burst


def _start_pipeline(session: BenchSession) -> ManagedProcess:
    ensure_topics(session.cluster.bootstrap, statefed_topics(session.settings.partitions, VIEWS))
    workdir = session.settings.workdir
    env = session.cluster.env(
        STATEFED_CATALOGUE=CATALOGUE,
        STATEFED_CHECKPOINT_DIR=str(workdir / "aggregate-checkpoints"),
        # the session's pipeline serves /metrics on the port the cluster's env names
        STATEFED_PIPELINE_METRICS_PORT="",
    )
    process = ManagedProcess("aggregate pipeline", ["pipeline"], env, workdir / "aggregates.log")
    process.start()
    process.wait_for_log("statefed pipeline: ready", session.timeout_s(240))
    return process


def measure(session: BenchSession, report: Report) -> None:
    """One burst per view through a pipeline of `VIEWS`; rates and ratios to count."""
    section = report.section(NAME, TITLE)
    settings = session.settings
    orders = _orders(settings.aggregate_events, settings.throughput_vocabulary)
    process = _start_pipeline(session)
    try:
        bursts = {view.name: _run(session, view, orders) for view in VIEWS}
    finally:
        if process.pid is not None:
            retire_descendants(process.pid)
        process.stop()
    rates = {name: b.events / (b.progress[-1][0] - b.started) for name, b in bursts.items()}
    table = section.table("view", "computes", "events/s", "x count", "seconds")
    for view in VIEWS:
        rate, burst = rates[view.name], bursts[view.name]
        computes = (
            "count (no value decoded)"
            if not view.aggregates
            else f"{view.aggregates[0].function.value}({view.aggregates[0].of or ''})"
        )
        ratio = rate / rates[COUNT_VIEW.name]
        table.add(
            view.name,
            computes,
            fmt_num(rate),
            f"{ratio:.2f}x",
            f"{burst.progress[-1][0] - burst.started:.1f}",
        )
        section.figures[view.name] = {"events_per_s": round(rate), "x_count": round(ratio, 3)}
    section.figures["events"] = len(orders)
    section.notes.append(
        f"{fmt_num(len(orders))} orders per view over {settings.throughput_vocabulary:,} "
        f"customers ({_PRODUCTS} products), produced to each view's topic in turn while a "
        "second pipeline process runs these views only. The aggregate views decode the JSON "
        "value; the count view does not."
    )
