"""The subgraph of every view kind (windowed_count, latest, history) over real LevelDB
stores attached by hand, with the node's clock injected."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.app import NodeApp
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.changes import position
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph import sdl
from node.subgraph.schema import build_subgraph, print_sdl
from schema import (
    DEMO_DOMAIN,
    WORD_COUNTS,
    EventRow,
    KeyType,
    Role,
    WindowRow,
    pack,
    partition_for,
    view_by_name,
)

FULL = (WORD_COUNTS, *DEMO_DOMAIN)
P = 6
HELD = (0, 1, 2)
WINDOWED = view_by_name("host_access_per_minute", FULL)
LATEST = view_by_name("last_booking", FULL)
HISTORY = view_by_name("booking_history", FULL)
SIZE = 60_000
DAY = 24 * 3_600_000
T0 = 1_699_999_980_000  # a minute boundary
NOW = T0 + 3 * SIZE
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def held(prefix: str, n: int) -> list[str]:
    return [k for k in (f"{prefix}{i}" for i in range(n)) if partition_for(k, P) in HELD]


def foreign(prefix: str) -> str:
    return next(k for k in (f"{prefix}{i}" for i in range(100)) if partition_for(k, P) not in HELD)


def iso(ms: int) -> str:
    return (EPOCH + timedelta(milliseconds=ms)).isoformat()


HOSTS = held("h", 40)
# each held host: three windows from T0 on, and one that expired a day ago
WINDOWS = [
    WindowRow(h, T0 + i * SIZE, T0 + (i + 1) * SIZE, (n * 7 + i * 3) % 11 + 1, T0 + i * SIZE)
    for n, h in enumerate(HOSTS)
    for i in range(3)
] + [WindowRow(h, T0 - DAY - SIZE, T0 - DAY, 50, T0 - DAY - 1) for h in HOSTS]
CUSTOMERS = held("c", 40)
EVENTS = [
    EventRow(c, T0 + (k * 37 % 5) * 1000, k % 3, 100 + k, {"trip": f"{c}-trip{k}"})
    for n, c in enumerate(CUSTOMERS)
    for k in range(n % 6 + 1)
]
ODD = held("odd", 20)[:2]  # a customer without trip, one whose trip is no string
ODD_EVENTS = [EventRow(ODD[0], T0, 0, 1, {}), EventRow(ODD[1], T0, 0, 1, {"trip": 5})]


def fill(store: LevelDBStore, partition: int) -> None:
    change = ChangeBatch(offsets={v.changelog_topic: 10 + partition for v in FULL})
    for window in WINDOWS:
        if partition_for(window.key, P) == partition:
            change.put_window(WINDOWED.name, window)
    for event in EVENTS + ODD_EVENTS:
        if partition_for(event.key, P) == partition:
            change.put_latest(LATEST.name, event)
            change.put_event(HISTORY.name, event)
    store.apply(change)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[PartitionRegistry]:
    """Node n1 holding partitions 0-2 of every view (P = 6)."""
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({v.changelog_topic: P for v in FULL})
    stores = []
    for partition in HELD:
        store = LevelDBStore(tmp_path / f"partition-{partition}").open()
        fill(store, partition)
        registry.attach(partition, store, Role.ACTIVE, store.offsets())
        stores.append(store)
    yield registry
    for partition in HELD:
        registry.detach(partition)
    for store in stores:
        store.close()


class Clock:
    """The node's clock, moved by hand."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def endpoint(registry: PartitionRegistry, clock: Clock) -> GraphQLEndpoint:
    return GraphQLEndpoint(build_subgraph(FULL), registry, clock)


def ok(response: dict[str, Any]) -> Any:
    assert "errors" not in response, response["errors"]
    return response["data"]


def only_error(response: dict[str, Any]) -> dict[str, Any]:
    (error,) = response["errors"]
    assert isinstance(error, dict)
    return error


# -- the schema ----------------------------------------------------------------------------


