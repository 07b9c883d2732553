"""Coalescing lookups of different client requests into one node request, against a real
node app (LevelDB stores attached by hand, served through httpx.ASGITransport) and
MockTransport nodes that fail."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.cluster.routing import NodeInfo
from gateway.model.errors import (
    NodeProtocolError,
    NodeTimeoutError,
    NodeUnavailableError,
    NotOwnerError,
    RoutingError,
)
from gateway.model.rows import Event, Row
from gateway.nodes.coalesce import Coalescer
from gateway.nodes.transport import HttpxCaller, NodeConnectError
from gateway.nodes.upstream import Upstream
from gateway.reads.kinds import view_queries
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.app import NodeApp
from node.storage.store import ChangeBatch, LevelDBStore
from schema import WORD_COUNTS, CountRow, NodeState, Role, partition_for
from tooling.processes import wait_until_async

P = 6
ACTIVE = (0, 1, 2)
STANDBY = (3,)
VIEW = WORD_COUNTS
WORDS = {f"w{i}": i + 1 for i in range(80)}
QUERIES = view_queries(VIEW)
URL = "http://n1.localhost"
NODE = NodeInfo("n1", URL, NodeState.RUNNING, 0, True, ())
READ_STANDBY = {"readStandby": True}


def words_in(*partitions: int) -> list[str]:
    return [w for w in WORDS if partition_for(w, P) in partitions]


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[PartitionRegistry]:
    """Node n1: ACTIVE copies of partitions 0-2 and a STANDBY copy of 3, all words filled."""
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({VIEW.changelog_topic: P})
    stores = []
    for partition in (*ACTIVE, *STANDBY):
        store = LevelDBStore(tmp_path / f"partition-{partition}").open()
        change = ChangeBatch(offsets={VIEW.changelog_topic: 100 + partition})
        for word in words_in(partition):
            change.put_count(VIEW.name, CountRow(word, WORDS[word], 0))
        store.apply(change)
        role = Role.STANDBY if partition in STANDBY else Role.ACTIVE
        registry.attach(partition, store, role, store.offsets())
        stores.append(store)
    yield registry
    for partition in (*ACTIVE, *STANDBY):
        registry.detach(partition)
    for store in stores:
        store.close()


class Counted:
    """An ASGI app that counts the requests it passes on to `app`."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        self.bodies.append(orjson.loads(body))

        async def replay() -> Any:
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


@pytest.fixture
def node(registry: PartitionRegistry, tmp_path: Path) -> Counted:
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n1", "STATEFED_STATE_DIR": str(tmp_path)})
    return Counted(NodeApp(config, (VIEW,), registry=registry))


Lookup = tuple[list[int], list[str], dict[str, Any]]  # partitions, keys, extensions
# what a coalesced lookup returns: a row (or None) per key, and the freshness entries
Answer = tuple[list[Row | Event | None], list[dict[str, Any]]]


def run(
    transport: httpx.AsyncBaseTransport, lookups: Sequence[Lookup], timeout_s: float = 5.0
) -> list[tuple[list[Any], list[dict[str, Any]]] | BaseException]:
    """Every lookup started in the same event-loop turn, as concurrent client requests."""

    async def scenario() -> list[Any]:
        async with httpx.AsyncClient(transport=transport) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post)
            deadline = asyncio.get_running_loop().time() + timeout_s
            calls = [
                coalescer.lookup(NODE, QUERIES, partitions, keys, extensions, deadline)
                for partitions, keys, extensions in lookups
            ]
            return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(scenario())


def rows_of(keys: Sequence[str]) -> list[Row]:
    return [Row(k, WORDS[k]) for k in keys]


def partitions_of(entries: list[dict[str, Any]]) -> list[int]:
    return sorted(e["partition"] for e in entries)


