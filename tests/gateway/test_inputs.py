"""Time conversions and the checks of client arguments, without any node."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.model.errors import BadRequestError
from gateway.model.inputs import check_cursor, time_range, top_window, window_start
from gateway.model.timestamps import ceil_ms, floor_ms, from_ms, iso, parse_utc
from tests.gateway.fakes import PER_MINUTE, WORDS

# hypothesis wants naive bounds and attaches the time zones itself
moments = st.datetimes(
    min_value=datetime(1960, 1, 1),  # noqa: DTZ001
    max_value=datetime(2200, 1, 1),  # noqa: DTZ001
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
    ),
)


@given(st.integers(-(10**13), 10**14))
def test_ms_round_trip_exactly(ms: int) -> None:
    moment = from_ms(ms)
    assert moment.tzinfo is UTC
    assert floor_ms(moment) == ceil_ms(moment) == ms
    assert parse_utc(iso(moment)) == moment


@given(moments)
def test_floor_and_ceil_bracket_the_moment(moment: datetime) -> None:
    low, high = floor_ms(moment), ceil_ms(moment)
    assert from_ms(low) <= moment <= from_ms(high)
    assert high - low == (0 if moment.microsecond % 1000 == 0 else 1)
    assert parse_utc(moment.isoformat()) == moment
    assert iso(moment).endswith("+00:00")


def test_parse_utc_refuses_naive_text() -> None:
    with pytest.raises(ValueError, match="no UTC offset"):
        parse_utc("2023-11-14T22:13:00")


def test_window_start_must_be_aligned_whole_ms_after_1970() -> None:
    aligned = from_ms(60_000 * 28_333_333)
    assert window_start(PER_MINUTE, aligned.astimezone(timezone(timedelta(hours=2)))) == aligned
    for bad in (
        aligned + timedelta(milliseconds=1),
        aligned + timedelta(microseconds=1),
        datetime(1969, 12, 31, 23, 59, tzinfo=UTC),
        aligned.replace(tzinfo=None),
    ):
        with pytest.raises(BadRequestError):
            window_start(PER_MINUTE, bad)


def test_a_top_window_is_needed_by_and_only_by_windowed_views() -> None:
    assert top_window(WORDS, None) is None
    with pytest.raises(BadRequestError, match="no windows"):
        top_window(WORDS, from_ms(0))
    with pytest.raises(BadRequestError, match="window is needed"):
        top_window(PER_MINUTE, None)


@given(moments, moments)
def test_time_range_rounds_up_and_raises_to_the_epoch(a: datetime, b: datetime) -> None:
    low, high = min(a, b), max(a, b)
    span = time_range(PER_MINUTE, low, high)
    assert span.since == from_ms(max(0, ceil_ms(low)))
    assert span.until == from_ms(max(0, ceil_ms(high)))
    # an event time t (whole ms, not before 1970) is inside exactly when it is in [low, high)
    for t in {0, floor_ms(low), ceil_ms(low), floor_ms(high), ceil_ms(high)}:
        if t >= 0:
            inside = low <= from_ms(t) < high
            assert inside == (span.since <= from_ms(t) < span.until)  # type: ignore[operator]
    if low != high:
        with pytest.raises(BadRequestError, match="is after"):
            time_range(PER_MINUTE, high, low)


def test_a_bound_inside_the_last_millisecond_there_is_reads_to_the_end() -> None:
    last = datetime.max.replace(tzinfo=UTC)  # 9999-12-31T23:59:59.999999Z
    inside = last - timedelta(microseconds=400)  # rounds up past every datetime
    assert time_range(PER_MINUTE, None, inside).until is None  # every event is before it
    empty = time_range(PER_MINUTE, inside, None)  # no event is at or after it
    assert empty.since == empty.until == from_ms(floor_ms(last))
    assert time_range(PER_MINUTE, last, last) == empty


def test_open_ranges_stay_open() -> None:
    span = time_range(PER_MINUTE, None, None)
    assert span.since is None and span.until is None


@pytest.mark.parametrize(
    "cursor",
    [
        base64.urlsafe_b64encode(b"\x00\x01\xfe\xff" * 4).decode().rstrip("="),
        base64.urlsafe_b64encode(b"1234").decode(),  # padded
        "AAAA",
    ],
)
def test_base64url_cursors_pass(cursor: str) -> None:
    check_cursor(PER_MINUTE, cursor)


@pytest.mark.parametrize("cursor", ["", "A", "ab+/", "a b", "AAAA===", "é", "A" * 513])
def test_what_cannot_be_a_cursor_is_bad_user_input(cursor: str) -> None:
    with pytest.raises(BadRequestError) as raised:
        check_cursor(PER_MINUTE, cursor)
    assert raised.value.extensions() == {"code": "BAD_USER_INPUT", "view": PER_MINUTE.name}


def test_parse_utc_refuses_a_time_outside_the_years_utc_holds() -> None:
    with pytest.raises(ValueError, match="outside the years 1 to 9999"):
        parse_utc("0001-01-01T00:00:00+14:00")