def test_the_issue_3_field_shapes() -> None:
    printed = print_sdl(FULL)
    for line in [
        "hostAccessWindows(host: String!, from: DateTime, to: DateTime): [HostAccessWindow!]!",
        "topHostsPerMinute(limit: Int!, window: WindowInput!, partitions: [Int!]): "
        "[HostAccessWindow!]!",
        "lastBooking(customer: String!): LastBooking",
        "lastBookings(customers: [String!]!): [LastBooking]!",
        "bookingHistory(customer: String!, from: DateTime, to: DateTime, first: Int! = 100, "
        "after: String, newestFirst: Boolean! = false): BookingEventConnection!",
        "hostAccess(host: String!): HostAccess",
        "hostPagesMany(hosts: [String!]!): [HostPages]!",
        "topHostsByPages(limit: Int!, by: String!, partitions: [Int!]): [HostPages!]!",
        "hostAccessMany(hosts: [String!]!): [HostAccess]!",
        "topHosts(limit: Int!, partitions: [Int!]): [HostAccess!]!",
    ]:
        assert f"  {line}\n" in printed, line
    assert printed.count("input WindowInput {") == 1
    assert printed.count("type PageInfo {") == 1


def test_sdl_command_prints_writes_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sdl.main(["--catalogue", "full"]) == 0
    assert capsys.readouterr().out == print_sdl(FULL)
    target = tmp_path / "node.graphql"
    assert sdl.main(["--write", str(target), "--catalogue", "full"]) == 0
    assert target.read_text(encoding="utf-8") == print_sdl(FULL)
    assert sdl.main(["--check", str(target), "--catalogue", "full"]) == 0
    target.write_text(print_sdl((WORD_COUNTS,)), encoding="utf-8")
    assert sdl.main(["--check", str(target), "--catalogue", "full"]) == 1
    assert "run `make schema`" in capsys.readouterr().err


# -- windowed_count ------------------------------------------------------------------------

WINDOWS_QUERY = """query($h: String!, $f: DateTime, $t: DateTime) {
  hostAccessWindows(host: $h, from: $f, to: $t) { host start end count } }"""
TOP_QUERY = """query($l: Int!, $s: DateTime!, $p: [Int!]) {
  topHostsPerMinute(limit: $l, window: {start: $s}, partitions: $p) { host start end count } }"""


def as_json(window: WindowRow) -> dict[str, Any]:
    return {
        "host": window.key,
        "start": iso(window.start_ms),
        "end": iso(window.end_ms),
        "count": window.count,
    }


def windows_of(host: str, since: int | None = None, until: int | None = None) -> list[Any]:
    return [
        as_json(w)
        for w in sorted(WINDOWS, key=lambda w: w.start_ms)
        if w.key == host
        and w.end_ms > NOW - DAY
        and (since is None or since <= w.start_ms)
        and (until is None or w.start_ms < until)
    ]


def test_windows_of_a_host_in_time_order_without_expired_ones(endpoint: GraphQLEndpoint) -> None:
    host = HOSTS[0]
    data = ok(endpoint.execute(WINDOWS_QUERY, {"h": host}))
    assert data["hostAccessWindows"] == windows_of(host)
    assert len(data["hostAccessWindows"]) == 3
    assert data["hostAccessWindows"][0]["start"] == iso(T0)
    assert data["hostAccessWindows"][0]["start"].endswith("+00:00")


def test_windows_in_a_range_with_any_utc_offset(endpoint: GraphQLEndpoint) -> None:
    host = HOSTS[1]
    # from is inclusive and rounded up to whole ms; to is exclusive
    since = (EPOCH + timedelta(milliseconds=T0 + SIZE)).astimezone(timezone(timedelta(hours=2)))
    variables: dict[str, str | None] = {"h": host, "f": since.isoformat(), "t": iso(T0 + 2 * SIZE)}
    data = ok(endpoint.execute(WINDOWS_QUERY, variables))
    assert data["hostAccessWindows"] == windows_of(host, T0 + SIZE, T0 + 2 * SIZE)
    variables = {"h": host, "f": iso(T0 - 2 * DAY), "t": None}
    assert ok(endpoint.execute(WINDOWS_QUERY, variables))["hostAccessWindows"] == windows_of(host)
    sub_ms = (EPOCH + timedelta(milliseconds=T0, microseconds=1)).isoformat()
    data = ok(endpoint.execute(WINDOWS_QUERY, {"h": host, "f": sub_ms}))
    assert data["hostAccessWindows"] == windows_of(host, T0 + 1)


