"""The node documents of every kind (valid against the node subgraph of the protocol) and
the readers of their answers, which reject what the protocol does not allow."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from graphql import build_schema, parse, validate

from gateway.model.inputs import TimeRange
from gateway.model.rows import Edge, Event, Page, Row, WindowCount
from gateway.reads.kinds import view_queries
from node.subgraph.schema import build_subgraph
from schema import CATALOGUE
from tests.gateway.fakes import BOOKING_HISTORY, FULL, LAST_BOOKING, PER_MINUTE, WORDS, node_sdl
from tests.orders import HOURLY_BASKETS, ORDER_VIEWS

START = datetime(2023, 11, 14, 22, 13, tzinfo=UTC)
END = datetime(2023, 11, 14, 22, 14, tzinfo=UTC)


def test_every_document_is_valid_against_the_node_subgraph() -> None:
    subgraph = build_schema(node_sdl(FULL))
    for view in FULL:
        parts = view_queries(view).documents
        documents = [parts.lookup, parts.top, parts.windows, parts.history, parts.scan]
        assert any(documents)
        for document in filter(None, documents):
            assert validate(subgraph, parse(document)) == [], document


def test_every_scan_document_is_valid_against_the_real_node_subgraph() -> None:
    subgraph = build_subgraph(CATALOGUE)._schema
    for view in CATALOGUE:
        document = view_queries(view).documents.scan
        assert document and validate(subgraph, parse(document)) == [], document


def test_every_document_of_the_aggregate_views_is_valid_against_the_real_node_subgraph() -> None:
    views = (*ORDER_VIEWS, HOURLY_BASKETS)
    subgraph = build_subgraph(views)._schema
    for view in views:
        parts = view_queries(view).documents
        documents = [parts.lookup, parts.top, parts.windows, parts.scan, parts.totals]
        for document in filter(None, documents):
            assert validate(subgraph, parse(document)) == [], document
    assert "by:$b" in view_queries(HOURLY_BASKETS).documents.top


def test_windowed_bodies() -> None:
    queries = view_queries(PER_MINUTE)
    assert orjson.loads(queries.top_body(5, [1, 4], START)) == {
        "query": "query($l:Int!,$w:WindowInput!,$p:[Int!]){r:topHostsPerMinute(limit:$l,"
        "window:$w,partitions:$p){k:host s:start e:end c:count}}",
        "variables": {"l": 5, "w": {"start": "2023-11-14T22:13:00+00:00"}, "p": [1, 4]},
    }
    body = orjson.loads(queries.windows_body("a.com", TimeRange(START, None)))
    assert body["variables"] == {"k": "a.com", "f": "2023-11-14T22:13:00+00:00", "t": None}


def test_latest_and_history_bodies() -> None:
    lookup = orjson.loads(view_queries(LAST_BOOKING).lookup_body(["c1", "c2"]))
    assert lookup == {
        "query": "query($r:[_Any!]!){r:_entities(representations:$r)"
        "{...on LastBooking{k:customer t:eventTime v0:trip}}}",
        "variables": {
            "r": [
                {"__typename": "LastBooking", "customer": "c1"},
                {"__typename": "LastBooking", "customer": "c2"},
            ]
        },
    }
    page = orjson.loads(
        view_queries(BOOKING_HISTORY).history_body("c1", TimeRange(None, END), 7, "QQ")
    )
    assert page["variables"] == {
        "k": "c1",
        "f": None,
        "t": "2023-11-14T22:14:00+00:00",
        "n": 7,
        "a": "QQ",
    }
    assert "edges{cursor node{k:customer t:eventTime v0:trip}}" in page["query"]


def test_a_kind_without_a_read_has_no_body() -> None:
    with pytest.raises(ValueError, match=r"word_counts .*has no history"):
        view_queries(WORDS).history_body("w", TimeRange(None, None), 1, None)
    with pytest.raises(ValueError, match=r"booking_history .*has no top-N"):
        view_queries(BOOKING_HISTORY).top_body(1, [0])


def test_readers_turn_answers_into_rows() -> None:
    window = {"k": "a", "s": "2023-11-14T22:13:00Z", "e": "2023-11-14T23:14:00+01:00", "c": 3}
    assert view_queries(PER_MINUTE).read_top([window]) == [WindowCount("a", START, END, 3)]
    assert view_queries(WORDS).read_lookup([{"k": "w", "c": 2}, None], 2) == [Row("w", 2), None]
    event = {"k": "c1", "t": "2023-11-14T22:13:00+00:00", "v0": None}
    assert view_queries(LAST_BOOKING).read_lookup([event], 1) == [
        Event("c1", START, {"trip": None})
    ]
    page = {
        "edges": [{"cursor": "QQ", "node": {**event, "v0": "rome"}}],
        "pageInfo": {"hasNextPage": True, "endCursor": "QQ"},
    }
    assert view_queries(BOOKING_HISTORY).read_page(page) == Page(
        [Edge("QQ", Event("c1", START, {"trip": "rome"}))], True, "QQ"
    )


BROKEN: list[tuple[Any, str, Any]] = [
    (WORDS, "lookup", [{"k": "w", "c": 2}]),  # two keys asked, one answered
    (WORDS, "lookup", [{"k": "w", "c": True}, None]),
    (WORDS, "top", {"k": "w", "c": 1}),
    (PER_MINUTE, "top", [{"k": "a", "s": "2023-11-14T22:13:00", "e": "2023-11-14T22:14Z", "c": 1}]),
    (PER_MINUTE, "windows", [{"k": "a", "s": "soon", "e": "later", "c": 1}]),
    (LAST_BOOKING, "lookup", [{"k": "c", "t": "2023-11-14T22:13:00Z", "v0": 5}, None]),
    (LAST_BOOKING, "lookup", [{"k": 7, "t": "2023-11-14T22:13:00Z"}, None]),
    (BOOKING_HISTORY, "page", {"edges": [], "pageInfo": {"hasNextPage": "no"}}),
    (BOOKING_HISTORY, "page", {"edges": [{"node": {}}], "pageInfo": {"hasNextPage": False}}),
    (BOOKING_HISTORY, "page", []),
]  # fmt: skip


@pytest.mark.parametrize(("view", "read", "data"), BROKEN)
def test_readers_reject_what_the_protocol_does_not_allow(view: Any, read: str, data: Any) -> None:
    queries = view_queries(view)
    readers = {
        "lookup": lambda d: queries.read_lookup(d, 2),
        "top": queries.read_top,
        "windows": queries.read_windows,
        "page": queries.read_page,
    }
    with pytest.raises(ValueError):
        readers[read](data)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _packed(view: Any, rows: dict[str, Any], partition: Any = 2) -> Any:
    return view_queries(view).read_slices([{"p": partition, "r": rows}])


def test_packed_scan_rows_are_read_as_the_rows_of_each_kind() -> None:
    (words,) = _packed(WORDS, {"a": ["6162", ""], "k": ["ab", "z"], "c": [1, 7]}).values()
    assert words.positions == [b"ab", b""]
    assert [words.row(i) for i in range(2)] == [Row("ab", 1), Row("z", 7)]
    window = {"a": ["00ff"], "k": ["a"], "s": [_ms(START)], "e": [_ms(END)], "c": [3]}
    (windows,) = _packed(PER_MINUTE, window).values()
    assert windows.positions == [b"\x00\xff"] and windows.row(0) == WindowCount("a", START, END, 3)
    events = {"a": ["01", "02"], "k": ["c1", "c2"], "t": [_ms(START)] * 2, "v0": [None, "rome"]}
    for view in (LAST_BOOKING, BOOKING_HISTORY):
        (read,) = _packed(view, events).values()
        assert [read.row(i) for i in range(2)] == [
            Event("c1", START, {"trip": None}),
            Event("c2", START, {"trip": "rome"}),
        ]


GOOD_WORDS = {"a": ["61"], "k": ["a"], "c": [1]}
BROKEN_SLICES: list[tuple[Any, Any]] = [
    (WORDS, {}),  # no slices
    (WORDS, [{"r": GOOD_WORDS}]),  # no partition
    (WORDS, [{"p": True, "r": GOOD_WORDS}]),
    (WORDS, [{"p": 1}]),  # no rows
    (WORDS, [{"p": 1, "r": [GOOD_WORDS]}]),
    (WORDS, [{"p": 1, "r": {"a": ["61"], "k": ["a"]}}]),  # a column missing
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "s": [0]}}]),  # a column of another kind
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "a": ["zz"]}}]),  # no hex
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "a": ["6 1"]}}]),  # spaces, which fromhex skips
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "a": ["616"]}}]),  # half a byte
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "a": [97]}}]),
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "a": "61"}}]),
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "k": ["a", "b"]}}]),  # longer than the positions
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "c": [True]}}]),
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "c": [1.0]}}]),
    (WORDS, [{"p": 1, "r": {**GOOD_WORDS, "k": [None]}}]),
    (PER_MINUTE, [{"p": 1, "r": {"a": ["61"], "k": ["a"], "s": ["2023-11-14T22:13:00Z"],
                                 "e": [0], "c": [1]}}]),
    (PER_MINUTE, [{"p": 1, "r": {"a": ["61"], "k": ["a"], "s": [0], "e": [10**20], "c": [1]}}]),
    (LAST_BOOKING, [{"p": 1, "r": {"a": ["61"], "k": ["a"], "t": [0], "v0": [5]}}]),
    (BOOKING_HISTORY, [{"p": 1, "r": {"a": ["61"], "k": ["a"], "t": [0]}}]),
]  # fmt: skip


@pytest.mark.parametrize(("view", "data"), BROKEN_SLICES)
def test_the_scan_reader_rejects_what_the_protocol_does_not_allow(view: Any, data: Any) -> None:
    with pytest.raises(ValueError):
        view_queries(view).read_slices(data)
