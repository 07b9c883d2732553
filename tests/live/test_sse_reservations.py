"""GraphQL over SSE's single connection mode at the gateway, through the ASGI app over the
test schema: operations run only on an open stream, so reservations nobody opens take no
subscription slots; reservations not opened in time expire, at most
STATEFED_GATEWAY_MAX_SUBSCRIPTIONS wait, and a PUT looks only at the ones it drops; a client
that opens its stream, then sends operations, runs them against the same limits as every
other subscriber."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge import sse
from gateway.edge.app import GatewayApp
from gateway.edge.sse import GraphQLEventStream
from tests.clocks import HandClock
from tests.live.schema import SCHEMA

PATH = "/graphql/stream"
TOKEN = "x-graphql-event-stream-token"
STREAM = {"accept": "text/event-stream"}

App = Any  # an ASGI app: the gateway's, or its handler of PATH alone


def subscription(ident: str, query: str = "subscription { ticks }") -> dict[str, Any]:
    return {"query": query, "extensions": {"operationId": ident}}


def events(body: str) -> list[tuple[str, str]]:
    """(event, data) of an event stream's events; comments left out."""
    found = []
    for block in body.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            fields = dict(line.split(":", 1) for line in lines)
            found.append((fields["event"].strip(), fields.get("data", "").strip()))
    return found


@asynccontextmanager
async def gateway(**settings: Any) -> AsyncIterator[tuple[GatewayApp, httpx.AsyncClient]]:
    """The gateway app over the test schema, started, and a client of it."""
    app = GatewayApp(
        GatewayConfig(**settings),
        feed=RoutingFeed(),
        statuses=StatusBoard(),
        catalogue=(),
        schema=SCHEMA,
    )
    await app.startup()
    try:
        async with client(app) as http:
            yield app, http
    finally:
        await app.shutdown()


@asynccontextmanager
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8100") as http:
        yield http


def with_clock(app: GatewayApp, clock: HandClock) -> GraphQLEventStream:
    """The app's handler of PATH again, on the app's operations and limits, reading `clock`."""
    config = app.config
    return GraphQLEventStream(
        app._operations,
        app._authenticator,
        max_body_bytes=config.max_body_bytes,
        send_buffer=config.live_send_buffer,
        clock=clock,
    )


class Opened:
    """An event stream being answered: its status, then its events as they come."""

    def __init__(self, status: int, messages: asyncio.Queue[dict[str, Any]]) -> None:
        self.status = status
        self._messages = messages
        self._text = ""

    async def until(self, event: tuple[str, str]) -> list[tuple[str, str]]:
        """The events so far, once `event` is among them."""
        async with asyncio.timeout(10):
            while event not in (seen := events(self._text)):
                message = await self._messages.get()
                self._text += message.get("body", b"").decode()
        return seen


@asynccontextmanager
async def opened(app: App, token: str, stalled: bool = False) -> AsyncIterator[Opened]:
    """A GET opening the stream of `token`, read as it comes (httpx's ASGI transport answers
    only once the app is done); the client goes away on leaving. A `stalled` client takes
    nothing after the stream's first line: each later send waits, as on a connection whose
    window is shut."""
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    gone = asyncio.Event()
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    headers = [(b"host", b"127.0.0.1:8100"), (b"accept", b"text/event-stream")]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": PATH,
        "raw_path": PATH.encode(),
        "root_path": "",
        "query_string": b"token=" + token.encode(),
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8100),
    }

    bodies = 0

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal bodies
        if message["type"] == "http.response.body":
            bodies += 1
            if stalled and bodies > 1:
                await asyncio.Event().wait()
        messages.put_nowait(dict(message))

    answering = asyncio.create_task(app(scope, receive, send))
    try:
        async with asyncio.timeout(10):
            start = await messages.get()
        yield Opened(start["status"], messages)
    finally:
        gone.set()
        async with asyncio.timeout(10):
            await answering


def data(seen: list[tuple[str, str]], ident: str) -> list[Any]:
    """The `data` of the results of operation `ident` among the events `seen`."""
    nexts = [json.loads(text) for event, text in seen if event == "next"]
    return [each["payload"]["data"] for each in nexts if each["id"] == ident]