def test_windows_expire_as_the_clock_moves(endpoint: GraphQLEndpoint, clock: Clock) -> None:
    host = HOSTS[0]
    clock.now_ms = T0 + DAY + SIZE  # the first window ends exactly at the horizon
    data = ok(endpoint.execute(WINDOWS_QUERY, {"h": host}))
    assert [w["start"] for w in data["hostAccessWindows"]] == [iso(T0 + SIZE), iso(T0 + 2 * SIZE)]
    top = ok(endpoint.execute(TOP_QUERY, {"l": 5, "s": iso(T0)}))
    assert top["topHostsPerMinute"] == []
    clock.now_ms = T0 + DAY + 3 * SIZE
    assert ok(endpoint.execute(WINDOWS_QUERY, {"h": host}))["hostAccessWindows"] == []


def ranked_window(start: int, partitions: tuple[int, ...] = HELD) -> list[dict[str, Any]]:
    rows = [w for w in WINDOWS if w.start_ms == start and partition_for(w.key, P) in partitions]
    return [as_json(w) for w in sorted(rows, key=lambda w: (-w.count, w.key))]


def test_top_of_one_window_over_held_partitions(endpoint: GraphQLEndpoint) -> None:
    response = endpoint.execute(TOP_QUERY, {"l": 7, "s": iso(T0 + SIZE)})
    assert ok(response)["topHostsPerMinute"] == ranked_window(T0 + SIZE)[:7]
    assert [e["partition"] for e in response["extensions"]["freshness"]] == list(HELD)
    response = endpoint.execute(TOP_QUERY, {"l": 1000, "s": iso(T0), "p": [2, 0]})
    assert ok(response)["topHostsPerMinute"] == ranked_window(T0, (0, 2))
    assert [e["partition"] for e in response["extensions"]["freshness"]] == [0, 2]
    expired = endpoint.execute(TOP_QUERY, {"l": 5, "s": iso(T0 - DAY - SIZE)})
    assert ok(expired)["topHostsPerMinute"] == []


def test_windowed_reads_of_partitions_not_held_are_not_owner(endpoint: GraphQLEndpoint) -> None:
    host = foreign("h")
    error = only_error(endpoint.execute(WINDOWS_QUERY, {"h": host}))
    assert error["extensions"] == {
        "code": "NOT_OWNER",
        "view": WINDOWED.name,
        "partition": partition_for(host, P),
        "node": "n1",
    }
    error = only_error(endpoint.execute(TOP_QUERY, {"l": 3, "s": iso(T0), "p": [1, 5, 4]}))
    assert error["extensions"]["partitions"] == [4, 5]


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        (TOP_QUERY, {"l": 3, "s": iso(T0 + 1)}),  # not on the window grid
        (TOP_QUERY, {"l": 3, "s": iso(T0 + 30_000)}),
        (TOP_QUERY, {"l": 3, "s": "2023-11-14T22:13:00"}),  # no UTC offset
        (TOP_QUERY, {"l": 3, "s": "1969-12-31T23:59:00+00:00"}),
        (TOP_QUERY, {"l": 0, "s": iso(T0)}),
        (TOP_QUERY, {"l": 10_001, "s": iso(T0)}),
        (TOP_QUERY, {"l": 3, "s": iso(T0), "p": [6]}),
        (TOP_QUERY, {"l": 3, "s": "yesterday"}),
        (WINDOWS_QUERY, {"h": ""}),
        (WINDOWS_QUERY, {"h": "x", "f": iso(T0 + 1), "t": iso(T0)}),
        (WINDOWS_QUERY, {"h": "x", "t": "2023-11-14T22:13:00"}),
    ],
)
def test_bad_windowed_arguments_are_bad_user_input(
    endpoint: GraphQLEndpoint, query: str, variables: dict[str, Any]
) -> None:
    error = only_error(endpoint.execute(query, variables))
    assert error["extensions"] == {"code": "BAD_USER_INPUT"}


