"""Subscriptions end to end on the real broker and real nodes (their `/feed`, node.changelog.feed):
a gateway reading membership pushes every change of the subscribed keys, keeps doing so from the
standby copies when the node owning half of them is SIGKILLed, and a subscriber that resumes with a
token from before the kill gets every later change of its keys, none twice; and a history
subscription resumed from 3,000 events back gets its replay from a real node at its own pace."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import ExecutionResult, parse, subscribe

from gateway.cluster.pipeline import StatusBoard
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.model.principal import ANONYMOUS
from gateway.subscriptions.tokens import ResumeToken
from runtime.topics import ensure_topics, statefed_topics
from schema import DEMO_DOMAIN, CountRow, EventRow, encode_event, event_record_key, partition_for
from tests.gateway.test_failover_kafka import _mirrored
from tests.node.harness import (
    P,
    ThreadNode,
    health,
    node_config,
    produce_changelog,
    produce_counts,
    spawn_node,
    unique_count_view,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until, wait_until_async

pytestmark = pytest.mark.timeout(240)

SUBSCRIBE = """subscription($ws: [String!]!, $after: String) {
  wordCounts(words: $ws, after: $after) { word count offset token freshness { node role } }
}"""


class Subscriber:
    """Reads one subscription in the background, keeping every update."""

    def __init__(self, results: AsyncIterator[ExecutionResult]) -> None:
        self.updates: list[dict[str, Any]] = []
        self.errors: list[Any] = []
        self._results = results
        self._task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for result in self._results:
            if result.errors:
                self.errors.extend(result.errors)
            else:
                assert result.data is not None
                self.updates.append(result.data["wordCounts"])

    def newest(self) -> dict[str, int | None]:
        rows: dict[str, int | None] = {}
        for update in self.updates:
            rows[update["word"]] = update["count"]
        return rows

    def offsets_by_key(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for update in self.updates:  # an offset is a Long: a string of decimal digits
            found.setdefault(update["word"], []).append(int(update["offset"]))
        return found

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._results.aclose()  # type: ignore[attr-defined]


def test_subscribers_get_every_change_once_across_a_node_kill_and_a_resume(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    keys = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(12)]
    truth = dict.fromkeys(keys, 1)
    produce_counts(broker.bootstrap, view, [CountRow(k, 1, 0) for k in keys])
    group = f"g-{view.name}"
    config_a = node_config(broker.bootstrap, tmp_path, f"sa-{uuid.uuid4().hex[:4]}", group)
    process = spawn_node(config_a, view, tmp_path / "a.log")
    b: ThreadNode | None = None
    try:
        client_a = httpx.Client(base_url=config_a.url, timeout=5)

        def a_running() -> bool:
            try:
                h = health(client_a)
            except httpx.TransportError:
                assert process.poll() is None, (tmp_path / "a.log").read_text()
                return False
            return h["state"] == "RUNNING" and len(h["active"]) == P

        wait_until(a_running, 40, "node a RUNNING")
        config_b = node_config(broker.bootstrap, tmp_path, f"sb-{uuid.uuid4().hex[:4]}", group)
        b = ThreadNode(config_b, [view]).start()
        wait_until(lambda: _mirrored(health(client_a), b.health()), 60, "a and b mirrored")
        held_a = health(client_a)["active"]
        client_a.close()

        def produce_round() -> None:
            for key in keys:
                truth[key] += 1
            produce_counts(broker.bootstrap, view, [CountRow(k, truth[k], 0) for k in keys])

        app = GatewayApp(
            GatewayConfig(bootstrap=broker.bootstrap, timeout_ms=3000),
            statuses=StatusBoard(),
            catalogue=(view,),
        )

        async def open_subscription(after: str | None = None) -> Subscriber:
            return Subscriber(await _subscribe(app, SUBSCRIBE, {"ws": keys, "after": after}))

        async def scenario() -> tuple[Subscriber, Subscriber, str]:
            await app.startup()
            try:
                await wait_until_async(
                    _routed(app), 30, "the gateway to route every partition", 0.1
                )
                live = await open_subscription()
                await wait_until_async(
                    _showing(live, truth), 30, "the first rows of every key", 0.1
                )
                produce_round()
                await wait_until_async(_showing(live, truth), 30, "the first round", 0.1)
                token = live.updates[-1]["token"]
                process.send_signal(signal.SIGKILL)
                await asyncio.to_thread(process.wait, 10)
                for _ in range(3):
                    produce_round()
                await wait_until_async(_showing(live, truth), 60, "the rounds after the kill", 0.1)
                resumed = await open_subscription(token)
                await wait_until_async(_showing(resumed, truth), 30, "the resumed rows", 0.1)
                await live.close()
                await resumed.close()
                return live, resumed, token
            finally:
                await app.shutdown()

        live, resumed, token = asyncio.run(scenario())
        wait_until(
            lambda: b.health()["state"] == "RUNNING" and len(b.health()["active"]) == P,
            40,
            "b RUNNING with every partition",
        )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        if b is not None:
            b.stop()

    assert live.errors == [] and resumed.errors == []
    for subscriber in (live, resumed):
        for key, offsets in subscriber.offsets_by_key().items():
            # each change once, in order: a key's offsets only grow (conflation may skip)
            assert offsets == sorted(set(offsets)), (key, offsets)
    # the keys of the killed node's partitions were pushed from b after the kill
    killed = [k for k in keys if partition_for(k, P) in held_a]
    assert killed
    last_of = {u["word"]: u for u in live.updates}
    assert all(last_of[k]["freshness"]["node"] == config_b.node_id for k in killed)
    # the resumed subscription started after the token: no first rows, only later changes
    covered = ResumeToken.parse(view.name, token, P).offsets
    for update in resumed.updates:
        assert int(update["offset"]) >= covered.get(partition_for(update["word"], P), 0), update
    print(f"live: {len(live.updates)} updates, resumed from {token}: {len(resumed.updates)}")


async def _subscribe(
    app: GatewayApp, query: str, variables: dict[str, Any]
) -> AsyncIterator[ExecutionResult]:
    """The results of a subscription run on the gateway's schema, as an anonymous caller."""
    started = subscribe(
        app._schema._schema,
        parse(query),
        context_value=app._context(ANONYMOUS),
        variable_values=variables,
    )
    results = await started if inspect.isawaitable(started) else started
    assert not isinstance(results, ExecutionResult), results
    return results