def test_concurrent_lookups_are_one_node_request_and_each_gets_its_own(node: Counted) -> None:
    lookups: list[Lookup] = [([p], words_in(p)[i::2], {}) for p in ACTIVE for i in range(2)]
    unknown = next(f"nope{i}" for i in range(100) if partition_for(f"nope{i}", P) == 1)
    lookups.append(([0, 1, 2], [words_in(0)[0], unknown, words_in(2)[0]], {}))
    answers = run(httpx.ASGITransport(app=node), lookups)
    for (partitions, keys, _), answer in zip(lookups, answers, strict=True):
        assert not isinstance(answer, BaseException), answer
        rows, freshness = answer
        assert rows == [Row(k, WORDS[k]) if k in WORDS else None for k in keys]
        assert set(partitions_of(freshness)) <= set(partitions)
        assert all(e["node"] == "n1" and e["role"] == "ACTIVE" for e in freshness)
    assert len(node.bodies) == 1
    asked = [r["word"] for r in node.bodies[0]["variables"]["r"]]
    assert sorted(asked) == sorted({k for _, keys, _ in lookups for k in keys})


def test_one_node_reply_answers_each_lookup_with_its_own_partitions_freshness(
    node: Counted,
) -> None:
    """Lookups of several partitions carried by one node request each get the reply's
    freshness entries of their own partitions (what the planner tells the cache)."""
    lookups: list[Lookup] = [([p], words_in(p)[:2], {}) for p in ACTIVE]
    answers = run(httpx.ASGITransport(app=node), lookups)
    assert len(node.bodies) == 1
    for (partitions, _, _), answer in zip(lookups, answers, strict=True):
        assert not isinstance(answer, BaseException)
        assert partitions_of(answer[1]) == partitions


def test_lookups_with_different_extensions_are_never_mixed(node: Counted) -> None:
    standby_word = words_in(3)[0]
    active_word = words_in(0)[0]
    lookups: list[Lookup] = [
        ([3], [standby_word], {}),  # not allowed to read the STANDBY copy: NOT_OWNER
        ([3], [standby_word], READ_STANDBY),
        ([0], [active_word], READ_STANDBY),
        ([0], [active_word], {}),
    ]
    refused, from_standby, both_allowed, active_only = run(httpx.ASGITransport(app=node), lookups)
    assert isinstance(refused, NotOwnerError)
    assert refused.partitions == (3,)
    assert not isinstance(from_standby, BaseException)
    assert from_standby[0] == rows_of([standby_word])
    assert [(e["partition"], e["role"]) for e in from_standby[1]] == [(3, "STANDBY")]
    assert not isinstance(both_allowed, BaseException)
    assert not isinstance(active_only, BaseException)
    assert both_allowed[0] == active_only[0] == rows_of([active_word])
    sent = sorted(
        (orjson.dumps(b.get("extensions")), sorted(r["word"] for r in b["variables"]["r"]))
        for b in node.bodies
    )
    # one batch per extensions; the NOT_OWNER of the batch without them is asked again alone
    both = sorted([active_word, standby_word])
    assert sent == sorted(
        [
            (b"null", both),
            (b'{"readStandby":true}', both),
            (b"null", [standby_word]),
            (b"null", [active_word]),
        ]
    )


def test_a_not_owner_for_one_partition_fails_only_its_waiters(node: Counted) -> None:
    held, foreign = words_in(1)[:2], words_in(4)[:2]
    lookups: list[Lookup] = [([1], held, {}), ([4], foreign, {}), ([1], held[:1], {})]
    mine, theirs, again = run(httpx.ASGITransport(app=node), lookups)
    assert not isinstance(mine, BaseException) and mine[0] == rows_of(held)
    assert not isinstance(again, BaseException) and again[0] == rows_of(held[:1])
    assert isinstance(theirs, NotOwnerError)
    assert theirs.partitions == (4,) and theirs.node == "n1"


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def test_an_unreachable_node_fails_every_waiter_naming_its_own_partitions() -> None:
    lookups: list[Lookup] = [([0], ["a", "b"], {}), ([2], ["c"], {}), ([0, 5], ["d", "e"], {})]
    answers = run(httpx.MockTransport(refuse), lookups)
    for (partitions, keys, _), answer in zip(lookups, answers, strict=True):
        assert isinstance(answer, NodeUnavailableError)
        assert not isinstance(answer, NodeTimeoutError)
        assert answer.partitions == tuple(partitions)
        assert answer.keys == tuple(keys)
        assert answer.node == "n1"
        assert isinstance(answer.__cause__, NodeConnectError)