def test_an_unaligned_start_names_the_window_containing_it(endpoint: GraphQLEndpoint) -> None:
    error = only_error(endpoint.execute(TOP_QUERY, {"l": 3, "s": iso(T0 + 30_000)}))
    assert error["message"] == (
        f"view {WINDOWED.name}: window start {iso(T0 + 30_000)} is not aligned to the windows' "
        f"start every 60000 ms (the window containing it starts at {iso(T0)})"
    )


# -- latest --------------------------------------------------------------------------------

LATEST_QUERY = "query($c: String!) { lastBooking(customer: $c) { customer trip eventTime } }"
LATESTS_QUERY = (
    "query($cs: [String!]!) { lastBookings(customers: $cs) { customer trip eventTime } }"
)


def latest_json(customer: str) -> dict[str, Any] | None:
    events = [e for e in EVENTS if e.key == customer]
    if not events:
        return None
    newest = max(events, key=position)
    return {"customer": customer, "trip": newest.fields["trip"], "eventTime": iso(newest.event_ms)}


def test_latest_of_a_customer(endpoint: GraphQLEndpoint) -> None:
    customer = CUSTOMERS[5]  # six events, some at equal times
    response = endpoint.execute(LATEST_QUERY, {"c": customer})
    assert ok(response)["lastBooking"] == latest_json(customer)
    assert response["extensions"]["freshness"] == [
        {
            "partition": partition_for(customer, P),
            "node": "n1",
            "role": "ACTIVE",
            "appliedOffset": len(FULL) * (10 + partition_for(customer, P)),
            "lag": 0,
            # the position of the changelog of the view read, not of every view
            "positions": {LATEST.changelog_topic: 10 + partition_for(customer, P)},
            "applied": {LATEST.changelog_topic: 10 + partition_for(customer, P)},
        }
    ]
    unknown = held("nobody", 10)[0]
    assert ok(endpoint.execute(LATEST_QUERY, {"c": unknown}))["lastBooking"] is None


def test_latest_of_many_customers_in_input_order(endpoint: GraphQLEndpoint) -> None:
    unknown = held("nobody", 10)[0]
    customers = [*CUSTOMERS[:6], unknown, CUSTOMERS[0]]
    data = ok(endpoint.execute(LATESTS_QUERY, {"cs": customers}))
    assert data["lastBookings"] == [latest_json(c) for c in customers]


def test_value_fields_that_are_missing_or_mistyped_are_null(endpoint: GraphQLEndpoint) -> None:
    data = ok(endpoint.execute(LATESTS_QUERY, {"cs": ODD}))
    assert [row["trip"] for row in data["lastBookings"]] == [None, None]
    assert [row["eventTime"] for row in data["lastBookings"]] == [iso(T0), iso(T0)]


def test_latest_of_a_foreign_customer_is_not_owner(endpoint: GraphQLEndpoint) -> None:
    customer = foreign("c")
    error = only_error(endpoint.execute(LATEST_QUERY, {"c": customer}))
    assert error["extensions"]["code"] == "NOT_OWNER"
    assert error["message"] == (
        f"view last_booking: key {customer!r} is in partition {partition_for(customer, P)}, "
        "which node n1 does not hold"
    )
    error = only_error(endpoint.execute(LATESTS_QUERY, {"cs": [CUSTOMERS[0], customer]}))
    assert error["extensions"]["partitions"] == [partition_for(customer, P)]


def test_latest_entities_in_input_order(endpoint: GraphQLEndpoint) -> None:
    unknown = held("nobody", 10)[0]
    customers = [CUSTOMERS[3], unknown, CUSTOMERS[0], CUSTOMERS[3]]
    query = """query($r: [_Any!]!) { _entities(representations: $r) {
      ... on LastBooking { customer trip eventTime } } }"""
    representations = [{"__typename": "LastBooking", "customer": c} for c in customers]
    data = ok(endpoint.execute(query, {"r": representations}))
    assert data["_entities"] == [latest_json(c) for c in customers]
    foreign_one = [*representations, {"__typename": "LastBooking", "customer": foreign("c")}]
    error = only_error(endpoint.execute(query, {"r": foreign_one}))
    assert error["extensions"]["code"] == "NOT_OWNER"


