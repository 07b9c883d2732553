"""Aggregate views on the real cluster against the pure-Python reference (tests/aggregates.py):
hypothesis-generated orders (event times out of order, fields missing or mistyped) of
customers of their own, and every surface the gateway gives equals the reference: a key,
several keys, the scan by key and by each numeric result, the top-N by each numeric
result, federation's `_entities`, a lookup again (the cache's answer), and the view's
totals (over every order produced so far). The paid orders view holds only what its
`where` holds, and the sales per product are keyed and routed by a value field. A top-N
subscription by revenue, over Server-Sent Events, pushes the reference's top once the
orders are in.
The average basket per customer and hour, in windows of an hour starting every 15
minutes (`HOURLY_BASKETS`, a windowed aggregate view), equals the reference per key and
window: each key's windows, each window's top-N by count and by each result, and the
scan.
A pipeline SIGKILLed mid-stream replays from its checkpoint and counts nothing twice."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from runtime.produce import Record, produce_records
from schema import View, field_value, wire_value
from tests.aggregates import PRODUCTS, Event, Expected, orders, reference, windowed_reference
from tests.e2e.conftest import Cluster
from tests.orders import CUSTOMER_ORDERS, HOURLY_BASKETS, PAID_ORDERS, PRODUCT_SALES, paid
from tooling.processes import wait_until

TOP_LIMIT = 1000  # the gateway's most; these views hold only this file's keys
PRODUCED: list[Event] = []  # every order this module produced, for the views' totals
WHERES = {CUSTOMER_ORDERS.name: None, PAID_ORDERS.name: paid, PRODUCT_SALES.name: None}


def _selection(view: View) -> str:
    return " ".join([view.key_field, *(f.name for f in view.row_fields), "eventTime"])


def _wanted(view: View, key: str, expected: Expected) -> dict[str, Any]:
    """A row as the gateway must write it: each result in its type's wire form."""
    results = {
        f.name: wire_value(f.type, field_value(f.type, expected.results[f.name]))
        for f in view.row_fields
    }
    return {view.key_field: key, **results, "eventTime": expected.event_ms}


def _same(got: dict[str, Any] | None, want: dict[str, Any] | None) -> bool:
    if got is None or want is None:
        return got is want
    if set(got) != set(want):
        return False
    for name, value in want.items():
        have = got[name]
        if name == "eventTime":
            have = int(datetime.fromisoformat(have).timestamp() * 1000)
        if isinstance(value, float) and isinstance(have, int | float):
            if not math.isclose(have, value, rel_tol=1e-9, abs_tol=1e-9):
                return False
        elif have != value:
            return False
    return True


def _ranking(view: View, want: dict[str, dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """The rows of `want` with a value of `by`, greatest first, then by key."""
    ranked = [w for w in want.values() if w[by] is not None]
    ranked.sort(key=lambda w: (-float(w[by]), w[view.key_field]))
    return ranked


def _all_same(got: Sequence[dict[str, Any] | None], want: Sequence[dict[str, Any] | None]) -> bool:
    return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))


def _ranking_value(by: str) -> str:
    """The `<Type>Ranking` enum value of the result `by`: `firstProduct` -> FIRST_PRODUCT."""
    return "".join("_" + c if c.isupper() else c for c in by).upper()