def answering(
    reply: Callable[[dict[str, Any]], Awaitable[httpx.Response]],
) -> httpx.MockTransport:
    async def handle(request: httpx.Request) -> httpx.Response:
        return await reply(orjson.loads(request.content))

    return httpx.MockTransport(handle)


def test_a_garbled_answer_is_a_protocol_error_of_each_waiter() -> None:
    async def garbled(body: dict[str, Any]) -> httpx.Response:
        return httpx.Response(200, json={"data": {"r": ["garbage"]}})

    lookups: list[Lookup] = [([0], ["a"], {}), ([1], ["b"], {})]
    answers = run(answering(garbled), lookups)
    for (partitions, keys, _), answer in zip(lookups, answers, strict=True):
        assert isinstance(answer, NodeProtocolError)
        assert answer.partitions == tuple(partitions) and answer.keys == tuple(keys)


def test_each_waiter_waits_only_until_its_own_deadline() -> None:
    async def slow(body: dict[str, Any]) -> httpx.Response:
        await asyncio.sleep(0.3)
        answer = [{"k": r["word"], "c": 7} for r in body["variables"]["r"]]
        return httpx.Response(200, json={"data": {"r": answer}, "extensions": {"freshness": []}})

    async def scenario() -> tuple[Answer | BaseException, Answer | BaseException]:
        async with httpx.AsyncClient(transport=answering(slow)) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post)
            now = asyncio.get_running_loop().time()
            hurried = coalescer.lookup(NODE, QUERIES, [0], ["a"], {}, now + 0.05)
            patient = coalescer.lookup(NODE, QUERIES, [1], ["b"], {}, now + 5)
            return await asyncio.gather(hurried, patient, return_exceptions=True)

    hurried, patient = asyncio.run(scenario())
    assert isinstance(hurried, NodeTimeoutError)
    assert hurried.partitions == (0,) and hurried.keys == ("a",)
    assert patient == ([Row("b", 7)], [])


def test_a_batch_is_sent_once_it_holds_max_keys(node: Counted) -> None:
    words = words_in(*ACTIVE)

    async def scenario() -> list[Any]:
        transport = httpx.ASGITransport(app=node)
        async with httpx.AsyncClient(transport=transport) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post, max_keys=5)
            deadline = asyncio.get_running_loop().time() + 5
            calls = [
                coalescer.lookup(NODE, QUERIES, [partition_for(w, P)], [w], {}, deadline)
                for w in words[:12]
            ]
            return await asyncio.gather(*calls)

    answers = asyncio.run(scenario())
    assert [rows for rows, _ in answers] == [rows_of([w]) for w in words[:12]]
    assert [len(b["variables"]["r"]) for b in node.bodies] == [5, 5, 2]


def test_routing_errors_stay_routing_errors() -> None:
    # the planner sorts results by type: whatever the coalescer raises must be one of its own
    answers = run(httpx.MockTransport(refuse), [([0], ["a"], {})])
    assert isinstance(answers[0], RoutingError)


