"""Checking a client's arguments before any node is asked: what no node could answer is
a `BadRequestError` (BAD_USER_INPUT) naming the view and the argument."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.model.errors import BadRequestError, TooManyRepresentationsError
from gateway.model.timestamps import EPOCH, ceil_ms, floor_ms, from_ms
from runtime.moments import in_utc
from schema import View

__all__ = [
    "MAX_CURSOR_CHARS",
    "MAX_PAGE_SIZE",
    "TimeRange",
    "as_of_end",
    "check_cursor",
    "check_key_bound",
    "check_key_range",
    "check_keys",
    "check_limit",
    "check_page_size",
    "check_representations",
    "check_scan",
    "time_range",
    "too_many_keys",
    "too_many_representations",
    "top_window",
    "window_start",
]

MAX_PAGE_SIZE = 1000  # what a node serves per history page
MAX_CURSOR_CHARS = 512
_MAX_MS = ceil_ms(datetime.max.replace(tzinfo=UTC))  # no datetime is this late or later
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]+={0,2}$")


@dataclass(frozen=True)
class TimeRange:
    """`since <= t < until` in whole UTC milliseconds, not before the epoch; None = open."""

    since: datetime | None
    until: datetime | None


def check_keys(view: View, keys: Sequence[str], max_keys: int | None, max_key_bytes: int) -> None:
    """Reject empty keys, keys that are no UTF-8 or longer than `max_key_bytes` of it, and
    more than `max_keys` keys (None: the caller bounds how many)."""
    if max_keys is not None and len(keys) > max_keys:
        raise too_many_keys(view, max_keys)
    for index, key in enumerate(keys):
        where = f" (position {index})" if len(keys) > 1 else ""
        if not key:
            raise BadRequestError(view.name, f"{view.key_field} must not be empty{where}")
        size = _utf8_size(view, view.key_field, key)
        if size > max_key_bytes:
            raise BadRequestError(
                view.name,
                f"{view.key_field} {key[:40]!r}... is {size} bytes of UTF-8{where}, at most "
                f"{max_key_bytes} (STATEFED_GATEWAY_MAX_KEY_BYTES)",
            )


def too_many_keys(view: View, max_keys: int) -> BadRequestError:
    """The error of a lookup of more than `max_keys` keys of `view`."""
    return BadRequestError(view.name, f"at most {max_keys} {view.keys_arg} per request")


def check_representations(count: int, max_count: int) -> None:
    """Reject an `_entities` call with more than `max_count` representations."""
    if count > max_count:
        raise too_many_representations(count, max_count)


def too_many_representations(count: int, max_count: int) -> TooManyRepresentationsError:
    """The error of an `_entities` call with `count` representations, over `max_count`."""
    return TooManyRepresentationsError(count, max_count, "STATEFED_GATEWAY_MAX_ENTITIES")


def check_limit(view: View, limit: int, max_limit: int) -> None:
    if not 1 <= limit <= max_limit:
        raise BadRequestError(view.name, f"limit must be in 1..{max_limit}, got {limit}")


def check_scan(
    view: View,
    first: int | None,
    last: int | None,
    after: str | None,
    before: str | None,
    max_page: int,
) -> None:
    """A scan pages forwards (`first`, `after`) or backwards (`last`, `before`), with a page
    size in 1..`max_page` (STATEFED_MAX_SCAN_PAGE)."""
    if (first is not None or after is not None) and (last is not None or before is not None):
        raise BadRequestError(
            view.name, "page forwards (first, after) or backwards (last, before), not both"
        )
    for name, size in (("first", first), ("last", last)):
        if size is not None and not 1 <= size <= max_page:
            raise BadRequestError(
                view.name,
                f"{name} must be in 1..{max_page} (STATEFED_MAX_SCAN_PAGE), got {size}",
            )


def check_key_bound(view: View, name: str, value: str | None, max_key_bytes: int) -> None:
    """A scan's `prefix`, `from` or `to`: text of at most `max_key_bytes` UTF-8 bytes."""
    if value is None:
        return
    size = _utf8_size(view, name, value)
    if size > max_key_bytes:
        raise BadRequestError(
            view.name,
            f"{name} is {size} bytes of UTF-8, at most {max_key_bytes} "
            "(STATEFED_GATEWAY_MAX_KEY_BYTES)",
        )


