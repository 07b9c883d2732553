"""Unit tests of whole-view scans in the gateway: the cursor codec (gateway.model.cursors) and the
merge of the partitions' slices into pages (gateway.model.scans), with partitions modelled as
sorted lists of keys."""

from __future__ import annotations

import base64
import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.model import cursors
from gateway.model.cursors import KEY_ORDER, ScanCursor, ScanFilter
from gateway.model.errors import BadRequestError
from gateway.model.rows import Row
from gateway.model.scans import ScanPage, ScanSlice, merge_page
from schema import WORD_COUNTS, pack_str

VIEW = WORD_COUNTS
FILTER = ScanFilter("k", "a", None)
positions = st.none() | st.binary(max_size=12)


def _cursor(backward: bool, at: bytes | None, at_each: list[bytes | None]) -> ScanCursor:
    return ScanCursor(VIEW.name, KEY_ORDER, FILTER, len(at_each), backward, at, tuple(at_each))


@given(st.booleans(), positions, st.lists(positions, min_size=1, max_size=8))
def test_a_cursor_decodes_to_what_it_encodes(
    backward: bool, at: bytes | None, at_each: list[bytes | None]
) -> None:
    cursor = _cursor(backward, at, at_each)
    text = cursors.encode(cursor)
    assert text.isascii() and "=" not in text and "+" not in text and "/" not in text
    assert cursors.decode(VIEW, text, "after", KEY_ORDER, FILTER, len(at_each)) == cursor


def test_a_cursor_continues_its_own_direction_and_stands_for_its_edge_the_other_way() -> None:
    cursor = _cursor(False, b"e", [b"e", None, b"x"])
    assert cursor.starts(backward=False) == (b"e", None, b"x")
    assert cursor.starts(backward=True) == (b"e", b"e", b"e")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"view": "host_access"}, "is a cursor of view host_access"),
        ({"order": "count"}, "in count order"),
        ({"scan_filter": ScanFilter("k")}, "another prefix, from, to"),
        ({"scan_filter": ScanFilter(since_ms=0, until_ms=60_000)}, "window or time range"),
        ({"partitions": 2, "positions": (None, None)}, "had 2 partitions, it has 3 now"),
    ],
)
def test_a_cursor_of_another_scan_is_bad_user_input_naming_the_argument(
    change: dict[str, object], problem: str
) -> None:
    other = dataclasses.replace(_cursor(False, b"e", [b"e", None, b"x"]), **change)  # type: ignore[arg-type]
    with pytest.raises(BadRequestError) as raised:
        cursors.decode(VIEW, cursors.encode(other), "before", KEY_ORDER, FILTER, 3)
    assert "before: the cursor" in str(raised.value) and problem in str(raised.value)
    assert raised.value.extensions()["code"] == "BAD_USER_INPUT"


@pytest.mark.parametrize("text", ["", "!!", "e30", "bm9wZQ", "x" * 2_000_000])
def test_what_no_page_made_is_no_cursor(text: str) -> None:
    with pytest.raises(BadRequestError, match="after: the cursor is no cursor of this field"):
        cursors.decode(VIEW, text, "after", KEY_ORDER, FILTER, 3)


# -- merging slices into pages --------------------------------------------------------------

P = 4


def _position(key: str) -> bytes:
    return pack_str(key)


def _slice(rows: list[str], start: bytes | None, size: int, backward: bool) -> list[str]:
    """What a node answers: up to `size` rows of a partition past `start`."""
    ordered = sorted(rows, key=_position, reverse=backward)
    if start is not None:
        ordered = [
            k for k in ordered if (_position(k) < start if backward else _position(k) > start)
        ]
    return ordered[:size]


def _page(
    partitions: list[list[str]],
    start: ScanCursor,
    size: int,
    failed: frozenset[int] = frozenset(),
) -> ScanPage:
    slices = {
        p: ScanSlice.of(
            [
                (_position(k), Row(k, 1))
                for k in _slice(rows, start.positions[p], size + 1, start.backward)
            ]
        )
        for p, rows in enumerate(partitions)
        if p not in failed
    }
    return merge_page(start, slices, size, failed)


def _next(page: ScanPage, backward: bool) -> ScanCursor | None:
    more = page.has_previous_page if backward else page.has_next_page
    text = page.start_cursor if backward else page.end_cursor
    if not more or text is None:
        return None
    return cursors.decode(VIEW, text, "before" if backward else "after", KEY_ORDER, FILTER, P)


def _first(backward: bool) -> ScanCursor:
    return _cursor(backward, None, [None] * P)


keys = st.text(alphabet=st.sampled_from(["a", "b", "\x00", "é"]), min_size=1, max_size=4)
partitioned = st.lists(
    st.tuples(keys, st.integers(0, P - 1)), max_size=40, unique_by=lambda t: t[0]
)


def _split(assigned: list[tuple[str, int]]) -> list[list[str]]:
    partitions: list[list[str]] = [[] for _ in range(P)]
    for key, partition in assigned:
        partitions[partition].append(key)
    return partitions