class Held:
    """A node answering every key with count 7 once `release` is set, noting cancelled calls."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls = 0
        self.cancelled = 0

    async def sent(self) -> bool:
        return self.calls == 1

    async def gave_up(self) -> bool:
        return self.cancelled == 1

    async def __call__(self, body: dict[str, Any]) -> httpx.Response:
        self.calls += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        answer = [{"k": r["word"], "c": 7} for r in body["variables"]["r"]]
        return httpx.Response(200, json={"data": {"r": answer}, "extensions": {"freshness": []}})


def test_a_cancelled_waiter_leaves_the_shared_call_to_the_others() -> None:
    node = Held()

    async def scenario() -> tuple[Answer, bool]:
        async with httpx.AsyncClient(transport=answering(node)) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post)
            deadline = asyncio.get_running_loop().time() + 5
            hedged = asyncio.ensure_future(
                coalescer.lookup(NODE, QUERIES, [0], ["a"], {}, deadline)
            )
            other = asyncio.ensure_future(coalescer.lookup(NODE, QUERIES, [1], ["b"], {}, deadline))
            await wait_until_async(node.sent, 5, "the batch to be sent", 0.01)
            hedged.cancel()  # its other copy answered first
            node.release.set()
            return await other, hedged.cancelled()

    assert asyncio.run(scenario()) == (([Row("b", 7)], []), True)
    assert (node.calls, node.cancelled) == (1, 0)


def test_the_call_is_cancelled_once_no_waiter_is_left() -> None:
    node = Held()

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=answering(node)) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post)
            deadline = asyncio.get_running_loop().time() + 60  # far beyond the wait
            waiters = [
                asyncio.ensure_future(coalescer.lookup(NODE, QUERIES, [p], [k], {}, deadline))
                for p, k in ((0, "a"), (1, "b"))
            ]
            await wait_until_async(node.sent, 5, "the batch to be sent", 0.01)
            for waiter in waiters:
                waiter.cancel()
            await wait_until_async(node.gave_up, 5, "the call to be cancelled", 0.01)

    asyncio.run(scenario())


def test_a_lookup_alone_in_its_turn_asks_from_its_own_task_and_takes_the_call_along() -> None:
    node = Held()

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=answering(node)) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post)
            deadline = asyncio.get_running_loop().time() + 60
            alone = asyncio.ensure_future(coalescer.lookup(NODE, QUERIES, [0], ["a"], {}, deadline))
            await wait_until_async(node.sent, 5, "the call to be sent", 0.01)
            alone.cancel()  # a hedge of the read answered first
            await wait_until_async(node.gave_up, 5, "the call to be cancelled", 0.01)

    asyncio.run(scenario())
    assert (node.calls, node.cancelled) == (1, 1)


def test_a_lookup_alone_past_its_deadline_names_its_own_partitions_and_keys() -> None:
    node = Held()

    async def scenario() -> Answer | BaseException:
        async with httpx.AsyncClient(transport=answering(node)) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post)
            deadline = asyncio.get_running_loop().time() + 0.05
            lookup = coalescer.lookup(NODE, QUERIES, [0, 2], ["a", "c"], {}, deadline)
            return (await asyncio.gather(lookup, return_exceptions=True))[0]

    answer = asyncio.run(scenario())
    assert isinstance(answer, NodeTimeoutError)
    assert (answer.partitions, answer.keys, answer.node) == ((0, 2), ("a", "c"), "n1")


def test_the_opener_giving_up_in_its_turn_leaves_the_batch_to_those_who_joined() -> None:
    node = Held()
    node.release.set()

    async def scenario() -> tuple[Answer, bool]:
        async with httpx.AsyncClient(transport=answering(node)) as client:
            coalescer = Coalescer(Upstream(HttpxCaller(client)).post)
            deadline = asyncio.get_running_loop().time() + 5
            opener = asyncio.ensure_future(
                coalescer.lookup(NODE, QUERIES, [0], ["a"], {}, deadline)
            )
            joined = asyncio.ensure_future(
                coalescer.lookup(NODE, QUERIES, [1], ["b"], {}, deadline)
            )
            await asyncio.sleep(0)  # both are in the batch; the opener yields its turn
            opener.cancel()
            return await joined, opener.cancelled()

    assert asyncio.run(scenario()) == (([Row("b", 7)], []), True)
    assert node.calls == 1
