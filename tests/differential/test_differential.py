"""Differential tests: generated events through the real path (broker, Spark, nodes,
gateway) with one node and with three; every query kind must answer exactly what a
straightforward model computes from the same events (histories oldest and newest first,
a booking as of a time, and the page views aggregated per host included).

Spark's watermark advances per micro-batch, so events come in three rounds, each
produced once the pipeline has processed the previous one (tests/e2e/progress.py):
round 0 lies in the epoch's first minute (never late, whatever the batching), round 1
advances event time to 150 s and only adds events in windows that end after 120 s,
round 2 lies at or before 150 s, so the watermark in force is exactly 150 s - grace
(30 s): a round-2 event whose window ends at or before 120 s is dropped as late.
The hopping view (windows of a minute every 30 s) drops a late event from those of its
windows that end by then and counts it in the others; its windows of round 0 end at 30 s
or later, after any watermark round 0 can raise (29 s). The session view (a gap of 30 s)
drops a round-2 event whose own session [t, t + 30 s) ends by 120 s, and merges the others
into the round-1 sessions they reach; Spark writes a session once the watermark passes
its end, so a last event of another host, minutes later, closes them all.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from runtime.produce import Record, Write, produce_keys, produce_records
from tests.differential.views import HOPS as HOP
from tests.differential.views import HOST_HOPPING, SESSIONS
from tests.e2e.conftest import Cluster
from tests.e2e.progress import PipelineProgress, needed_offsets
from tooling.processes import wait_until

MINUTE = 60_000
assert HOP.hop_ms == MINUTE // 2 and HOP.size_ms == MINUTE and HOP.grace_ms == 30_000
HOP_STARTS = range(-HOP.hop_ms, 180_000, HOP.hop_ms)  # every window an event can be in
WATERMARK_AFTER_ROUND_1 = 150_000 - 30_000
AS_OF_S = 100  # the bookings are asked as of this second after the epoch
TRIPS = ("LIS-BER", "BER-OSL", "OSL-LIS")
KEYS = 4
_examples = itertools.count()

Event = tuple[int, int, int, int]  # (round, seconds after the epoch, key index, trip index)
round0 = st.tuples(st.just(0), st.integers(0, 59), st.integers(0, KEYS - 1), st.integers(0, 2))
round1 = st.tuples(st.just(1), st.integers(120, 150), st.integers(0, KEYS - 1), st.integers(0, 2))
round2 = st.tuples(st.just(2), st.integers(0, 150), st.integers(0, KEYS - 1), st.integers(0, 2))
event_sets = st.tuples(
    st.lists(round0, min_size=1, max_size=10),
    # round 1 always holds the event that advances event time to 150 s
    st.lists(round1, max_size=5).map(lambda events: [*events, (1, 150, 0, 0)]),
    st.lists(round2, max_size=6),
)


@dataclass
class Model:
    """What every view must answer, computed directly from the produced events."""

    hosts: Counter[str] = field(default_factory=Counter)
    windows: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    late: int = 0
    late_groups: set[tuple[str, int]] = field(default_factory=set)
    hops: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    visits: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    late_hops: int = 0  # (event, window) pairs dropped
    late_hop_groups: set[tuple[str, int]] = field(default_factory=set)
    bookings: dict[str, list[tuple[int, int, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def page_view(self, host: str, at_ms: int, late: bool) -> None:
        self.hosts[host] += 1
        if late:
            self.late += 1
            self.late_groups.add((host, at_ms // MINUTE))
        else:
            self.windows[host][at_ms // MINUTE * MINUTE] += 1

    def hopping_view(self, host: str, epoch: int, event: Event) -> None:
        for start in HOP.starts_of(event[1] * 1000):
            if event[0] == 2 and start + HOP.size_ms <= WATERMARK_AFTER_ROUND_1:
                self.late_hops += 1
                self.late_hop_groups.add((host, start))
            else:
                self.hops[host][epoch + start] += 1

    def session_view(self, host: str, epoch: int, event: Event) -> None:
        """An event the session view keeps: all but a round-2 one whose own session
        [t, t + gap) ends at or before the watermark."""
        gap, at = SESSIONS.gap_ms, event[1] * 1000
        assert gap is not None
        if not (event[0] == 2 and at + gap <= WATERMARK_AFTER_ROUND_1):
            self.visits[host].append(epoch + at)

    def sessions(self, host: str) -> list[tuple[int, int, int]]:
        """(start, end, count) of the host's sessions: events at most the gap apart."""
        gap = SESSIONS.gap_ms
        assert gap is not None
        found: list[list[int]] = []
        for at in sorted(self.visits[host]):
            if found and at <= found[-1][1]:
                found[-1][1], found[-1][2] = max(found[-1][1], at + gap), found[-1][2] + 1
            else:
                found.append([at, at + gap, 1])
        return [(start, end, count) for start, end, count in found]

    def booking(self, customer: str, at_ms: int, offset: int, trip: str) -> None:
        self.bookings[customer].append((at_ms, offset, trip))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _late_dropped(cluster: Cluster) -> tuple[int, int]:
    """`lateDropped` of the tumbling and of the hopping view."""
    views = cluster.data("{ cluster { views { name lateDropped } } }")["cluster"]["views"]
    dropped = {v["name"]: v["lateDropped"] for v in views}
    return dropped["host_access_per_minute"], dropped[HOST_HOPPING.name]