def _scanned(
    cluster: Cluster,
    view: View,
    selection: str,
    filtered: tuple[str, str, dict[str, Any]],
    first: int = 20,
) -> list[dict[str, Any]]:
    """Every row of `view`'s scan, page by page of `first`: `filtered` is the scan's own
    variables as declared, its arguments naming them, and their values."""
    declared, arguments, variables = filtered
    query = (
        f"query({declared}, $a: String) {{ r: {view.scan_field}({arguments}, first: {first}, "
        f"after: $a) {{ edges {{ node {{ {selection} }} }} pageInfo {{ hasNextPage "
        "endCursor } } }"
    )
    rows: list[dict[str, Any]] = []
    after = None
    while True:
        page = cluster.data(query, {**variables, "a": after})["r"]
        rows += [edge["node"] for edge in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            return rows
        after = page["pageInfo"]["endCursor"]


class Surfaces:
    """What the gateway answers for the keys of one view that start with `prefix`."""

    def __init__(self, cluster: Cluster, view: View, prefix: str) -> None:
        self.cluster, self.view, self.prefix = cluster, view, prefix
        self.selection = _selection(view)

    def point(self, key: str) -> dict[str, Any] | None:
        query = f"query($k: String!) {{ r: {self.view.point_field}({self.view.key_field}: $k) "
        found: dict[str, Any] | None = self.cluster.data(
            query + f"{{ {self.selection} }} }}", {"k": key}
        )["r"]
        return found

    def many(self, keys: list[str]) -> list[dict[str, Any] | None]:
        argument = f"{self.view.many_field}({self.view.keys_arg}: $k)"
        query = f"query($k: [String!]!) {{ r: {argument} {{ {self.selection} }} }}"
        rows: list[dict[str, Any] | None] = self.cluster.data(query, {"k": keys})["r"]
        return rows

    def scan(self) -> list[dict[str, Any]]:
        by_prefix = ("$p: String!", "prefix: $p", {"p": self.prefix})
        return _scanned(self.cluster, self.view, self.selection, by_prefix)

    def scan_by(self, by: str) -> list[dict[str, Any]]:
        """The whole view by the result `by`, cut to this prefix's keys."""
        ranked = (f"$b: {self.view.type_name}Ranking", "by: $b", {"b": _ranking_value(by)})
        rows = _scanned(self.cluster, self.view, self.selection, ranked, first=7)
        return [r for r in rows if r[self.view.key_field].startswith(self.prefix)]

    def top(self, by: str) -> list[dict[str, Any]]:
        """The global top by `by`, cut to this prefix's keys (their order among themselves
        is the global order's)."""
        ranking = f"{self.view.type_name}Ranking"
        query = (
            f"query($l: Int!, $b: {ranking}!) {{ r: {self.view.top_field}(limit: $l, by: $b) "
            f"{{ {self.selection} }} }}"
        )
        rows = self.cluster.data(query, {"l": TOP_LIMIT, "b": _ranking_value(by)})["r"]
        return [r for r in rows if r[self.view.key_field].startswith(self.prefix)]

    def totals(self) -> dict[str, Any]:
        results = " ".join(f"{name} {{ sum min max }}" for name in self.view.ranked_fields)
        query = f"{{ r: {self.view.totals_field} {{ keys {results} }} }}"
        found: dict[str, Any] = self.cluster.data(query)["r"]
        return found

    def entities(self, keys: list[str]) -> list[dict[str, Any] | None]:
        name = self.view.type_name
        query = (
            "query($r: [_Any!]!) { _entities(representations: $r) "
            f"{{ ... on {name} {{ {self.selection} }} }} }}"
        )
        representations = [{"__typename": name, self.view.key_field: key} for key in keys]
        rows: list[dict[str, Any] | None] = self.cluster.data(query, {"r": representations})[
            "_entities"
        ]
        return [row or None for row in rows]


def _totals(view: View, everything: dict[str, Expected]) -> dict[str, Any]:
    """The view's totals after every order: its keys and, per numeric result, the sum (not
    of averages), least and greatest value over the keys that have one."""
    averaged = {a.name for a in view.aggregates if a.function.value == "avg"}
    totals: dict[str, Any] = {"keys": len(everything)}
    for name in view.ranked_fields:
        values = [
            float(e.results[name])
            for e in everything.values()
            if isinstance(e.results[name], int | float) and not isinstance(e.results[name], bool)
        ]
        totals[name] = (
            {
                "sum": None if name in averaged else math.fsum(values),
                "min": min(values),
                "max": max(values),
            }
            if values
            else None
        )
    return totals


def _totals_agree(got: dict[str, Any], want: dict[str, Any]) -> bool:
    if set(got) != set(want) or got["keys"] != want["keys"]:
        return False
    for name, wanted in want.items():
        if name == "keys" or wanted is None or got[name] is None:
            if got[name] != wanted:
                return False
            continue
        for part, value in wanted.items():
            have = got[name][part]
            if (value is None) != (have is None):
                return False
            if value is not None and not math.isclose(have, value, rel_tol=1e-9, abs_tol=1e-6):
                return False
    return True


def _differences(
    surfaces: Surfaces, expected: dict[str, Expected], keys: list[str], totals: dict[str, Any]
) -> list[str]:
    """What of the gateway's answers differs from `expected`: empty when every surface agrees."""
    view = surfaces.view
    want = {key: _wanted(view, key, e) for key, e in expected.items()}
    wrong = []
    in_order = [want.get(key) for key in keys]
    for name, got in (
        ("points", [surfaces.point(key) for key in keys]),
        ("many", surfaces.many(keys)),
        ("entities", surfaces.entities(keys)),
    ):
        if not _all_same(got, in_order):
            wrong.append(f"{name}: {got} != {in_order}")
    scanned = surfaces.scan()
    if not _all_same(list(scanned), [want[key] for key in sorted(want, key=str.encode)]):
        wrong.append(f"scan: {scanned} != {want}")
    for by in view.ranked_fields:
        ranked = _ranking(view, want, by)
        top = surfaces.top(by)
        if not _all_same(list(top), list(ranked)):
            wrong.append(f"top by {by}: {top} != {ranked}")
        scanned_by = surfaces.scan_by(by)
        if not _all_same(scanned_by, ranked):
            wrong.append(f"scan by {by}: {scanned_by} != {ranked}")
    answered = surfaces.totals()
    if not _totals_agree(answered, totals):
        wrong.append(f"totals: {answered} != {totals}")
    return wrong


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


class WindowSurfaces:
    """What the gateway answers of windowed aggregate view HOURLY_BASKETS for the keys
    that start with `prefix`: each key's windows, the top of each window, the scan."""

    view = HOURLY_BASKETS

    def __init__(self, cluster: Cluster, prefix: str) -> None:
        self.cluster, self.prefix = cluster, prefix
        results = " ".join(f.name for f in self.view.row_fields)
        self.selection = f"{self.view.key_field} start end count {results}"

    def _rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**r, "start": _ms(r["start"]), "end": _ms(r["end"])} for r in rows]

    def windows(self, key: str) -> list[dict[str, Any]]:
        query = (
            f"query($k: String!) {{ r: {self.view.point_field}({self.view.key_field}: $k) "
            f"{{ {self.selection} }} }}"
        )
        return self._rows(self.cluster.data(query, {"k": key})["r"])

    def top(self, start_ms: int, by: str | None = None) -> list[dict[str, Any]]:
        """The top of the window starting at `start_ms`, by count or by the result `by`."""
        query = (
            f"query($l: Int!, $w: WindowInput!, $b: {self.view.type_name}Ranking) {{ r: "
            f"{self.view.top_field}(limit: $l, window: $w, by: $b) {{ {self.selection} }} }}"
        )
        window = {"start": datetime.fromtimestamp(start_ms / 1000, UTC).isoformat()}
        ranking = None if by is None else _ranking_value(by)
        rows = self.cluster.data(query, {"l": TOP_LIMIT, "w": window, "b": ranking})["r"]
        return self._rows([r for r in rows if r[self.view.key_field].startswith(self.prefix)])

    def scan(self) -> list[dict[str, Any]]:
        by_prefix = ("$p: String!", "prefix: $p", {"p": self.prefix})
        return self._rows(_scanned(self.cluster, self.view, self.selection, by_prefix))


