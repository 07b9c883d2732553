"""Whole-view scans on real parts: the embedded broker, real nodes (LevelDB, uvicorn) fed
by changelog records written as the pipeline writes them, and the gateway under uvicorn.

Hypothesis generates keys (non-ASCII, NUL, keys that are prefixes of each other) for the
four view kinds; paging the whole view forwards and backwards, with random page sizes,
prefixes and key ranges, must give exactly the sorted truth, over one node and then over
three; so must the count view by count, and the windowed view by (start, key) and one
window's keys by count. Each example writes under a namespace of its own, which every
scan of it adds to its prefix (and to `from` and `to`).
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gateway.cluster.pipeline import StatusBoard
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from runtime.clock import wall_clock_ms
from runtime.topics import ensure_topics, statefed_topics
from schema import (
    DEMO_DOMAIN,
    WORD_COUNTS,
    CountRow,
    EventRow,
    View,
    WindowRow,
    encode_count,
    encode_event,
    encode_window,
    event_record_key,
    partition_for,
    window_record_key,
)
from tests.gateway.fakes import ServerThread
from tests.node.harness import P, ThreadNode, node_config, produce_changelog
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(600)

MINUTE = 60_000
_namespaces = itertools.count()
# short alphabets: keys are often prefixes of each other, hold NUL, non-ASCII, astral
key_texts = st.text(alphabet=st.sampled_from(["a", "b", "\x00", "é", "\U0001f600"]), max_size=3)
Record = tuple[bytes, bytes | None, int]
Truth = tuple[Any, ...]


def unique_views() -> tuple[View, View, View, View, View]:
    """One view of each kind with the built-in GraphQL names, on topics of their own."""
    tag = uuid.uuid4().hex[:8]
    return tuple(  # type: ignore[return-value]
        dataclasses.replace(v, name=f"s{tag}_{v.name}", topic=f"s{tag}.{v.topic}")
        for v in (WORD_COUNTS, *DEMO_DOMAIN[1:])
    )


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@dataclass(frozen=True)
class Kind:
    """How the test writes and reads one view kind: its changelog records and truth rows
    for the keys of an example, what a scan selects and how an edge's node reads back."""

    records: Callable[[list[str], int], tuple[list[Record], list[Truth]]]
    selection: str
    read: Callable[[dict[str, Any]], Truth]


def _counts(keys: list[str], now: int) -> tuple[list[Record], list[Truth]]:
    rows = [CountRow(k, i + 1, now) for i, k in enumerate(keys)]
    records: list[Record] = [
        (r.key.encode(), encode_count(r), partition_for(r.key, P)) for r in rows
    ]
    return records, [(r.key, r.count) for r in rows]


def _windows(keys: list[str], now: int) -> tuple[list[Record], list[Truth]]:
    base = now - now % MINUTE - 10 * MINUTE
    rows = [
        WindowRow(k, base + w * MINUTE, base + (w + 1) * MINUTE, i + w + 1, base)
        for i, k in enumerate(keys)
        for w in range(i % 3 + 1)
    ]
    records: list[Record] = [
        (window_record_key(r), encode_window(r), partition_for(r.key, P)) for r in rows
    ]
    return records, [(r.key, r.start_ms, r.count) for r in rows]


def _latest(keys: list[str], now: int) -> tuple[list[Record], list[Truth]]:
    rows = [EventRow(k, now + i, 0, i, {"trip": f"t{i}"}) for i, k in enumerate(keys)]
    records: list[Record] = [
        (r.key.encode(), encode_event(r), partition_for(r.key, P)) for r in rows
    ]
    return records, [(r.key, r.fields["trip"]) for r in rows]


def _history(keys: list[str], now: int) -> tuple[list[Record], list[Truth]]:
    rows = [
        EventRow(k, now - j * 1000, 0, i * 10 + j, {"trip": f"t{i}-{j}"})
        for i, k in enumerate(keys)
        for j in range(i % 3 + 1)
    ]
    records: list[Record] = [
        (event_record_key(r), encode_event(r), partition_for(r.key, P)) for r in rows
    ]
    return records, [(r.key, r.event_ms, r.fields["trip"]) for r in rows]


def _aggregates(keys: list[str], now: int) -> tuple[list[Record], list[Truth]]:
    """Rows of the demo's host_pages: a key's views and distinct pages."""
    rows = [
        EventRow(k, now, 0, i + 1, {"views": i + 1, "pages": i % 3}) for i, k in enumerate(keys)
    ]
    records: list[Record] = [
        (r.key.encode(), encode_event(r), partition_for(r.key, P)) for r in rows
    ]
    return records, [(r.key, r.fields["views"], r.fields["pages"]) for r in rows]