@settings(max_examples=200, deadline=None)
@given(partitioned, st.lists(st.integers(1, 7), min_size=1), st.booleans())
def test_pages_add_up_to_every_key_in_utf8_order(
    assigned: list[tuple[str, int]], sizes: list[int], backward: bool
) -> None:
    partitions = _split(assigned)
    cursor: ScanCursor | None = _first(backward)
    seen: list[str] = []
    turn = 0
    while cursor is not None:
        size = sizes[turn % len(sizes)]
        page = _page(partitions, cursor, size)
        assert len(page.edges) <= size
        page_keys = [e.row.key for e in page.edges]
        assert page_keys == sorted(page_keys, key=_position)  # edges in key order either way
        seen.extend(reversed(page_keys) if backward else page_keys)
        cursor = _next(page, backward)
        turn += 1
    expected = sorted((k for k, _ in assigned), key=_position, reverse=backward)
    assert seen == expected


@settings(max_examples=200, deadline=None)
@given(
    partitioned,
    partitioned,
    st.integers(1, 5),
    st.lists(st.frozensets(st.integers(0, P - 1), max_size=2), min_size=1),
)
def test_keys_added_and_partitions_failing_while_paging_skip_or_repeat_nothing(
    before: list[tuple[str, int]],
    added: list[tuple[str, int]],
    size: int,
    failing: list[frozenset[int]],
) -> None:
    """Keys there from the start come exactly once, added ones at most once; a partition
    that fails on a page is read from where it stopped on the next."""
    partitions = _split(before)
    known = {k for k, _ in before}
    additions = [(k, p) for k, p in added if k not in known]
    cursor: ScanCursor | None = _first(False)
    seen: list[str] = []
    turn = 0
    while cursor is not None:
        # after a few rounds, every partition answers: the scan must end
        failed = failing[turn] if turn < len(failing) else frozenset()
        page = _page(partitions, cursor, size, failed)
        if failed:
            assert page.has_next_page and page.end_cursor is not None
        seen.extend(e.row.key for e in page.edges)
        if additions:
            key, partition = additions.pop()
            partitions[partition].append(key)
        cursor = _next(page, False)
        turn += 1
    assert len(seen) == len(set(seen))
    assert known <= set(seen)


@settings(max_examples=100, deadline=None)
@given(partitioned, st.integers(1, 7), st.booleans(), st.frozensets(st.integers(0, P - 1)))
def test_each_edges_cursor_pages_on_right_after_that_edge(
    assigned: list[tuple[str, int]], size: int, backward: bool, failed: frozenset[int]
) -> None:
    """Paging on from any edge's cursor reads what follows that edge; a partition that
    failed is still read from where it stood."""
    partitions = _split(assigned)
    page = _page(partitions, _first(backward), size, failed)
    answered = sorted(
        (k for p, rows in enumerate(partitions) if p not in failed for k in rows),
        key=_position,
        reverse=backward,
    )
    argument = "before" if backward else "after"
    for edge in page.edges:
        cursor = cursors.decode(VIEW, page.cursor(edge), argument, KEY_ORDER, FILTER, P)
        assert cursor.at == _position(edge.row.key)
        after = answered[answered.index(edge.row.key) + 1 :]
        lost = sorted((k for p in failed for k in partitions[p]), key=_position, reverse=backward)
        following = [e.row.key for e in _page(partitions, cursor, len(assigned) + 1).edges]
        expected = sorted(after + lost, key=_position)
        assert following == expected
    if page.edges:
        assert page.start_cursor == page.cursor(page.edges[0])
        assert page.end_cursor == page.cursor(page.edges[-1])


def test_a_page_that_only_failed_resumes_from_the_same_positions() -> None:
    partitions = [["a"], ["b"], [], []]
    start = _cursor(False, None, [None, _position("b"), None, None])
    page = _page(partitions, start, 5, frozenset({0}))
    assert page.edges == [] and page.has_next_page
    assert page.end_cursor is not None
    resumed = cursors.decode(VIEW, page.end_cursor, "after", KEY_ORDER, FILTER, P)
    assert resumed.positions == start.positions
    assert [e.row.key for e in _page(partitions, resumed, 5).edges] == ["a"]


def test_an_empty_view_is_one_empty_page_without_cursors() -> None:
    page = _page([[], [], [], []], _first(False), 10)
    assert page == ScanPage([], False, False, None, None)


def test_a_cursor_made_before_window_starts_were_kept_still_decodes() -> None:
    cursor = _cursor(False, b"e", [b"e", None, b"x"])
    doc = orjson.loads(base64.urlsafe_b64decode(cursors.encode(cursor) + "=="))
    doc["f"] = doc["f"][:3]
    old = base64.urlsafe_b64encode(orjson.dumps(doc)).rstrip(b"=").decode("ascii")
    assert cursors.decode(VIEW, old, "after", KEY_ORDER, FILTER, 3) == cursor