def _wanted_windows(produced: list[Event]) -> dict[tuple[str, int], dict[str, Any]]:
    """Each (key, start)'s window as the gateway must write it (start and end in ms)."""
    view, windows = HOURLY_BASKETS, windowed_reference(HOURLY_BASKETS, produced)
    assert view.window is not None
    wanted = {}
    for (key, start), e in windows.items():
        results = {
            f.name: wire_value(f.type, field_value(f.type, e.results[f.name]))
            for f in view.row_fields
        }
        end = start + view.window.size_ms
        wanted[(key, start)] = {
            view.key_field: key,
            "start": start,
            "end": end,
            "count": e.events,
            **results,
        }
    return wanted


def _window_differences(
    surfaces: WindowSurfaces, produced: list[Event], keys: list[str]
) -> list[str]:
    """What of the gateway's windows differs from the reference's: empty when all agree."""
    want = _wanted_windows(produced)
    wrong = []
    for key in keys:
        mine = [want[at] for at in sorted(at for at in want if at[0] == key)]
        got = surfaces.windows(key)
        if not _all_same(got, mine):
            wrong.append(f"windows of {key}: {got} != {mine}")
    for start in sorted({start for _, start in want}):
        ranked = [w for (_, s), w in want.items() if s == start]
        ranked.sort(key=lambda w: (-w["count"], w["customer"].encode()))
        top = surfaces.top(start)
        if not _all_same(top, ranked):
            wrong.append(f"top of {start}: {top} != {ranked}")
        for by in HOURLY_BASKETS.ranked_fields:
            by_result = _ranking(HOURLY_BASKETS, {w["customer"]: w for w in ranked}, by)
            top_by = surfaces.top(start, by)
            if not _all_same(top_by, by_result):
                wrong.append(f"top of {start} by {by}: {top_by} != {by_result}")
    in_order = [want[at] for at in sorted(want, key=lambda at: (at[0].encode(), at[1]))]
    scanned = surfaces.scan()
    if not _all_same(scanned, in_order):
        wrong.append(f"scan: {scanned} != {in_order}")
    return wrong