def _late_count_agrees(reported: tuple[int, int], model: Model) -> bool:
    """Spark counts late rows at its state operator, after partial aggregation: late events
    of one (key, window) in one micro-batch count once. So the figure lies between the
    late (key, window) groups and the late events (of the hopping view: the late pairs of
    an event and a window it is in), and is 0 exactly when nothing was late."""
    tumbling, hopping = reported
    return (
        len(model.late_groups) <= tumbling <= model.late
        and len(model.late_hop_groups) <= hopping <= model.late_hops
    )


def _is_late(event: Event) -> bool:
    window_end = event[1] * 1000 // MINUTE * MINUTE + MINUTE
    return event[0] == 2 and window_end <= WATERMARK_AFTER_ROUND_1


def _offsets_by_key(writes: list[Write]) -> dict[str, list[int]]:
    """Each key's offsets in produce order (one key stays on one partition, in order)."""
    offsets: dict[str, list[int]] = defaultdict(list)
    for write in writes:
        offsets[write.key].append(write.offset)
    return {key: sorted(found) for key, found in offsets.items()}


def _produce_round(
    cluster: Cluster,
    progress: PipelineProgress,
    epoch: int,
    prefix: str,
    events: list[Event],
    model: Model,
) -> None:
    views, bookings = [], []
    for event in events:
        _, seconds, key, trip = event
        at = epoch + seconds * 1000
        host, customer = f"{prefix}h{key}", f"{prefix}c{key}"
        views.append(Record(host, orjson.dumps({"timestamp": at, "path": "/"}), at))
        bookings.append(Record(customer, orjson.dumps({"timestamp": at, "trip": TRIPS[trip]}), at))
        model.page_view(host, at, _is_late(event))
        model.hopping_view(host, epoch, event)
        model.session_view(host, epoch, event)
    view_writes = produce_records(cluster.local.bootstrap, "pageviews", views)
    booking_writes = produce_records(cluster.local.bootstrap, "bookings", bookings)
    offsets = _offsets_by_key(booking_writes)
    seen: Counter[str] = Counter()
    for record in bookings:
        offset = offsets[record.key][seen[record.key]]
        seen[record.key] += 1
        model.booking(
            record.key, record.timestamp_ms or 0, offset, orjson.loads(record.value or b"")["trip"]
        )
    cluster.saw_event_times(r.timestamp_ms or 0 for r in views)
    progress.wait("pageviews", needed_offsets(view_writes))
    progress.wait("bookings", needed_offsets(booking_writes))


def _close_sessions(cluster: Cluster, progress: PipelineProgress, epoch: int, prefix: str) -> None:
    """A page view of another host, minutes later: the watermark passes every session."""
    at = epoch + 240_000  # past every session's end (180 s) plus the grace; no further:
    # Kafka timestamps are event times here, and the broker refuses those an hour ahead
    record = Record(f"{prefix}closer", orjson.dumps({"timestamp": at, "path": "/"}), at)
    writes = produce_records(cluster.local.bootstrap, "pageviews", [record])
    cluster.saw_event_times([at])
    progress.wait("pageviews", needed_offsets(writes))


