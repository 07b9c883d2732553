"""Which changes a top-N subscription reads the top again for (`gateway.subscriptions.top`):
a change of a key in the top, any change while the top is short, or one that ranks at
least as high as the top's last row, by count or by the result `by`, in the window asked
for: of an aggregate view's rows and of a windowed aggregate view's windows alike; and a
change that comes during a read, judged against the rows that read returns."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.cluster.routing import RoutingFeed
from gateway.model.rows import Event, Ranked, WindowCount
from gateway.nodes.hub import FeedHub
from gateway.reads.protocol import DEFAULT_READ, ReadOptions, Reads, TopResult
from gateway.subscriptions.top import _Watch, top_updates
from runtime.trust import NodeCallSigner
from schema import View
from schema.feed import Change
from tests.live.fake_feed import Changelog, FakeFeedNode, wait_for
from tests.live.test_hub import P, keys_in, record, table
from tests.live.test_subscription_fields import HOST_PAGES
from tests.live.test_subscription_fields_kinds import RankedTops, pages_row

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


class HeldTops(RankedTops):
    """Reads the top when asked but answers only once `answer` is set: a slow read, during
    which changes come."""

    def __init__(self, log: Changelog) -> None:
        super().__init__(log)
        self.answer = asyncio.Event()
        self.answer.set()

    async def top(
        self,
        view: View,
        limit: int,
        deadline: float,
        window: datetime | None = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult:
        result = await super().top(view, limit, deadline, window, options, by)
        await self.answer.wait()
        return result


def _hosts(update: Any) -> list[tuple[str, int]]:
    return [(row.key, row.values["pages"]) for row in update.rows]


@pytest.mark.timeout(60)
def test_a_change_during_a_read_is_judged_against_the_rows_the_read_returns() -> None:
    """A host's pages go down while the top is read again: the old top's last row ranks
    above it and it is not in the old top, but the read put it in the new top, at the value
    it had before. The change asks for another read."""

    async def scenario() -> None:
        log = Changelog(HOST_PAGES, P)
        a, b, c = keys_in(0, 3, "h")
        for host, pages in ((a, 9), (b, 5), (c, 3)):
            log.append(host, pages_row(host, 1, pages))
        n1 = await FakeFeedNode("n1", log, range(P)).start()
        hub = FeedHub(RoutingFeed(table(record(n1, [0, 1]))), NodeCallSigner(None), max_lag=1)
        await hub.start()
        tops = HeldTops(log)
        reads: Reads = tops  # type: ignore[assignment]  # only top is read
        updates = top_updates(hub, reads, HOST_PAGES, P, 2, None, 0, DEFAULT_READ, 10, "pages")
        try:
            assert _hosts(await anext(updates)) == [(a, 9), (b, 5)]
            tops.answer.clear()
            log.append(a, pages_row(a, 2, 1))  # a leaves the top: read again
            await n1.publish()
            second = asyncio.get_running_loop().create_task(anext(updates))
            await wait_for(lambda: tops.reads == 2, 10, "the second read")
            log.append(c, pages_row(c, 2, 2))  # while it runs; below 5 and not in the top
            await n1.publish()
            (stream,) = [s for s in hub.streams() if s.partition == 0]
            await wait_for(lambda: stream.reached == 5 and stream.held == 0, 10, "c's change")
            tops.answer.set()
            assert _hosts(await second) == [(b, 5), (c, 3)]
            async with asyncio.timeout(5):
                assert _hosts(await anext(updates)) == [(b, 5), (c, 2)]
            assert tops.reads == 3
        finally:
            await updates.aclose()
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())
