"""Which changes a top-N subscription reads the top again for (`gateway.subscriptions.top`):
a change of a key in the top, any change while the top is short, or one that ranks at
least as high as the top's last row, by count or by the result `by`, in the window asked
for: of an aggregate view's rows and of a windowed aggregate view's windows alike."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.model.rows import Event, Ranked, WindowCount
from gateway.subscriptions.top import _Watch
from schema.feed import Change

START = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = 3_600_000
AT = int(START.timestamp() * 1000)


def _window(key: str, count: int, basket: float | None) -> WindowCount:
    return WindowCount(key, START, START, count, {"basket": basket})


def _change(key: str, row: dict[str, Any] | None, start: int = AT) -> Change:
    return Change("hourly_baskets", key, 1, row, (start,))


def _windowed(count: int, basket: float | None) -> dict[str, Any]:
    return {"start_ms": AT, "end_ms": AT + HOUR, "count": count, "fields": {"basket": basket}}


@pytest.mark.parametrize(
    ("top", "by"),
    [
        ([_window("a", 9, 50.0), _window("b", 2, 10.0)], "basket"),
        ([Event("a", START, {"basket": 50.0}), Event("b", START, {"basket": 10.0})], "basket"),
    ],
)
def test_a_change_matters_when_it_could_enter_the_top_by_its_result(
    top: list[Ranked], by: str
) -> None:
    watch = _Watch(limit=2, window_ms=AT if isinstance(top[0], WindowCount) else None, by=by)
    watch.rows = top
    at = (AT,) if watch.window_ms is not None else ()

    def change(key: str, count: int, basket: float | None) -> Change:
        return Change("v", key, 1, _windowed(count, basket), at)

    assert watch.matters(change("c", 1, 10.0))  # ties the last row
    assert not watch.matters(change("c", 100, 9.5))  # a larger count is not what ranks
    assert not watch.matters(change("c", 1, None))  # no basket: in no ranking
    assert watch.matters(change("b", 1, 1.0))  # a row of the top changed
    assert watch.matters(Change("v", "c", 1, None, at))  # a deletion


def test_a_change_of_another_window_never_matters() -> None:
    watch = _Watch(limit=1, window_ms=AT, by="basket")
    watch.rows = [_window("a", 1, 5.0)]
    assert not watch.matters(_change("c", _windowed(1, 500.0), start=AT + HOUR))
    assert watch.matters(_change("c", _windowed(1, 500.0)))
