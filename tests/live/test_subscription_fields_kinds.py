"""The subscription fields of windowed and history views and the top-N (of a count view,
of a window, of an aggregate view by a chosen result), run with graphql-core's subscribe()
on the gateway's schema over fake node feeds."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest

from gateway.api.responses import gateway_extensions
from gateway.model.rows import Event, Ranked, Row, WindowCount
from gateway.model.timestamps import floor_ms, from_ms
from gateway.reads.protocol import DEFAULT_READ, ReadOptions, TopResult
from gateway.subscriptions.tokens import ResumeToken
from runtime.ranking import is_rankable, merge_top, value_rank
from schema import View
from tests.gateway.fakes import BOOKING_HISTORY, HOSTS, PER_MINUTE
from tests.live.fake_feed import Changelog, count_row, wait_for
from tests.live.test_hub import P, keys_in, record
from tests.live.test_subscription_fields import (
    HOST_PAGES,
    cluster,
    delivered,
    open_subscription,
    take,
)

pytestmark = pytest.mark.timeout(60)

MINUTE = 60_000
T0 = 1_700_000_040_000 - 1_700_000_040_000 % MINUTE


def window_row(host: str, start: int, count: int) -> dict[str, Any]:
    return {
        "key": host,
        "start_ms": start,
        "end_ms": start + MINUTE,
        "count": count,
        "last_event_ms": start + count,
    }


def event_row(customer: str, n: int) -> dict[str, Any]:
    return {
        "key": customer,
        "event_ms": T0 + n,
        "source_partition": 0,
        "source_offset": n,
        "fields": {"trip": f"trip-{n}"},
    }


WINDOWS = """subscription($h: String!) {
  hostAccessWindows(host: $h) { host start end count offset }
}"""


def test_a_windows_subscription_starts_with_the_keys_windows_then_each_change() -> None:
    async def scenario() -> None:
        async with cluster(PER_MINUTE) as running:
            log = running.logs[PER_MINUTE.name]
            (host,) = keys_in(0, 1, "h")
            log.append(host, window_row(host, T0, 1), (T0,))
            log.append(host, window_row(host, T0 + MINUTE, 1), (T0 + MINUTE,))
            log.append(host, window_row(host, T0, 2), (T0,))
            n1 = await running.node("n1", PER_MINUTE)
            running.route(record(n1, [0, 1]))
            results = await open_subscription(running, WINDOWS, {"h": host})
            first = [d["hostAccessWindows"] for d in await take(results, 2)]
            assert sorted((u["start"], u["end"], u["count"], u["offset"]) for u in first) == [
                # read at applied offset 3: they hold the records up to offset 2
                (datetime_text(T0), datetime_text(T0 + MINUTE), 2, "2"),
                (datetime_text(T0 + MINUTE), datetime_text(T0 + 2 * MINUTE), 1, "2"),
            ]
            log.append(host, None, (T0,))  # retention removes the first window
            log.append(host, window_row(host, T0 + MINUTE, 2), (T0 + MINUTE,))
            await running.publish()
            got = [d["hostAccessWindows"] for d in await take(results, 2)]
            assert [(u["start"], u["count"], u["offset"]) for u in got] == [
                (datetime_text(T0), None, "3"),
                (datetime_text(T0 + MINUTE), 2, "4"),
            ]
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def datetime_text(ms: int) -> str:
    return from_ms(ms).isoformat()


HISTORY = """subscription($c: String!, $after: String) {
  bookingHistory(customer: $c, after: $after) { customer trip eventTime offset token }
}"""


def test_a_history_subscription_gets_each_new_event_once_in_order_even_when_read_late() -> None:
    async def scenario() -> None:
        async with cluster(BOOKING_HISTORY) as running:
            log = running.logs[BOOKING_HISTORY.name]
            (customer,) = keys_in(1, 1, "c")
            log.append(customer, event_row(customer, 0), (T0, 0, 0))  # before: not shown
            n1 = await running.node("n1", BOOKING_HISTORY)
            running.route(record(n1, [0, 1]))
            results = await open_subscription(running, HISTORY, {"c": customer})
            # a subscription follows once it is read from, as a transport does at once
            reading = asyncio.get_running_loop().create_task(take(results, 5))
            await wait_for(lambda: n1.follows_open() == 2, 10, "its own and the shared follow")
            for n in range(1, 6):
                log.append(customer, event_row(customer, n), (T0 + n, 0, n))
            await running.publish()
            got = [d["bookingHistory"] for d in await reading]
            assert [u["trip"] for u in got] == [f"trip-{n}" for n in range(1, 6)]
            assert [u["offset"] for u in got] == ["1", "2", "3", "4", "5"]
            # resuming after the third gets the fourth and fifth again, nothing else
            resumed = await open_subscription(
                running, HISTORY, {"c": customer, "after": got[2]["token"]}
            )
            again = [d["bookingHistory"]["offset"] for d in await take(resumed, 2)]
            assert again == ["4", "5"]
            await results.aclose()  # type: ignore[union-attr]
            await resumed.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_history_subscriber_too_slow_for_its_queue_is_ended_with_the_way_to_resume() -> None:
    async def scenario() -> None:
        async with cluster(BOOKING_HISTORY) as running:
            running.config = dataclasses.replace(running.config, subscription_queue=3)
            log = running.logs[BOOKING_HISTORY.name]
            (customer,) = keys_in(0, 1, "c")
            n1 = await running.node("n1", BOOKING_HISTORY)
            running.route(record(n1, [0, 1]))
            results = await open_subscription(running, HISTORY, {"c": customer})
            reading = asyncio.get_running_loop().create_task(take(results, 1))
            await wait_for(lambda: n1.follows_open() == 2, 10, "its own and the shared follow")
            log.append(customer, event_row(customer, 0), (T0, 0, 0))
            await running.publish()
            await reading
            # its own follow (paced by the reader) handed over to the shared one, which
            # cannot wait for one subscriber
            await wait_for(lambda: n1.follows_open() == 1, 10, "the hand-over")
            for n in range(1, 6):
                log.append(customer, event_row(customer, n), (T0 + n, 0, n))
            await running.publish()
            await wait_for(lambda: delivered(running, 6), 10, "all in")
            got = [d["bookingHistory"]["offset"] for d in await take(results, 3)]
            assert got == ["1", "2", "3"]
            result = await anext(results)  # type: ignore[arg-type]
            assert result.errors is not None
            (error,) = result.errors
            assert gateway_extensions(error.original_error) == {  # type: ignore[arg-type]
                "code": "SUBSCRIBER_TOO_SLOW",
                "view": "booking_history",
            }
            assert "subscribe again with `after` set to the token" in error.message
            with pytest.raises(StopAsyncIteration):  # the subscription is over
                await anext(results)  # type: ignore[arg-type]

    asyncio.run(scenario())


def test_a_history_subscriber_far_behind_gets_its_whole_replay_at_its_own_pace() -> None:
    """Resumed from a token far behind, the replay comes to the subscription in batches that
    together pass its bound: each batch waits until it fits, and past the few its follow
    holds the follow stops, then starts again where it was once they are taken. So the
    subscriber gets every event in order, once, instead of SUBSCRIBER_TOO_SLOW after the
    first `bound`, and a reader that stalls holds a few batches, not the whole replay."""
    events, step, bound = 60, 5, 10

    async def scenario() -> None:
        async with cluster(BOOKING_HISTORY) as running:
            running.config = dataclasses.replace(running.config, subscription_queue=bound)
            log = running.logs[BOOKING_HISTORY.name]
            (customer,) = keys_in(0, 1, "c")
            for n in range(events):
                log.append(customer, event_row(customer, n), (T0 + n, 0, n))
            n1 = await running.node("n1", BOOKING_HISTORY)
            n1.replay_step = step  # the replay comes `step` offsets a round, as node frames
            running.route(record(n1, [0, 1]))
            token = ResumeToken(BOOKING_HISTORY.name, {p: 0 for p in range(P)}).text()
            results = await open_subscription(running, HISTORY, {"c": customer, "after": token})
            first = await take(results, 1)
            await wait_for(lambda: n1.follows_open() == 2, 10, "its own and the shared follow")
            for _round in range(events // step - 1):  # the rest, before the subscriber reads
                await running.publish()
            # two batches wait for the subscriber, one for room, eight in its follow: the
            # follow stopped at the next
            await wait_for(lambda: n1.follows_open() == 1, 10, "the replay's follow to stop")
            n1.replay_step = None  # followed again, the rest comes in one frame
            got = first + await take(results, events - 1)
            assert [d["bookingHistory"]["offset"] for d in got] == [str(n) for n in range(events)]

    asyncio.run(scenario())


class ChangelogTops:
    """The planner's top-N read over the changelog's newest rows (for the top subscription's
    unit test: what a node would answer), counting the reads."""

    def __init__(self, log: Changelog) -> None:
        self.log = log
        self.reads = 0

    def check_keys(self, view: View, keys: Sequence[str], *, counted: bool = True) -> None:
        pass

    async def top(
        self,
        view: View,
        limit: int,
        deadline: float,
        window: datetime | None = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult:
        self.reads += 1
        newest: dict[str, int] = {}
        for partition in range(P):
            for change in self.log.of(partition):
                if change.row is not None:
                    newest[change.key] = change.row["count"]
        rows = [Row(key, count) for key, count in newest.items()]
        return TopResult(merge_top([rows], limit), {}, [{"partition": 0, "node": "n1"}])


TOP = """subscription { topHosts(limit: 2, interval: 100) { rows { host count } token } }"""


def test_a_top_subscription_pushes_the_top_when_it_changes_and_reads_only_then() -> None:
    async def scenario() -> None:
        async with cluster(HOSTS) as running:
            log = running.logs[HOSTS.name]
            a, b, c = keys_in(0, 2, "a") + keys_in(1, 1, "c")
            log.append(a, count_row(a, 5))
            log.append(b, count_row(b, 3))
            tops = ChangelogTops(log)
            running.planner = tops  # type: ignore[assignment]  # only top is read
            n1 = await running.node("n1", HOSTS)
            running.route(record(n1, [0, 1]))
            results = await open_subscription(running, TOP, {})
            (first,) = await take(results, 1)
            assert first["topHosts"]["rows"] == [{"host": a, "count": 5}, {"host": b, "count": 3}]
            assert tops.reads == 1
            log.append(c, count_row(c, 1))  # below the top's last row: no read
            await running.publish()
            (stream,) = [s for s in running.hub.streams() if s.partition == 1]
            await wait_for(lambda: stream.reached == 1 and stream.held == 0, 10, "c's change")
            assert tops.reads == 1
            log.append(c, count_row(c, 4))  # enters the top
            await running.publish()
            (second,) = await take(results, 1)
            assert second["topHosts"]["rows"] == [{"host": a, "count": 5}, {"host": c, "count": 4}]
            assert tops.reads == 2
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_top_subscription_refuses_an_interval_below_the_minimum() -> None:
    async def scenario() -> None:
        async with cluster(HOSTS) as running:
            query = TOP.replace("interval: 100", "interval: 5")
            result = await open_subscription(running, query, {})
            assert not hasattr(result, "__anext__") and result.errors  # type: ignore[union-attr]
            assert "interval must be in 100..3600000 ms, got 5" in result.errors[0].message  # type: ignore[union-attr]

    asyncio.run(scenario())


class WindowTops(ChangelogTops):
    """The top of one window over the changelog's newest window rows."""

    async def top(
        self,
        view: View,
        limit: int,
        deadline: float,
        window: datetime | None = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult:
        self.reads += 1
        assert window is not None
        start = floor_ms(window)
        newest: dict[str, int] = {}
        for partition in range(P):
            for change in self.log.of(partition):
                if change.row is not None and change.at == (start,):
                    newest[change.key] = change.row["count"]
        rows: list[Ranked] = [
            WindowCount(k, window, from_ms(start + MINUTE), c) for k, c in newest.items()
        ]
        return TopResult(merge_top([rows], limit))


def test_a_window_top_subscription_reads_again_only_for_changes_of_its_window() -> None:
    async def scenario() -> None:
        async with cluster(PER_MINUTE) as running:
            log = running.logs[PER_MINUTE.name]
            (a,), (b,) = keys_in(0, 1, "a"), keys_in(1, 1, "b")
            log.append(a, window_row(a, T0, 2), (T0,))
            tops = WindowTops(log)
            running.planner = tops  # type: ignore[assignment]  # only top is read
            n1 = await running.node("n1", PER_MINUTE)
            running.route(record(n1, [0, 1]))
            query = (
                "subscription($s: DateTime!) { topHostsPerMinute(limit: 5, window: {start: $s}, "
                "interval: 100) { rows { host count start } } }"
            )
            results = await open_subscription(running, query, {"s": datetime_text(T0)})
            (first,) = await take(results, 1)
            assert first["topHostsPerMinute"]["rows"] == [
                {"host": a, "count": 2, "start": datetime_text(T0)}
            ]
            log.append(b, window_row(b, T0 + MINUTE, 9), (T0 + MINUTE,))  # the next window
            await running.publish()
            (stream,) = [s for s in running.hub.streams() if s.partition == 1]
            await wait_for(lambda: stream.reached == 1 and stream.held == 0, 10, "b's change")
            assert tops.reads == 1
            log.append(b, window_row(b, T0, 3), (T0,))
            await running.publish()
            (second,) = await take(results, 1)
            assert [r["host"] for r in second["topHostsPerMinute"]["rows"]] == [b, a]
            assert tops.reads == 2
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def pages_row(host: str, views: int, pages: int) -> dict[str, Any]:
    return {
        "key": host,
        "event_ms": T0 + views,
        "source_partition": 0,
        "source_offset": views,
        "fields": {"views": views, "pages": pages},
    }


class RankedTops(ChangelogTops):
    """The top of an aggregate view by the result `by` over the changelog's newest rows."""

    async def top(
        self,
        view: View,
        limit: int,
        deadline: float,
        window: datetime | None = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult:
        self.reads += 1
        assert by is not None
        newest: dict[str, Mapping[str, Any]] = {}
        for partition in range(P):
            for change in self.log.of(partition):
                if change.row is not None:
                    newest[change.key] = change.row
        rows: list[Ranked] = [
            Event(key, from_ms(row["event_ms"]), row["fields"])
            for key, row in newest.items()
            if is_rankable(row["fields"].get(by))
        ]
        order = lambda row: value_rank(row.values[by], row.key)  # noqa: E731
        return TopResult(merge_top([rows], limit, order))


def test_an_aggregate_top_subscription_follows_the_result_it_ranks_by() -> None:
    async def scenario() -> None:
        async with cluster(HOST_PAGES) as running:
            log = running.logs[HOST_PAGES.name]
            (a, b), (c,) = keys_in(0, 2, "a"), keys_in(1, 1, "c")
            log.append(a, pages_row(a, 9, 1))
            log.append(b, pages_row(b, 2, 5))
            tops = RankedTops(log)
            running.planner = tops  # type: ignore[assignment]  # only top is read
            n1 = await running.node("n1", HOST_PAGES)
            running.route(record(n1, [0, 1]))
            query = (
                "subscription { topHostsByPages(limit: 2, by: PAGES, interval: 100)"
                " { rows { host views pages } } }"
            )
            results = await open_subscription(running, query, {})
            (first,) = await take(results, 1)
            assert first["topHostsByPages"]["rows"] == [
                {"host": b, "views": 2, "pages": 5},
                {"host": a, "views": 9, "pages": 1},
            ]
            log.append(c, pages_row(c, 50, 0))  # most views, fewest pages: no read
            await running.publish()
            (stream,) = [s for s in running.hub.streams() if s.partition == 1]
            await wait_for(lambda: stream.reached == 1 and stream.held == 0, 10, "c's change")
            assert tops.reads == 1
            log.append(c, pages_row(c, 51, 3))  # enters the top by pages
            await running.publish()
            (second,) = await take(results, 1)
            assert [r["host"] for r in second["topHostsByPages"]["rows"]] == [b, c]
            assert tops.reads == 2
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


@pytest.mark.parametrize("subscribers", [1, 12])
def test_key_subscriptions_move_to_one_shared_follow_and_miss_no_event(subscribers: int) -> None:
    """Each key subscription starts on a follow of its own, then joins the partition's
    shared follow: the events published while they move come once each, in order, and the
    node is left with one follow for all of them."""
    rounds = 30

    async def scenario() -> None:
        async with cluster(BOOKING_HISTORY) as running:
            log = running.logs[BOOKING_HISTORY.name]
            customers = keys_in(1, subscribers, "c")
            n1 = await running.node("n1", BOOKING_HISTORY)
            running.route(record(n1, [0, 1]))
            readers = []
            for customer in customers:
                results = await open_subscription(running, HISTORY, {"c": customer})
                readers.append(asyncio.get_running_loop().create_task(take(results, rounds)))
            await wait_for(lambda: n1.follows_open() == subscribers + 1, 10, "every follow")
            for n in range(rounds):
                for customer in customers:
                    log.append(customer, event_row(customer, n), (T0 + n, 0, n))
                await running.publish()
                await asyncio.sleep(0)  # let the moves interleave with the rounds
            for customer, reader in zip(customers, readers, strict=True):
                got = [d["bookingHistory"] for d in await reader]
                assert [u["trip"] for u in got] == [f"trip-{n}" for n in range(rounds)], customer
                assert all(u["customer"] == customer for u in got)
            await wait_for(lambda: n1.follows_open() == 1, 10, "the shared follow only")

    asyncio.run(scenario())


def test_resumed_key_subscriptions_catch_up_on_their_own_then_share_without_gap_or_repeat() -> None:
    """Subscriptions resumed from old tokens replay on follows of their own while the
    shared follow, started at the resume, is ahead: they join it once they reach where it
    began, and get every event after their token once."""
    before, between, after = 10, 10, 20

    async def scenario() -> None:
        async with cluster(BOOKING_HISTORY) as running:
            log = running.logs[BOOKING_HISTORY.name]
            customers = keys_in(1, 6, "c")
            n1 = await running.node("n1", BOOKING_HISTORY)
            running.route(record(n1, [0, 1]))
            opened, readings = [], []
            for customer in customers:
                results = await open_subscription(running, HISTORY, {"c": customer})
                readings.append(asyncio.get_running_loop().create_task(take(results, before)))
                opened.append(results)
            await wait_for(lambda: n1.follows_open() == 7, 10, "the follows")
            for n in range(before):
                for customer in customers:
                    log.append(customer, event_row(customer, n), (T0 + n, 0, n))
                await running.publish()
            firsts = [[d["bookingHistory"] for d in await reading] for reading in readings]
            for results in opened:
                await results.aclose()  # type: ignore[union-attr]
            await wait_for(lambda: n1.follows_open() == 0, 10, "the first follows to end")
            for n in range(before, before + between):  # nobody follows: replayed later
                for customer in customers:
                    log.append(customer, event_row(customer, n), (T0 + n, 0, n))
            await running.publish()
            n1.replay_step = 12  # the resumed follows replay 12 offsets a round, 6 are new
            readers = []
            for customer, first in zip(customers, firsts, strict=True):
                token = first[3]["token"]  # resume after the fourth event
                results = await open_subscription(running, HISTORY, {"c": customer, "after": token})
                count = before + between + after - 4
                readers.append(asyncio.get_running_loop().create_task(take(results, count)))
            for n in range(before + between, before + between + after):
                for customer in customers:
                    log.append(customer, event_row(customer, n), (T0 + n, 0, n))
                await running.publish()
                await asyncio.sleep(0)  # let the moves interleave with the rounds
            await wait_for(lambda: n1.follows_open() == 1, 10, "every own follow to move")
            for customer, reader in zip(customers, readers, strict=True):
                got = [d["bookingHistory"]["trip"] for d in await reader]
                assert got == [f"trip-{n}" for n in range(4, before + between + after)], customer

    asyncio.run(scenario())