# -- history -------------------------------------------------------------------------------

HISTORY_QUERY = """query($c: String!, $f: DateTime, $t: DateTime, $n: Int!, $a: String) {
  bookingHistory(customer: $c, from: $f, to: $t, first: $n, after: $a) {
    edges { cursor node { customer trip eventTime } }
    pageInfo { hasNextPage endCursor } } }"""


def history_json(customer: str, since: int | None = None, until: int | None = None) -> list[Any]:
    return [
        {"customer": e.key, "trip": e.fields["trip"], "eventTime": iso(e.event_ms)}
        for e in sorted((e for e in EVENTS if e.key == customer), key=position)
        if (since is None or since <= e.event_ms) and (until is None or e.event_ms < until)
    ]


def all_pages(
    endpoint: GraphQLEndpoint, customer: str, first: int, **span: str
) -> list[dict[str, Any]]:
    pages = []
    after = None
    while True:
        variables = {"c": customer, "n": first, "a": after, **span}
        page = ok(endpoint.execute(HISTORY_QUERY, variables))["bookingHistory"]
        pages.append(page)
        if not page["pageInfo"]["hasNextPage"]:
            return pages
        after = page["pageInfo"]["endCursor"]
        assert after == page["edges"][-1]["cursor"]
        assert len(pages) < 20


@pytest.mark.parametrize("first", [1, 2, 5, 1000])
def test_history_pages_add_up_to_the_ordered_events(endpoint: GraphQLEndpoint, first: int) -> None:
    customer = CUSTOMERS[5]
    pages = all_pages(endpoint, customer, first)
    nodes = [edge["node"] for page in pages for edge in page["edges"]]
    assert nodes == history_json(customer)
    assert all(len(page["edges"]) == first for page in pages[:-1])


def test_history_in_a_time_range(endpoint: GraphQLEndpoint) -> None:
    customer = CUSTOMERS[5]
    span = {"f": iso(T0 + 1000), "t": iso(T0 + 4000)}
    pages = all_pages(endpoint, customer, 2, **span)
    nodes = [edge["node"] for page in pages for edge in page["edges"]]
    assert nodes == history_json(customer, T0 + 1000, T0 + 4000)
    assert 0 < len(nodes) < len(history_json(customer))


def test_cursors_are_base64url_of_the_packed_position(endpoint: GraphQLEndpoint) -> None:
    customer = CUSTOMERS[3]
    page = ok(endpoint.execute(HISTORY_QUERY, {"c": customer, "n": 1000}))["bookingHistory"]
    events = sorted((e for e in EVENTS if e.key == customer), key=position)
    for edge, event in zip(page["edges"], events, strict=True):
        assert re.fullmatch(r"[A-Za-z0-9_-]+", edge["cursor"])
        padded = edge["cursor"] + "=" * (-len(edge["cursor"]) % 4)
        assert base64.urlsafe_b64decode(padded) == pack(*position(event))
    assert page["pageInfo"] == {"hasNextPage": False, "endCursor": page["edges"][-1]["cursor"]}


def test_an_empty_history_has_no_end_cursor(endpoint: GraphQLEndpoint) -> None:
    customer = held("nobody", 10)[0]
    page = ok(endpoint.execute(HISTORY_QUERY, {"c": customer, "n": 10}))["bookingHistory"]
    assert page == {"edges": [], "pageInfo": {"hasNextPage": False, "endCursor": None}}


def test_first_defaults_to_100(endpoint: GraphQLEndpoint) -> None:
    customer = CUSTOMERS[5]
    query = "query($c: String!) { bookingHistory(customer: $c) { edges { cursor } } }"
    edges = ok(endpoint.execute(query, {"c": customer}))["bookingHistory"]["edges"]
    assert len(edges) == len(history_json(customer))