def message(answer: httpx.Response) -> str:
    text: str = answer.json()["errors"][0]["message"]
    return text


def test_operations_before_the_stream_opens_are_refused_and_take_no_slots() -> None:
    async def scenario() -> None:
        async with gateway(max_subscriptions=3) as (_, http):
            token = (await http.put(PATH)).text
            for ident in "abc":
                posted = await http.post(PATH, json=subscription(ident), headers={TOKEN: token})
                assert posted.status_code == 409
                assert "not open" in message(posted)
                assert "GET with Accept: text/event-stream" in message(posted)
            # every slot is still free for the subscribers that are there
            query = {"query": "subscription { countdown(start: 1) }"}
            other = await http.post(PATH, json=query, headers=STREAM)
            assert events(other.text) == [
                ("next", '{"data":{"countdown":1}}'),
                ("next", '{"data":{"countdown":0}}'),
                ("complete", ""),
            ]

    asyncio.run(scenario())


def test_subscriptions_on_an_open_stream_count_against_the_gateways_limits() -> None:
    async def scenario() -> None:
        async with gateway(max_subscriptions=2) as (app, http):
            token = (await http.put(PATH)).text
            async with opened(app, token) as stream:
                assert stream.status == 200
                for ident in "ab":
                    posted = await http.post(PATH, json=subscription(ident), headers={TOKEN: token})
                    assert posted.status_code == 202
                    await stream.until(
                        ("next", f'{{"id":"{ident}","payload":{{"data":{{"ticks":0}}}}}}')
                    )
                # the same two slots as a distinct connection's subscription
                query = {"query": "subscription { countdown(start: 0) }"}
                refused = (await http.post(PATH, json=query, headers=STREAM)).text
                extensions = json.loads(events(refused)[0][1])["errors"][0]["extensions"]
                assert extensions["code"] == "TOO_MANY_SUBSCRIPTIONS"
                assert extensions["variable"] == "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS"
            # the stream closed: its subscriptions stopped and gave their slots back
            admitted = (await http.post(PATH, json=query, headers=STREAM)).text
            assert events(admitted)[0] == ("next", '{"data":{"countdown":0}}')

    asyncio.run(scenario())


def test_a_client_that_opens_its_stream_first_runs_operations_on_it() -> None:
    async def scenario() -> None:
        async with gateway() as (app, http):
            reserved = await http.put(PATH)
            assert reserved.status_code == 201
            token = reserved.text
            async with opened(app, token) as stream:
                assert stream.status == 200
                countdown = subscription("c", "subscription { countdown(start: 1) }")
                hello = subscription("h", '{ hello(name: "sse") }')
                for body in (countdown, hello, subscription("t")):
                    posted = await http.post(PATH, json=body, headers={TOKEN: token})
                    assert posted.status_code == 202
                await stream.until(("complete", '{"id":"c"}'))
                seen = await stream.until(("complete", '{"id":"h"}'))
                assert data(seen, "c") == [{"countdown": 1}, {"countdown": 0}]
                assert data(seen, "h") == [{"hello": "hello sse"}]
                await stream.until(("next", '{"id":"t","payload":{"data":{"ticks":0}}}'))
                stop = await http.delete(PATH, params={"operationId": "t"}, headers={TOKEN: token})
                assert stop.status_code == 200
                assert app._operations.slots.running == 0
            # the client went away: its reservation is gone
            late = await http.post(PATH, json=hello, headers={TOKEN: token})
            assert late.status_code == 404

    asyncio.run(scenario())


def test_a_reservation_not_opened_in_time_expires() -> None:
    async def scenario() -> None:
        clock = HandClock()
        async with gateway() as (app, _):
            handler = with_clock(app, clock)
            async with client(handler) as http:
                late = (await http.put(PATH)).text
                clock.now += 5
                timely = (await http.put(PATH)).text
                clock.now += 5  # `late` is 10 s old: expired, even with no PUT since
                async with opened(handler, late) as stream:
                    assert stream.status == 404
                answer = await http.post(PATH, json=subscription("a"), headers={TOKEN: late})
                assert answer.status_code == 404
                assert "not opened within 10 s" in message(answer)
                assert "reserve one with PUT" in message(answer)
                async with opened(handler, timely) as stream:
                    assert stream.status == 200
                assert handler.reservations.waiting == 0

    asyncio.run(scenario())