def _expected(model: Model, epoch: int, hosts: list[str], customers: list[str]) -> dict[str, Any]:
    windows = {
        host: [
            {"start": _iso(start), "end": _iso(start + MINUTE), "count": n}
            for start, n in sorted(model.windows[host].items())
        ]
        for host in hosts
    }
    tops = {}
    for minute in range(3):
        start = epoch + minute * MINUTE
        rows = [(h, model.windows[h][start]) for h in hosts if model.windows[h][start]]
        tops[minute] = [
            {"host": h, "count": n} for h, n in sorted(rows, key=lambda r: (-r[1], r[0]))
        ]
    hops = {
        host: [
            {"start": _iso(start), "end": _iso(start + HOP.size_ms), "count": n}
            for start, n in sorted(model.hops[host].items())
        ]
        for host in hosts
    }
    hop_tops: dict[int, list[dict[str, Any]]] = {}
    for start in HOP_STARTS:
        rows = [(h, model.hops[h][epoch + start]) for h in hosts if model.hops[h][epoch + start]]
        hop_tops[start] = [
            {"host": h, "count": n} for h, n in sorted(rows, key=lambda r: (-r[1], r[0]))
        ]
    sessions = {
        host: [
            {"start": _iso(start), "end": _iso(end), "count": n}
            for start, end, n in model.sessions(host)
        ]
        for host in hosts
    }
    hop_totals = [
        {
            "start": _iso(epoch + start),
            "end": _iso(epoch + start + HOP.size_ms),
            "keys": float(len(tops)),
            "count": float(sum(row["count"] for row in tops)),
        }
        for start, tops in hop_tops.items()
        if tops
    ]
    history = {c: sorted(model.bookings[c]) for c in customers}
    as_of = epoch + AS_OF_S * 1000
    return {
        "sessions": sessions,
        "hops": hops,
        "hop_tops": hop_tops,
        "hop_scans": hop_tops,  # a scan of one window by count: the same order as its top
        "hop_totals": hop_totals,
        "counts": [{"host": h, "count": model.hosts[h]} if model.hosts[h] else None for h in hosts],
        # every path of the model is "/": one distinct page; late events count (no window)
        "pages": [
            {"host": h, "views": model.hosts[h], "pages": 1} if model.hosts[h] else None
            for h in hosts
        ],
        "windows": windows,
        "tops": tops,
        "latest": [
            {"customer": c, "trip": history[c][-1][2], "eventTime": _iso(history[c][-1][0])}
            if history[c]
            else None
            for c in customers
        ],
        "history": {
            c: [{"trip": t, "eventTime": _iso(at)} for at, _, t in history[c]] for c in customers
        },
        "newest": {
            c: [{"trip": t, "eventTime": _iso(at)} for at, _, t in reversed(history[c])]
            for c in customers
        },
        "as_of": {
            c: next(
                (
                    {"trip": t, "eventTime": _iso(at)}
                    for at, _, t in reversed(history[c])
                    if at <= as_of
                ),
                None,
            )
            for c in customers
        },
    }


def _answers(
    cluster: Cluster, epoch: int, hosts: list[str], customers: list[str]
) -> dict[str, Any]:
    data = cluster.data(
        "query($h: [String!]!, $c: [String!]!) { hostAccessMany(hosts: $h) { host count }"
        " hostPagesMany(hosts: $h) { host views pages }"
        " lastBookings(customers: $c) { customer trip eventTime } }",
        {"h": hosts, "c": customers},
    )
    windows, hops, sessions, history, newest, as_of = {}, {}, {}, {}, {}, {}
    for host in hosts:
        sessions[host] = cluster.data(
            "query($h: String!, $f: DateTime) {"
            " hostSessions(host: $h, from: $f) { start end count } }",
            {"h": host, "f": _iso(epoch - MINUTE)},
        )["hostSessions"]
        hops[host] = cluster.data(
            "query($h: String!, $f: DateTime) {"
            " hostAccessHops(host: $h, from: $f) { start end count } }",
            {"h": host, "f": _iso(epoch + HOP_STARTS[0])},
        )["hostAccessHops"]
        windows[host] = cluster.data(
            "query($h: String!, $f: DateTime, $t: DateTime) {"
            " hostAccessWindows(host: $h, from: $f, to: $t) { start end count } }",
            {"h": host, "f": _iso(epoch), "t": _iso(epoch + 3 * MINUTE)},
        )["hostAccessWindows"]
    for customer in customers:
        page = cluster.data(
            "query($c: String!) { bookingHistory(customer: $c, first: 1000) {"
            " edges { node { trip eventTime } } pageInfo { hasNextPage } } }",
            {"c": customer},
        )["bookingHistory"]
        history[customer] = [edge["node"] for edge in page["edges"]]
        page = cluster.data(
            "query($c: String!) { bookingHistory(customer: $c, first: 1000, newestFirst: true)"
            " { edges { node { trip eventTime } } } }",
            {"c": customer},
        )["bookingHistory"]
        newest[customer] = [edge["node"] for edge in page["edges"]]
        as_of[customer] = cluster.data(
            "query($c: String!, $at: DateTime!) {"
            " bookingHistoryAsOf(customer: $c, at: $at) { trip eventTime } }",
            {"c": customer, "at": _iso(epoch + AS_OF_S * 1000)},
        )["bookingHistoryAsOf"]
    tops = {
        minute: cluster.data(
            "query($s: DateTime!) {"
            " topHostsPerMinute(limit: 100, window: {start: $s}) { host count } }",
            {"s": _iso(epoch + minute * MINUTE)},
        )["topHostsPerMinute"]
        for minute in range(3)
    }
    hop_tops = {
        start: cluster.data(
            "query($s: DateTime!) {"
            " topHostsPerHop(limit: 100, window: {start: $s}) { host count } }",
            {"s": _iso(epoch + start)},
        )["topHostsPerHop"]
        for start in HOP_STARTS
    }
    hop_scans = {
        start: [
            edge["node"]
            for edge in cluster.data(
                "query($s: DateTime!) { allHostAccessHops(first: 100, order: COUNT,"
                " window: {start: $s}) { edges { node { host count } } } }",
                {"s": _iso(epoch + start)},
            )["allHostAccessHops"]["edges"]
        ]
        for start in HOP_STARTS
    }
    hop_totals = cluster.data(
        "query($f: DateTime, $t: DateTime) {"
        " hostAccessHopTotals(from: $f, to: $t) { start end keys count } }",
        {"f": _iso(epoch + HOP_STARTS[0]), "t": _iso(epoch + HOP_STARTS[-1] + 1)},
    )["hostAccessHopTotals"]
    return {
        "sessions": sessions,
        "hops": hops,
        "hop_tops": hop_tops,
        "hop_scans": hop_scans,
        "hop_totals": hop_totals,
        "counts": data["hostAccessMany"],
        "windows": windows,
        "tops": tops,
        "pages": data["hostPagesMany"],
        "latest": data["lastBookings"],
        "history": history,
        "newest": newest,
        "as_of": as_of,
    }


