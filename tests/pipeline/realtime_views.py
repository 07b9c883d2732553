"""Views of an orders topic in both pipeline modes (`STATEFED_CATALOGUE` of the driver
SIGKILL test, and twinned over fresh topics by tests/pipeline/test_realtime.py): a count,
a latest and an aggregate view, each once in Real-Time Mode and once in micro-batches."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from schema import CountRow, EventRow, PipelineMode, View, ViewKind, decode_count, decode_event
from tests.aggregates import same_results
from tests.orders import CUSTOMER_ORDERS

ORDER_COUNTS = View(
    name="order_counts",
    topic="orders",
    kind=ViewKind.COUNT,
    key_field="customer",
    type_name="OrderCount",
    point_field="orderCount",
    many_field="orderCounts",
    top_field="topOrderCounts",
    event_time_field="timestamp",
)
LAST_ORDER = View(
    name="last_order",
    topic="orders",
    kind=ViewKind.LATEST,
    key_field="customer",
    type_name="LastOrder",
    point_field="lastOrder",
    many_field="lastOrders",
    event_time_field="timestamp",
    value_fields=CUSTOMER_ORDERS.value_fields,
)
MODES = (("rt", PipelineMode.REAL_TIME), ("mb", PipelineMode.MICRO_BATCH))


def twins(views: tuple[View, ...], topic: str, suffix: str = "") -> list[tuple[View, View]]:
    """(Real-Time Mode, micro-batch) copies of each of `views`, reading `topic`; names end
    in `_rt<suffix>` and `_mb<suffix>`, type names in `Rt`/`Mb` (one schema may show both)."""
    return [
        tuple(  # type: ignore[misc]
            dataclasses.replace(
                v,
                name=f"{v.name}_{tag}{suffix}",
                topic=topic,
                pipeline_mode=mode,
                type_name=f"{v.type_name}{tag.title()}",
                point_field=f"{v.point_field}{tag.title()}",
                many_field=f"{v.many_field}{tag.title()}" if v.many_field else "",
                top_field=f"{v.top_field}{tag.title()}" if v.top_field else "",
            )
            for tag, mode in MODES
        )
        for v in views
    ]


TOPIC = "test.realtime.orders"
PAIRS = twins((ORDER_COUNTS, LAST_ORDER, CUSTOMER_ORDERS), TOPIC)
CATALOGUE = tuple(v for pair in PAIRS for v in pair)
SPEC = "tests.pipeline.realtime_views:CATALOGUE"


def decoded(view: View, value: bytes) -> CountRow | EventRow:
    """A changelog value of one of these views."""
    return decode_count(value) if view.kind is ViewKind.COUNT else decode_event(value)


def differences(got: Mapping[Any, Any], want: Mapping[Any, Any]) -> dict[str, Any]:
    """The keys whose rows differ between two twins' rows (results within 1e-9, as Spark
    may add them in another order)."""
    found = {}
    for key in sorted(got.keys() | want.keys()):
        a, b = got.get(key), want.get(key)
        if isinstance(a, EventRow) and isinstance(b, EventRow):
            same = dataclasses.replace(a, fields={}) == dataclasses.replace(
                b, fields={}
            ) and same_results(a.fields, b.fields)
        else:
            same = a == b
        if not same:
            found[key.decode(errors="replace") if isinstance(key, bytes) else key] = (a, b)
    return found