def _produce(cluster: Cluster, events: list[Event]) -> None:
    PRODUCED.extend(events)
    records = [Record(e.key, orjson.dumps({**e.value, "timestamp": e.event_ms})) for e in events]
    produce_records(cluster.local.kafka, CUSTOMER_ORDERS.topic, records)


def _customers(prefix: str) -> list[str]:
    return [f"{prefix}-{name}" for name in ("ann", "bo", "cé", "dan", "日本")]


def _own(prefix: str, events: list[Event]) -> list[Event]:
    """`events` with customers and products of the example's own (`prefix`), so each
    example's keys are new in every view."""
    renamed = dict(zip(_customers("x"), _customers(prefix), strict=True))
    owned = []
    for event in events:
        value = dict(event.value)
        if isinstance(value.get("product"), str):
            value["product"] = f"{prefix}-{value['product']}"
        owned.append(Event(renamed[event.key], event.event_ms, value))
    return owned


def _wait_view(
    surfaces: Surfaces, expected: dict[str, Expected], keys: list[str], totals: dict[str, Any]
) -> None:
    found: list[str] = []

    def equal() -> bool:
        found[:] = _differences(surfaces, expected, keys, totals)
        return not found

    wait_until(equal, 120, lambda: f"view {surfaces.view.name}: {found}", 0.5)
    # and again: the lookups the gateway caches now answer from its cache
    assert _differences(surfaces, expected, keys, totals) == []


def _wait_equal(cluster: Cluster, prefix: str, produced: list[Event]) -> None:
    customers = [*_customers(prefix), f"{prefix}-nobody"]
    products = [f"{prefix}-{name}" for name in (*PRODUCTS, "nothing")]
    for view, keys in (
        (CUSTOMER_ORDERS, customers),
        (PAID_ORDERS, customers),
        (PRODUCT_SALES, products),
    ):
        expected = reference(view, produced, WHERES[view.name])
        totals = _totals(view, reference(view, PRODUCED, WHERES[view.name]))
        _wait_view(Surfaces(cluster, view, prefix), expected, keys, totals)
    windows = WindowSurfaces(cluster, prefix)
    found: list[str] = []

    def windows_equal() -> bool:
        found[:] = _window_differences(windows, produced, customers)
        return not found

    wait_until(windows_equal, 120, lambda: f"view {HOURLY_BASKETS.name}: {found}", 0.5)