def _check(cluster: Cluster, progress: PipelineProgress, rounds: tuple[list[Event], ...]) -> None:
    prefix = f"d{next(_examples)}-"
    epoch = cluster.next_epoch_ms()
    late_before = _late_dropped(cluster)
    model = Model()
    for events in rounds:
        if events:
            _produce_round(cluster, progress, epoch, prefix, events, model)
    _close_sessions(cluster, progress, epoch, prefix)
    hosts = [f"{prefix}h{k}" for k in range(KEYS)]
    customers = [f"{prefix}c{k}" for k in range(KEYS)]
    expected = _expected(model, epoch, hosts, customers)
    last: dict[str, Any] = {}

    def agrees() -> bool:
        nonlocal last
        last = _answers(cluster, epoch, hosts, customers)
        now = _late_dropped(cluster)
        reported = (now[0] - late_before[0], now[1] - late_before[1])
        return last == expected and _late_count_agrees(reported, model)

    try:
        wait_until(agrees, 90, "the cluster to answer what the model computes", 0.5)
    except TimeoutError:
        differ = {k: (last.get(k), v) for k, v in expected.items() if last.get(k) != v}
        now = _late_dropped(cluster)
        late = (now[0] - late_before[0], model.late, now[1] - late_before[1], model.late_hops)
        raise AssertionError(f"(answer, model) where they differ: {differ}; late {late}") from None


_SETTINGS = settings(
    max_examples=2,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # each example costs seconds of real processing
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(rounds=event_sets)
def test_one_node_answers_what_the_model_computes(
    grown_cluster: Cluster, progress: PipelineProgress, rounds: tuple[list[Event], ...]
) -> None:
    assert len(grown_cluster.local.nodes) == 1
    _check(grown_cluster, progress, rounds)


def test_grow_to_three_nodes(grown_cluster: Cluster) -> None:
    grown_cluster.local.start_node("d2")
    grown_cluster.local.start_node("d3")

    def active_owners() -> set[str]:
        partitions = grown_cluster.data("{ cluster { partitions { node role } } }")["cluster"][
            "partitions"
        ]
        return {p["node"] for p in partitions if p["role"] == "ACTIVE"}

    # Routable already holds while d1 owns everything: wait for the rebalance to spread it.
    wait_until(lambda: active_owners() == {"d1", "d2", "d3"}, 90, "partitions on all 3 nodes")
    grown_cluster.local.wait_routable()


@_SETTINGS
@given(rounds=event_sets)
def test_three_nodes_answer_what_the_model_computes(
    grown_cluster: Cluster, progress: PipelineProgress, rounds: tuple[list[Event], ...]
) -> None:
    assert len(grown_cluster.local.nodes) == 3
    _check(grown_cluster, progress, rounds)


def test_a_view_added_by_one_catalogue_entry_is_queryable(grown_cluster: Cluster) -> None:
    """`word_tally` exists only as one View entry in tests/differential/views.py."""
    produce_keys(grown_cluster.local.bootstrap, "words", ["tally-a", "tally-a", "tally-b"])
    expected = [{"term": "tally-a", "count": 2}, {"term": "tally-b", "count": 1}, None]
    query = '{ wordTallies(terms: ["tally-a", "tally-b", "tally-none"]) { term count } }'
    wait_until(
        lambda: grown_cluster.query(query).json().get("data") == {"wordTallies": expected},
        90,
        "the added view to answer",
    )