KINDS = (
    Kind(_counts, "word count", lambda n: (n["word"], n["count"])),
    Kind(_windows, "host start count", lambda n: (n["host"], _ms(n["start"]), n["count"])),
    Kind(_latest, "customer trip", lambda n: (n["customer"], n["trip"])),
    Kind(
        _history,
        "customer eventTime trip",
        lambda n: (n["customer"], _ms(n["eventTime"]), n["trip"]),
    ),
    Kind(_aggregates, "host views pages", lambda n: (n["host"], n["views"], n["pages"])),
)


def _order(row: Truth) -> tuple[Any, ...]:
    return (row[0].encode("utf-8"), *row[1:])


@dataclass(frozen=True)
class Scan:
    """One scan's arguments besides the page: prefix, from and to (None: open)."""

    prefix: str
    since: str | None = None
    until: str | None = None

    def keeps(self, key: str) -> bool:
        data = key.encode("utf-8")
        return (
            data.startswith(self.prefix.encode("utf-8"))
            and (self.since is None or data >= self.since.encode("utf-8"))
            and (self.until is None or data < self.until.encode("utf-8"))
        )


def _query(view: View, kind: Kind) -> str:
    return (
        "query($n: Int, $a: String, $l: Int, $b: String, $x: String!, $f: String, $t: String)"
        f"{{ r: {view.scan_field}(first: $n, after: $a, last: $l, before: $b, prefix: $x, "
        f"from: $f, to: $t) {{ edges {{ cursor node {{ {kind.selection} }} }} "
        "pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"
    )


def scan_pages(
    http: httpx.Client,
    view: View,
    kind: Kind,
    scan: Scan,
    sizes: list[int],
    backward: bool,
    max_pages: int = 10_000,
) -> list[Truth]:
    """Every row the scan pages through, in the order read (descending when `backward`)."""
    found: list[Truth] = []
    cursor = None
    for turn in range(max_pages):
        size = sizes[turn % len(sizes)]
        variables: dict[str, Any] = {"x": scan.prefix, "f": scan.since, "t": scan.until}
        variables.update({"l": size, "b": cursor} if backward else {"n": size, "a": cursor})
        body = http.post("/graphql", json={"query": _query(view, kind), "variables": variables})
        document = body.json()
        assert "errors" not in document, document
        page = document["data"]["r"]
        rows = [kind.read(edge["node"]) for edge in page["edges"]]
        assert len(rows) <= size and rows == sorted(rows, key=_order)
        found.extend(reversed(rows) if backward else rows)
        info = page["pageInfo"]
        if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
            return found
        cursor = info["startCursor"] if backward else info["endCursor"]
    raise AssertionError(f"no end after {max_pages} pages")


@pytest.fixture
def views(broker: KafkaBroker) -> tuple[View, ...]:
    made = unique_views()
    ensure_topics(broker.bootstrap, statefed_topics(P, made))
    return made


def _settled(nodes: list[ThreadNode]) -> bool:
    """Every node RUNNING, the partitions split among them, no copy restoring."""
    states = [n.health() for n in nodes]
    active = sorted(p for h in states for p in h["active"])
    return (
        all(h["state"] == "RUNNING" and h["active"] for h in states)
        and active == list(range(P))
        and not any(c["restoring"] for h in states for c in h["partitions"])
    )


def _routed(http: httpx.Client, nodes: list[ThreadNode]) -> bool:
    doc = http.get("/health").json()
    alive = {n["id"] for n in doc["nodes"] if n["alive"]}
    return doc["routable"] == list(range(P)) and {n.config.node_id for n in nodes} <= alive