def _routed(app: GatewayApp) -> Any:
    async def routed() -> bool:
        feed = app.feed
        return feed is not None and feed.current.routable(P) == list(range(P))

    return routed


def _showing(subscriber: Subscriber, truth: dict[str, int]) -> Any:
    async def showing() -> dict[str, int | None] | None:
        assert not subscriber.errors, subscriber.errors
        newest = subscriber.newest()
        return newest if newest == truth else None

    return showing


HISTORY = """subscription($c: String!, $after: String) {
  bookingHistory(customer: $c, after: $after) { offset token }
}"""
EVENTS, BOUND = 3_000, 100  # a node replays in frames of up to 500 events


def test_a_history_subscriber_resumed_far_back_gets_every_event_once_from_a_real_node(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    """A token 3,000 events back, 30 times the subscription's bound: the node's replay
    comes at the subscriber's pace, every event once, in order, without SUBSCRIBER_TOO_SLOW."""
    tag = uuid.uuid4().hex[:8]
    history = dataclasses.replace(DEMO_DOMAIN[3], name=f"t{tag}_history", topic=f"t{tag}.b")
    ensure_topics(broker.bootstrap, statefed_topics(P, [history]))
    customer = f"c-{tag}"
    partition = partition_for(customer, P)
    events = [
        EventRow(customer, 1_700_000_000_000 + n, 0, n, {"trip": f"e{n}"}) for n in range(EVENTS)
    ]
    records = [(event_record_key(e), encode_event(e), partition) for e in events]
    produce_changelog(broker.bootstrap, history, records)
    config = node_config(broker.bootstrap, tmp_path, f"hr-{tag[:4]}", f"g-{history.name}")
    node = ThreadNode(config, [history]).start()
    try:
        wait_until(
            lambda: node.health()["state"] == "RUNNING" and len(node.health()["active"]) == P,
            40,
            "the node RUNNING with every partition",
        )
        app = GatewayApp(
            GatewayConfig(bootstrap=broker.bootstrap, timeout_ms=3000, subscription_queue=BOUND),
            statuses=StatusBoard(),
            catalogue=(history,),
        )
        token = ResumeToken(history.name, dict.fromkeys(range(P), 0)).text()

        async def scenario() -> list[int]:
            await app.startup()
            try:
                await wait_until_async(
                    _routed(app), 30, "the gateway to route every partition", 0.1
                )
                results = await _subscribe(app, HISTORY, {"c": customer, "after": token})
                offsets = []
                async with asyncio.timeout(60):
                    async for result in results:
                        assert result.errors is None, result.errors
                        assert result.data is not None
                        offsets.append(int(result.data["bookingHistory"]["offset"]))
                        if len(offsets) == EVENTS:
                            break
                await results.aclose()  # type: ignore[attr-defined]
                return offsets
            finally:
                await app.shutdown()

        offsets = asyncio.run(scenario())
    finally:
        node.stop()
    assert offsets == list(range(EVENTS))