def check_key_range(view: View, since: str | None, until: str | None) -> None:
    """A scan's `from` at or before its `to`, as a time range's bounds are (in code points,
    the order of their UTF-8 bytes: the scan's)."""
    if since is not None and until is not None and since > until:
        raise BadRequestError(view.name, f"from {since[:40]!r} is after to {until[:40]!r}")


def check_page_size(view: View, first: int) -> None:
    if not 1 <= first <= MAX_PAGE_SIZE:
        raise BadRequestError(view.name, f"first must be in 1..{MAX_PAGE_SIZE}, got {first}")


def _utc(view: View, name: str, moment: datetime) -> datetime:
    try:
        return in_utc(name, moment)
    except ValueError as exc:
        raise BadRequestError(view.name, str(exc)) from exc


def window_start(view: View, start: datetime) -> datetime:
    """`start` in UTC, checked to begin one of the view's windows."""
    if view.window is None:
        raise BadRequestError(view.name, "the view has no windows")
    size = view.window.hop_ms
    moment = _utc(view, "window start", start)
    ms = floor_ms(moment)
    if moment != from_ms(ms) or ms % size != 0:
        raise BadRequestError(
            view.name,
            f"window start {moment.isoformat()} is not aligned to the windows' start every "
            f"{size} ms (the previous window starts at {from_ms(ms - ms % size).isoformat()})",
        )
    if moment < EPOCH:
        raise BadRequestError(view.name, f"window start {moment.isoformat()} is before 1970")
    return moment


def top_window(view: View, window: datetime | None) -> datetime | None:
    """The window a top-N reads: required by, and only by, windowed views."""
    if view.window is None:
        if window is not None:
            raise BadRequestError(view.name, "the view has no windows")
        return None
    if window is None:
        raise BadRequestError(view.name, "a window is needed, e.g. window: {start: ...}")
    return window_start(view, window)


def time_range(view: View, since: datetime | None, until: datetime | None) -> TimeRange:
    """`[since, until)` in UTC, rounded up to whole ms and raised to the epoch (event times are
    ms since the epoch, so neither changes which events or windows fall inside)."""
    start = None if since is None else _utc(view, "from", since)
    end = None if until is None else _utc(view, "to", until)
    if start is not None and end is not None and start > end:
        raise BadRequestError(view.name, f"from {start.isoformat()} is after to {end.isoformat()}")
    if _past_last_ms(start):  # no event time is this late: nothing is inside
        last = from_ms(_MAX_MS - 1)
        return TimeRange(last, last)
    return TimeRange(_whole_ms(start), None if _past_last_ms(end) else _whole_ms(end))


def as_of_end(view: View, at: datetime) -> datetime | None:
    """The exclusive end of the event times at or before `at` (events are whole ms): the
    ms after `at`'s; None (no end) past the last instant a datetime holds."""
    ms = floor_ms(_utc(view, "at", at)) + 1
    return None if ms >= _MAX_MS else from_ms(ms)


def _whole_ms(moment: datetime | None) -> datetime | None:
    return None if moment is None else from_ms(max(0, ceil_ms(moment)))


def _past_last_ms(moment: datetime | None) -> bool:
    """Whether `moment` is inside the last ms a datetime holds: an end there is no end."""
    return moment is not None and ceil_ms(moment) >= _MAX_MS


def check_cursor(view: View, cursor: str) -> None:
    """Reject what cannot be a cursor (base64url); the owning node checks what it encodes."""
    bad = not cursor or len(cursor) > MAX_CURSOR_CHARS or not _BASE64URL.match(cursor)
    if not bad:
        try:
            bare = cursor.rstrip("=")
            base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4))
        except (binascii.Error, ValueError):
            bad = True
    if bad:
        shown = cursor if len(cursor) <= 40 else cursor[:40] + "..."
        raise BadRequestError(
            view.name, f"after {shown!r} is no cursor of this view (use pageInfo.endCursor)"
        )


def _utf8_size(view: View, name: str, value: str) -> int:
    """The UTF-8 length of `value`, the argument `name`; text that has none (a lone
    surrogate) is BAD_USER_INPUT."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BadRequestError(view.name, f"{name} {value!r} is no text") from exc