@pytest.mark.parametrize(
    "variables",
    [
        {"n": 0},
        {"n": 1001},
        {"n": 5, "a": "not a cursor!"},
        {"n": 5, "a": "AAAA"},  # base64url, but no packed position
        {"n": 5, "a": base64.urlsafe_b64encode(pack("x", 1, 2)).decode()},
        {"n": 5, "a": base64.urlsafe_b64encode(pack(1, 2, 3)[:-3]).decode()},  # cut short
        {"n": 5, "a": "A" * 600},
        {"n": 5, "f": iso(T0 + 5), "t": iso(T0)},
        {"n": 5, "f": "2023-11-14T22:13:00"},
    ],
)
def test_bad_history_arguments_are_bad_user_input(
    endpoint: GraphQLEndpoint, variables: dict[str, Any]
) -> None:
    response = endpoint.execute(HISTORY_QUERY, {"c": CUSTOMERS[0], **variables})
    assert only_error(response)["extensions"] == {"code": "BAD_USER_INPUT"}


def test_history_of_a_foreign_customer_is_not_owner(endpoint: GraphQLEndpoint) -> None:
    customer = foreign("c")
    error = only_error(endpoint.execute(HISTORY_QUERY, {"c": customer, "n": 5}))
    assert error["extensions"]["code"] == "NOT_OWNER"
    assert error["extensions"]["partition"] == partition_for(customer, P)


# -- over HTTP -----------------------------------------------------------------------------


def test_every_kind_over_http(registry: PartitionRegistry, clock: Clock, tmp_path: Path) -> None:
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n1", "STATEFED_STATE_DIR": str(tmp_path)})
    app = NodeApp(config, FULL, registry=registry, clock=clock)
    asyncio.run(every_kind_over_http(app))


async def every_kind_over_http(app: NodeApp) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://node.localhost") as client:

        async def post(query: str, variables: dict[str, Any]) -> Any:
            response = await client.post("/graphql", json={"query": query, "variables": variables})
            assert response.status_code == 200
            document = response.json()
            assert document["extensions"]["freshness"], document
            return ok(document)

        host, customer = HOSTS[2], CUSTOMERS[4]
        windows = await post(WINDOWS_QUERY, {"h": host})
        assert windows["hostAccessWindows"] == windows_of(host)
        top = await post(TOP_QUERY, {"l": 3, "s": iso(T0 + 2 * SIZE)})
        assert top["topHostsPerMinute"] == ranked_window(T0 + 2 * SIZE)[:3]
        latest = await post(LATEST_QUERY, {"c": customer})
        assert latest["lastBooking"] == latest_json(customer)
        history = await post(HISTORY_QUERY, {"c": customer, "n": 100})
        nodes = [edge["node"] for edge in history["bookingHistory"]["edges"]]
        assert nodes == history_json(customer)


# -- arguments a node cannot read -----------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        '{ hostAccessWindows(host: "h", from: "0001-01-01T00:00:00+14:00") { count } }',
        '{ hostAccessWindows(host: "h", to: "9999-12-31T23:59:59-14:00") { count } }',
        '{ bookingHistory(customer: "c", from: "0001-01-01T00:00:00+14:00") { edges { cursor } } }',
        '{ topHostsPerMinute(limit: 3, window: {start: "0001-01-01T00:00:00+14:00"}) { host } }',
    ],
)
def test_a_time_outside_the_years_utc_can_hold_is_bad_user_input(
    endpoint: GraphQLEndpoint, query: str
) -> None:
    """Year 1 at +14:00 is before the first instant a UTC datetime holds: it was an internal
    error (and a traceback in the log at every request)."""
    error = only_error(endpoint.execute(query))
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "outside the years 1 to 9999 in UTC" in error["message"]


def test_a_key_that_is_no_key_text_of_the_views_key_type_is_bad_user_input(
    clock: Clock,
) -> None:
    """An int-keyed view's keys are hex key texts: anything else was an internal error."""
    view = dataclasses.replace(WORD_COUNTS, key_type=KeyType.INT)
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({view.changelog_topic: P})
    endpoint = GraphQLEndpoint(build_subgraph((view,)), registry, clock)
    for query in (
        '{ wordCount(word: "abc") { count } }',
        '{ wordCounts(words: ["abc"]) { count } }',
    ):
        error = only_error(endpoint.execute(query))
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "is no key text of a int key" in error["message"], error