@settings(
    max_examples=3,
    phases=[Phase.generate],  # each example is customers of its own: nothing to shrink
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=orders(_customers("x"), max_size=60))
def test_every_surface_equals_the_reference(grown_cluster: Cluster, data: list[Event]) -> None:
    prefix = uuid.uuid4().hex[:8]
    events = _own(prefix, data)
    _produce(grown_cluster, events)
    _wait_equal(grown_cluster, prefix, events)


@settings(
    max_examples=1,
    phases=[Phase.generate],
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rounds=st.tuples(orders(_customers("x"), 200), orders(_customers("x"), 200)))
def test_a_pipeline_killed_mid_stream_counts_nothing_twice(
    grown_cluster: Cluster, rounds: tuple[list[Event], list[Event]]
) -> None:
    prefix = uuid.uuid4().hex[:8]
    first, second = (_own(prefix, r) for r in rounds)
    local = grown_cluster.local
    _produce(grown_cluster, first)
    _wait_equal(grown_cluster, prefix, first)
    _produce(grown_cluster, second)
    assert local.pipeline is not None
    local.pipeline.kill()  # while it reads the second round, or before it commits it
    local.start_pipeline()
    _wait_equal(grown_cluster, prefix, [*first, *second])


class TopWatcher:
    """A top-N subscription over Server-Sent Events, read in a thread: each pushed top, cut
    to the keys starting with `prefix`, until the test ends it."""

    def __init__(self, cluster: Cluster, view: View, by: str, prefix: str) -> None:
        self.url = cluster.local.gateway_url + "/stream"
        self.query = (
            f"subscription {{ r: {view.top_field}(limit: {TOP_LIMIT}, by: {by}, "
            f"interval: 100) {{ rows {{ {_selection(view)} }} }} }}"
        )
        self.key, self.prefix = view.key_field, prefix
        self.tops: list[list[dict[str, Any]]] = []
        self.started = threading.Event()
        self._client = httpx.Client(timeout=120)
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> TopWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()  # ends the stream, and with it the thread
        self._thread.join(30)

    def _read(self) -> None:
        headers = {"accept": "text/event-stream"}
        body = {"query": self.query}
        try:
            with self._client.stream("POST", self.url, json=body, headers=headers) as response:
                self.started.set()
                for line in response.iter_lines():
                    if line.startswith("data:") and '"rows"' in line:
                        rows = orjson.loads(line[5:])["data"]["r"]["rows"]
                        self.tops.append([r for r in rows if r[self.key].startswith(self.prefix)])
        except (httpx.HTTPError, RuntimeError):
            return  # closed by __exit__: the assertions say what was missing


def test_a_top_subscription_by_a_result_pushes_the_reference_top(grown_cluster: Cluster) -> None:
    prefix = uuid.uuid4().hex[:8]
    ann, bo, ce = _customers(prefix)[:3]
    events = [
        Event(ann, 1, {"amount": 5.0, "product": "tea", "status": "PAID"}),
        Event(bo, 2, {"amount": 30.0, "product": "mug", "status": "PAID"}),
        Event(ce, 3, {"amount": 12.5, "product": "tea", "status": "NEW"}),
        Event(ann, 4, {"amount": 40.0, "product": "pot", "status": "PAID"}),
    ]
    view, by = CUSTOMER_ORDERS, "revenue"
    expected = reference(view, events, None)
    want = {key: _wanted(view, key, e) for key, e in expected.items()}
    ranked = _ranking(view, want, by)
    assert [r[view.key_field] for r in ranked] == [ann, bo, ce]
    with TopWatcher(grown_cluster, view, "REVENUE", prefix) as watcher:
        assert watcher.started.wait(30), "the subscription did not start"
        wait_until(lambda: watcher.tops != [], 30, "the subscription's first top")
        _produce(grown_cluster, events)
        wait_until(
            lambda: bool(watcher.tops) and _all_same(watcher.tops[-1], ranked),
            90,
            lambda: f"the pushed top {watcher.tops[-1:]} to be {ranked}",
        )
    assert watcher.tops[0] == [], "the first top holds none of the keys produced after it"