@pytest.fixture
def gateway(broker: KafkaBroker, views: tuple[View, ...]) -> Iterator[httpx.Client]:
    app = GatewayApp(
        GatewayConfig(bootstrap=broker.bootstrap, timeout_ms=5000),
        statuses=StatusBoard(),
        catalogue=views,
    )
    with (
        ServerThread(app, lifespan="on") as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        yield http


@pytest.fixture
def nodes(
    broker: KafkaBroker, tmp_path: Path, views: tuple[View, ...]
) -> Iterator[list[ThreadNode]]:
    group = f"g-{uuid.uuid4().hex[:8]}"
    started: list[ThreadNode] = []

    def start(count: int) -> list[ThreadNode]:
        for _ in range(count):
            config = node_config(broker.bootstrap, tmp_path, f"s{uuid.uuid4().hex[:6]}", group)
            started.append(ThreadNode(config, views).start())
        return started

    start(1)
    yield started
    for node in started:
        node.stop()


def _write_example(
    broker: KafkaBroker, views: tuple[View, ...], keys: list[str]
) -> list[list[Truth]]:
    now = wall_clock_ms()
    truths = []
    for view, kind in zip(views, KINDS, strict=True):
        records, truth = kind.records(keys, now)
        produce_changelog(broker.bootstrap, view, records)
        truths.append(sorted(truth, key=_order))
    return truths


def _check_views(
    broker: KafkaBroker,
    views: tuple[View, ...],
    http: httpx.Client,
    examples: int,
    counts: dict[str, int],
    windows: dict[tuple[str, int], int],
) -> int:
    """Runs the examples, adding the count view's rows to `counts` and the windowed view's
    to `windows`; returns how many rows their filtered scans compared."""
    compared = [0]

    @settings(
        max_examples=examples,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # each example costs real round trips
        suppress_health_check=list(HealthCheck),
    )
    @given(
        keys=st.lists(key_texts.filter(bool), unique=True, max_size=12),
        prefix=st.just("") | key_texts,  # often the whole example, else a part or nothing
        since=st.none() | key_texts,
        until=st.none() | key_texts,
        sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    )
    def example(
        keys: list[str], prefix: str, since: str | None, until: str | None, sizes: list[int]
    ) -> None:
        namespace = f"n{next(_namespaces)}-{uuid.uuid4().hex[:4]}/"
        if since is not None and until is not None and since > until:
            since, until = until, since  # a from after the to is BAD_USER_INPUT
        full = [namespace + k for k in keys]
        truths = _write_example(broker, views, full)
        counts.update(dict(truths[0]))
        windows.update({(key, start): count for key, start, count in truths[1]})
        whole = Scan(namespace)
        for view, kind, truth in zip(views, KINDS, truths, strict=True):

            def shown(v: View = view, k: Kind = kind, t: list[Truth] = truth) -> bool:
                return scan_pages(http, v, k, whole, [1000], False) == t

            wait_until(shown, 30, f"{view.scan_field} to show the example's {len(truth)} rows", 0.1)
            scan = Scan(
                namespace + prefix,
                None if since is None else namespace + since,
                None if until is None else namespace + until,
            )
            expected = [row for row in truth if scan.keeps(row[0])]
            assert scan_pages(http, view, kind, scan, sizes, False) == expected
            assert scan_pages(http, view, kind, scan, sizes, True) == expected[::-1]
            compared[0] += len(expected)

    example()
    return compared[0]


def _check_totals(
    http: httpx.Client,
    views: tuple[View, ...],
    counts: dict[str, int],
    windows: dict[tuple[str, int], int],
) -> None:
    """The totals the partitions keep add up to every example's rows."""
    query = (
        f"{{ c: {views[0].totals_field} {{ keys count }} "
        f"w: {views[1].totals_field} {{ start keys count }} }}"
    )
    document = http.post("/graphql", json={"query": query}).json()
    assert "errors" not in document, document
    assert document["data"]["c"] == {"keys": len(counts), "count": sum(counts.values())}
    per_window: dict[int, list[int]] = {}
    for (_, start), count in windows.items():
        per_window.setdefault(start, []).append(count)
    expected = [(start, len(c), sum(c)) for start, c in sorted(per_window.items())]
    found = [(_ms(w["start"]), w["keys"], w["count"]) for w in document["data"]["w"]]
    assert found == expected


def _check_count_order(http: httpx.Client, view: View, counts: dict[str, int]) -> None:
    """The count view paged by count (desc, then key) is every example's rows in that order;
    a cursor of the key order is refused there."""
    ordered = Kind(_counts, "word count", KINDS[0].read)
    query = _query(view, ordered).replace("to: $t)", "to: $t, order: COUNT)")
    expected = sorted(counts.items(), key=lambda kc: (-kc[1], kc[0].encode("utf-8")))
    for backward in (False, True):
        found: list[Truth] = []
        cursor = None
        for turn in itertools.count():
            assert turn < 1000, "the scan does not end"
            size = (3, 11, 1)[turn % 3]
            variables: dict[str, Any] = {"x": ""}
            variables.update({"l": size, "b": cursor} if backward else {"n": size, "a": cursor})
            document = http.post("/graphql", json={"query": query, "variables": variables}).json()
            assert "errors" not in document, document
            page = document["data"]["r"]
            rows = [ordered.read(e["node"]) for e in page["edges"]]
            found.extend(reversed(rows) if backward else rows)
            info = page["pageInfo"]
            if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
                break
            cursor = info["startCursor"] if backward else info["endCursor"]
        assert found == (expected[::-1] if backward else expected)
    key_page = http.post(
        "/graphql", json={"query": _query(view, ordered), "variables": {"x": "", "n": 1}}
    ).json()["data"]["r"]
    variables = {"x": "", "n": 1, "a": key_page["pageInfo"]["endCursor"]}
    refused = http.post("/graphql", json={"query": query, "variables": variables}).json()
    assert refused["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", refused
    assert "after: the cursor is a cursor of view" in refused["errors"][0]["message"]


def _page_through(
    http: httpx.Client, query: str, given: dict[str, Any], read: Callable[[Any], Truth]
) -> tuple[list[Truth], list[Truth]]:
    """Every row of the scan `query` paged forwards, then backwards (in the order read),
    with page sizes 3, 11 and 1 in turn."""
    both = []
    for backward in (False, True):
        found: list[Truth] = []
        cursor = None
        for turn in itertools.count():
            assert turn < 1000, "the scan does not end"
            size = (3, 11, 1)[turn % 3]
            variables = dict(given)
            variables.update({"l": size, "b": cursor} if backward else {"n": size, "a": cursor})
            document = http.post("/graphql", json={"query": query, "variables": variables}).json()
            assert "errors" not in document, document
            page = document["data"]["r"]
            rows = [read(edge["node"]) for edge in page["edges"]]
            found.extend(reversed(rows) if backward else rows)
            info = page["pageInfo"]
            if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
                break
            cursor = info["startCursor"] if backward else info["endCursor"]
        both.append(found)
    return both[0], both[1]


def _check_window_orders(
    http: httpx.Client, view: View, windows: dict[tuple[str, int], int]
) -> None:
    """The windowed view paged by (start, key) over a range of starts, and one window's keys
    by count (desc, then key), is every example's windows in that order; a cursor of one
    window is refused for another."""
    read = KINDS[1].read
    base = (
        "query($n: Int, $a: String, $l: Int, $b: String, $sf: DateTime, $st: DateTime, "
        "$w: WindowInput) { r: %s(first: $n, after: $a, last: $l, before: $b, order: %s, "
        "startFrom: $sf, startTo: $st, window: $w) { edges { cursor node { host start count } } "
        "pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"
    )
    starts = sorted({start for _, start in windows})
    iso = {s: datetime.fromtimestamp(s / 1000, UTC).isoformat() for s in starts}
    rows = [(key, start, count) for (key, start), count in windows.items()]
    by_start = sorted(rows, key=lambda r: (r[1], r[0].encode("utf-8")))
    for since, until in ((None, None), (starts[len(starts) // 2], starts[-1])):
        variables = {"sf": since and iso[since], "st": until and iso[until]}
        expected = [
            r
            for r in by_start
            if (since is None or r[1] >= since) and (until is None or r[1] < until)
        ]
        forwards, backwards = _page_through(
            http, base % (view.scan_field, "START"), variables, read
        )
        assert forwards == expected and backwards == expected[::-1]
    cursors = {}
    for start in starts[-2:]:
        expected = sorted(
            (r for r in rows if r[1] == start), key=lambda r: (-r[2], r[0].encode("utf-8"))
        )
        window = {"w": {"start": iso[start]}}
        forwards, backwards = _page_through(http, base % (view.scan_field, "COUNT"), window, read)
        assert forwards == expected and backwards == expected[::-1]
        page = http.post(
            "/graphql",
            json={"query": base % (view.scan_field, "COUNT"), "variables": {**window, "n": 1}},
        ).json()
        cursors[start] = page["data"]["r"]["pageInfo"]["endCursor"]
    if len(starts) > 1:
        other = {"w": {"start": iso[starts[-2]]}, "n": 1, "a": cursors[starts[-1]]}
        refused = http.post(
            "/graphql", json={"query": base % (view.scan_field, "COUNT"), "variables": other}
        ).json()
        assert refused["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", refused
        assert "window or time range" in refused["errors"][0]["message"]


def test_paging_every_view_kind_equals_the_sorted_truth_over_one_and_three_nodes(
    broker: KafkaBroker,
    views: tuple[View, ...],
    nodes: list[ThreadNode],
    gateway: httpx.Client,
) -> None:
    wait_until(lambda: _settled(nodes), 60, "one node RUNNING with every partition")
    wait_until(lambda: _routed(gateway, nodes), 30, "the gateway to route the node")
    counts: dict[str, int] = {}
    windows: dict[tuple[str, int], int] = {}
    one = _check_views(broker, views, gateway, 15, counts, windows)
    _check_count_order(gateway, views[0], counts)
    _check_window_orders(gateway, views[1], windows)
    _check_totals(gateway, views, counts, windows)
    for _ in range(2):
        config = node_config(
            broker.bootstrap,
            nodes[0].config.state_dir.parent,
            f"s{uuid.uuid4().hex[:6]}",
            nodes[0].config.group_id,
        )
        nodes.append(ThreadNode(config, views).start())
    wait_until(lambda: _settled(nodes), 90, "three nodes RUNNING, the partitions split")
    wait_until(lambda: _routed(gateway, nodes), 30, "the gateway to route three nodes")
    three = _check_views(broker, views, gateway, 15, counts, windows)
    _check_count_order(gateway, views[0], counts)
    _check_window_orders(gateway, views[1], windows)
    _check_totals(gateway, views, counts, windows)
    print(f"rows compared: {one} over one node, {three} over three")
    assert one and three, "the examples compared no rows"


LOOKUP = "query($ws: [String!]!) { wordCounts(words: $ws) { word count } }"


def _put_counts(
    broker: KafkaBroker, http: httpx.Client, view: View, counts: dict[str, int]
) -> None:
    """Write `counts` to the changelog and wait until the gateway reads them back."""
    rows = [CountRow(k, c, 0) for k, c in counts.items()]
    produce_changelog(
        broker.bootstrap,
        view,
        [(r.key.encode(), encode_count(r), partition_for(r.key, P)) for r in rows],
    )
    words = list(counts)

    def visible() -> bool:
        body = http.post("/graphql", json={"query": LOOKUP, "variables": {"ws": words}}).json()
        got = {r["word"]: r["count"] for r in body["data"]["wordCounts"] if r is not None}
        return got == counts

    wait_until(visible, 30, f"{len(counts)} written counts to be read back", 0.05)


def test_keys_added_and_updated_while_paging_are_neither_skipped_nor_repeated(
    broker: KafkaBroker,
    views: tuple[View, ...],
    nodes: list[ThreadNode],
    gateway: httpx.Client,
) -> None:
    """Between pages, keys behind and ahead of the scan are updated and added (applied
    before the next page is asked for): every key there from the start comes exactly once,
    in order, with its newest count when the scan reached it; an added key comes once if it
    sorts after the scan's position when it was added, and not at all if before."""
    view, kind = views[0], KINDS[0]
    wait_until(lambda: _settled(nodes), 60, "one node RUNNING with every partition")
    wait_until(lambda: _routed(gateway, nodes), 30, "the gateway to route the node")
    namespace = f"live-{uuid.uuid4().hex[:4]}/"
    initial = {f"{namespace}{i:03d}": 1 for i in range(0, 120, 2)}
    _put_counts(broker, gateway, view, initial)
    counts = dict(initial)
    ahead: set[str] = set()
    behind: set[str] = set()
    seen: list[Truth] = []
    cursor = None
    for turn in itertools.count():
        assert turn < 100, "the scan does not end"
        variables = {"x": namespace, "n": 7, "a": cursor}
        document = gateway.post(
            "/graphql", json={"query": _query(view, kind), "variables": variables}
        ).json()
        assert "errors" not in document, document
        page = document["data"]["r"]
        rows = [kind.read(edge["node"]) for edge in page["edges"]]
        # every change was read back before this page: it shows each key's newest count
        assert all(count == counts[key] for key, count in rows), (rows, counts)
        seen.extend(rows)
        if not page["pageInfo"]["hasNextPage"]:
            break
        cursor = page["pageInfo"]["endCursor"]
        passed = seen[-1][0]
        number = int(passed.rsplit("/", 1)[1])
        changes = {
            f"{namespace}{(number + 5) % 120 // 2 * 2:03d}": turn + 2,  # ahead (or wrapped)
            f"{namespace}{number // 2 * 2:03d}": turn + 2,  # the last one passed
            f"{namespace}{number + 3:03d}": 1,  # new, ahead
            f"{namespace}{max(number - 3, 1):03d}": 1,  # new, behind
        }
        for key, count in changes.items():
            if key not in counts:
                (ahead if key.encode() > passed.encode() else behind).add(key)
            counts[key] = count
        _put_counts(broker, gateway, view, changes)
    keys = [row[0] for row in seen]
    assert keys == sorted(set(keys), key=str.encode), "a key repeated or out of order"
    assert set(initial) | ahead == set(keys)
    assert not behind & set(keys)
    assert ahead and behind, "the scan never passed keys added behind and ahead of it"
    assert any(count > 1 for _, count in seen), "no key was updated before the scan reached it"