def test_at_most_max_subscriptions_reservations_wait_to_be_opened() -> None:
    async def scenario() -> None:
        async with gateway(max_subscriptions=3) as (app, http):
            kept = (await http.put(PATH)).text
            async with opened(app, kept) as stream:
                tokens = [(await http.put(PATH)).text for _ in range(4)]
                async with opened(app, tokens[0]) as dropped:  # the oldest, for the 4th
                    assert dropped.status == 404
                assert app._events.reservations.waiting == 3
                for token in tokens[1:]:
                    async with opened(app, token) as newer:
                        assert newer.status == 200
                # an open stream is not waiting: PUTs never drop it
                for _ in range(10):
                    await http.put(PATH)
                hello = subscription("h", "{ hello }")
                posted = await http.post(PATH, json=hello, headers={TOKEN: kept})
                assert posted.status_code == 202
                await stream.until(("complete", '{"id":"h"}'))

    asyncio.run(scenario())


def test_a_put_looks_only_at_the_reservations_it_drops_and_one_more() -> None:
    async def scenario() -> None:
        clock = HandClock()
        async with gateway() as (app, _):
            handler = with_clock(app, clock)
            reservations = handler.reservations
            async with client(handler) as http:
                for _ in range(1000):
                    await http.put(PATH)
                clock.now += 5
                for _ in range(300):
                    await http.put(PATH)
                before = reservations.examined
                await http.put(PATH)  # none expired: the oldest is looked at, no other
                assert (reservations.examined - before, reservations.waiting) == (1, 1301)
                clock.now += 5  # the first 1000 expire
                before = reservations.examined
                await http.put(PATH)
                assert (reservations.examined - before, reservations.waiting) == (1001, 302)
                before = reservations.examined
                await http.put(PATH)
                assert (reservations.examined - before, reservations.waiting) == (1, 303)

    asyncio.run(scenario())


def test_a_stream_nobody_reads_takes_at_most_max_operations_results_then_refuses_more() -> None:
    """Each query's result waits for the stream to take it: a client that sends queries and
    reads nothing would otherwise make the gateway hold every result and its task."""

    async def scenario() -> None:
        async with gateway(live_send_buffer=1, max_operations_per_connection=2) as (app, http):
            token = (await http.put(PATH)).text
            async with opened(app, token, stalled=True) as stream:
                assert stream.status == 200
                statuses = []
                for ident in range(10):
                    hello = subscription(str(ident), '{ hello(name: "sse") }')
                    posted = await http.post(PATH, json=hello, headers={TOKEN: token})
                    statuses.append(posted.status_code)
                    await asyncio.sleep(0)  # the operation's task runs as far as it can
                reservation = app._events.reservations.get(token)
                assert reservation is not None and len(reservation.ops) <= 2
                assert statuses.count(429) >= 6, statuses
                extensions = posted.json()["errors"][0]["extensions"]
                assert extensions["code"] == "TOO_MANY_OPERATIONS"
                assert "STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION" in message(posted)

    asyncio.run(scenario())


def test_a_stream_whose_client_takes_nothing_is_ended_and_its_operations_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "_STALLED_S", 0.2)

    async def scenario() -> None:
        async with gateway(live_send_buffer=1) as (app, http):
            token = (await http.put(PATH)).text
            async with opened(app, token, stalled=True):
                posted = await http.post(PATH, json=subscription("t"), headers={TOKEN: token})
                assert posted.status_code == 202
                async with asyncio.timeout(10):  # the stalled stream ends, its ticks stop
                    while (
                        app._events.reservations.get(token) is not None
                        or app._operations.slots.running
                    ):
                        await asyncio.sleep(0.05)

    asyncio.run(scenario())
