"""The graphql-transport-ws protocol's rules at the gateway, message by message with the
websockets client library against the gateway app under uvicorn: the handshake's Origin and
subprotocol, ping/pong, the close codes (4400, 4401, 4406, 4408, 4409, 4429), the total
subscription limit across connections, the limit of operations at once per connection,
sources stopped when a client goes away, and subscriptions ended when the connection's token
expires."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin, Subprotocol

from gateway.auth.bearer import SUBSCRIPTION_EXPIRED
from gateway.config import GatewayConfig
from tests.live.schema import Flooded, Gate, Running
from tests.live.serving import served
from tests.live.tokens import Issuer, new_issuer
from tooling.processes import wait_until

PROTOCOL = Subprotocol("graphql-transport-ws")
LISTED = "https://app.example"
TICKS = {"query": "subscription { ticks }"}
GATED = {"query": "{ gated }"}
MAX_OPERATIONS = "STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION"
RECEIVE_S = 10.0
LEEWAY_S = 1


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    config = GatewayConfig(
        cors_origins=(LISTED,),
        # short, for the 4408 test, yet long enough for a loaded machine's connection_init
        live_init_timeout_ms=2000,
        max_subscriptions=3,
        live_send_buffer=4,
        max_aliases=1,
    )
    with served(config) as url:
        yield url


@pytest.fixture(scope="module")
def roomy() -> Iterator[str]:
    """A gateway holding up to 1,000 messages per connection for a client not reading."""
    with served(GatewayConfig(live_send_buffer=1000)) as url:
        yield url


@pytest.fixture(scope="module")
def capped() -> Iterator[str]:
    """A gateway whose WebSockets run at most 2 operations at once (set as an operator sets
    it)."""
    with served(GatewayConfig.from_env({MAX_OPERATIONS: "2"})) as url:
        yield url


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Issuer]]:
    """A gateway verifying the issuer's tokens with LEEWAY_S of clock skew."""
    issuer = new_issuer(tmp_path_factory.mktemp("jwt"), jwt_leeway_s=LEEWAY_S)
    with served(issuer.config) as url:
        yield url, issuer


@pytest.fixture
def gate() -> Iterator[None]:
    """`gated` queries are held until the test opens the gate (or ends)."""
    Gate.opened.clear()
    try:
        yield
    finally:
        Gate.opened.set()
    wait_until(lambda: Gate.waiting == 0, 10, lambda: f"{Gate.waiting} gated queries still held")


def ws(base: str, path: str = "/graphql") -> str:
    return base.replace("http://", "ws://") + path


@asynccontextmanager
async def opened(
    base: str, *, origin: str | None = None, init: bool = True, token: str | None = None
) -> AsyncIterator[ClientConnection]:
    async with connect(
        ws(base), subprotocols=[PROTOCOL], origin=None if origin is None else Origin(origin)
    ) as socket:
        if init:
            payload = None if token is None else {"Authorization": f"Bearer {token}"}
            await send(socket, {"type": "connection_init", "payload": payload})
            assert await receive(socket) == {"type": "connection_ack"}
        yield socket


async def send(socket: ClientConnection, message: dict[str, Any]) -> None:
    await socket.send(json.dumps(message))


async def receive(socket: ClientConnection) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), RECEIVE_S))
    return message


async def closed(socket: ClientConnection) -> tuple[int, str]:
    """The close code and reason the gateway ends the connection with."""
    with pytest.raises(ConnectionClosed) as info:
        while True:
            await asyncio.wait_for(socket.recv(), RECEIVE_S)
    assert info.value.rcvd is not None, "the connection ended without a close frame"
    return info.value.rcvd.code, info.value.rcvd.reason


def test_a_handshake_from_an_origin_not_allowed_is_refused(base: str) -> None:
    async def scenario() -> None:
        with pytest.raises(InvalidStatus) as info:
            async with connect(
                ws(base), subprotocols=[PROTOCOL], origin=Origin("https://evil.example")
            ):
                pass
        assert info.value.response.status_code == 403
        body = json.loads(info.value.response.body or b"{}")
        assert "STATEFED_GATEWAY_CORS_ORIGINS" in body["errors"][0]["message"]
        own = base  # a page the gateway serves itself (GraphiQL)
        for origin in (LISTED, own, None):
            async with opened(base, origin=origin) as socket:
                await send(socket, {"type": "ping"})
                assert await receive(socket) == {"type": "pong"}

    asyncio.run(scenario())


def test_no_subprotocol_is_4406_and_another_path_404(base: str) -> None:
    async def scenario() -> None:
        async with connect(ws(base)) as socket:
            assert await closed(socket) == (4406, "use graphql-transport-ws")
        with pytest.raises(InvalidStatus) as info:
            async with connect(ws(base, "/feed"), subprotocols=[PROTOCOL]):
                pass
        assert info.value.response.status_code == 404

    asyncio.run(scenario())


def test_ping_is_answered_with_its_payload(base: str) -> None:
    async def scenario() -> None:
        async with opened(base, init=False) as socket:  # allowed before connection_init too
            await send(socket, {"type": "ping", "payload": {"at": 1}})
            assert await receive(socket) == {"type": "pong", "payload": {"at": 1}}
            await send(socket, {"type": "pong"})  # unsolicited: ignored
            await send(socket, {"type": "connection_init"})
            assert await receive(socket) == {"type": "connection_ack"}

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("not json", "the message is not JSON"),
        ('{"type": "start", "id": "1"}', "unknown message type 'start'"),
        ('{"type": "subscribe", "payload": {"query": "{ hello }"}}',
         "subscribe needs a non-empty string `id`"),
        ('{"type": "subscribe", "id": "1", "payload": {"query": 7}}',
         "the request has no GraphQL document (a string in `query`)"),
        ('{"type": "complete"}', "complete needs a non-empty string `id`"),
        ('{"type": "ping", "payload": []}', "the payload of ping must be an object"),
    ],
)  # fmt: skip
def test_a_message_the_protocol_does_not_define_is_4400(
    base: str, message: str, reason: str
) -> None:
    async def scenario() -> None:
        async with opened(base) as socket:
            await socket.send(message)
            assert await closed(socket) == (4400, reason)

    asyncio.run(scenario())


def test_subscribe_before_the_ack_is_4401_and_a_second_init_4429(base: str) -> None:
    async def scenario() -> None:
        async with opened(base, init=False) as socket:
            await send(socket, {"id": "1", "type": "subscribe", "payload": TICKS})
            assert await closed(socket) == (4401, "Unauthorized")
        async with opened(base) as socket:
            await send(socket, {"type": "connection_init"})
            assert await closed(socket) == (4429, "Too many initialisation requests")

    asyncio.run(scenario())


def test_no_connection_init_in_time_is_4408(base: str) -> None:
    async def scenario() -> None:
        async with opened(base, init=False) as socket:
            assert await closed(socket) == (4408, "Connection initialisation timeout")

    asyncio.run(scenario())


def test_an_id_already_running_is_4409_and_closing_stops_the_sources(base: str) -> None:
    async def scenario() -> None:
        async with opened(base) as socket:
            await send(socket, {"id": "a", "type": "subscribe", "payload": TICKS})
            first = await receive(socket)
            assert first == {"id": "a", "type": "next", "payload": {"data": {"ticks": 0}}}
            await send(socket, {"id": "a", "type": "subscribe", "payload": TICKS})
            assert await closed(socket) == (4409, "Subscriber for a already exists")

    asyncio.run(scenario())
    wait_until(lambda: Running.count == 0, 10, lambda: f"{Running.count} sources still running")


def test_the_total_limit_holds_across_connections(base: str) -> None:
    async def scenario() -> None:
        async with opened(base) as one, opened(base) as two:
            for socket, ident in ((one, "1"), (one, "2"), (two, "3")):
                await send(socket, {"id": ident, "type": "subscribe", "payload": TICKS})
                assert (await receive(socket))["id"] == ident
            await send(two, {"id": "4", "type": "subscribe", "payload": TICKS})
            while (refused := await receive(two))["id"] != "4":
                pass
            assert refused["type"] == "error"
            (error,) = refused["payload"]
            assert error["extensions"] == {
                "code": "TOO_MANY_SUBSCRIPTIONS",
                "limit": 3,
                "variable": "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS",
            }
            await send(one, {"id": "1", "type": "complete"})  # frees a slot
            wait_until(lambda: Running.count == 2, 10, "a completed source to stop")
            await send(two, {"id": "5", "type": "subscribe", "payload": TICKS})
            while (started := await receive(two))["id"] != "5":
                pass
            assert started["type"] == "next"

    asyncio.run(scenario())
    # the clients went away without completing: their sources are stopped all the same
    wait_until(lambda: Running.count == 0, 10, lambda: f"{Running.count} sources still running")


def test_a_client_that_does_not_read_holds_its_source_back(base: str) -> None:
    """The gateway buffers a few messages for a client that stops reading, then stops pulling
    its source; it resumes when the client reads again."""
    size = 64 * 1024
    flood = {"query": "subscription($n: Int!) { flood(size: $n) }", "variables": {"n": size}}

    async def scenario() -> None:
        # close_timeout: megabytes are still in flight when the client leaves; do not wait
        # for the gateway's close frame behind them
        async with connect(
            ws(base), subprotocols=[PROTOCOL], max_queue=1, close_timeout=0.5
        ) as socket:
            await send(socket, {"type": "connection_init"})
            assert await receive(socket) == {"type": "connection_ack"}
            await send(socket, {"id": "f", "type": "subscribe", "payload": flood})
            assert len((await receive(socket))["payload"]["data"]["flood"]) == size
            counts: list[int] = []
            held = wait_until(lambda: Flooded.settled(counts), 30, "the flood to be held back", 0.5)
            # what fits in the send buffer (4), the sockets' buffers and the client's queue
            assert held < 500, f"{held} events of 64 KiB produced for a client not reading"
            for _ in range(held + 10):  # reading again lets the source run on
                await receive(socket)
            assert Flooded.events > held

    asyncio.run(scenario())
    wait_until(lambda: Running.count == 0, 10, "the flood to stop once its client left")


def test_large_messages_for_a_client_not_reading_are_held_back_by_their_bytes(
    roomy: str,
) -> None:
    """Room for 1,000 messages is not room for 1,000 of 256 KiB: the send buffer holds
    about 1 MiB, then the source waits."""
    size = 256 * 1024
    flood = {"query": "subscription($n: Int!) { flood(size: $n) }", "variables": {"n": size}}

    async def scenario() -> None:
        async with connect(
            ws(roomy), subprotocols=[PROTOCOL], max_queue=1, close_timeout=0.5
        ) as socket:
            await send(socket, {"type": "connection_init"})
            assert await receive(socket) == {"type": "connection_ack"}
            before = Flooded.events
            await send(socket, {"id": "f", "type": "subscribe", "payload": flood})
            assert len((await receive(socket))["payload"]["data"]["flood"]) == size
            counts: list[int] = []
            held = wait_until(lambda: Flooded.settled(counts), 30, "the flood to be held back", 0.5)
            # 1 MiB of the send buffer, the sockets' buffers and the client's queue
            assert held - before < 100, (
                f"{held - before} events of 256 KiB for a client not reading"
            )
            for _ in range(held - before + 10):
                await receive(socket)
            assert Flooded.events > held

    asyncio.run(scenario())
    wait_until(lambda: Running.count == 0, 10, "the flood to stop once its client left")


def test_the_query_limits_apply_over_the_websocket(base: str) -> None:
    async def scenario() -> None:
        async with opened(base) as socket:
            query = {"query": "{ a: hello b: hello c: hello }"}
            await send(socket, {"id": "q", "type": "subscribe", "payload": query})
            refused = await receive(socket)
            assert (refused["id"], refused["type"]) == ("q", "error")
            assert refused["payload"][0]["extensions"]["code"] == "TOO_MANY_ALIASES"

    asyncio.run(scenario())


def _pushed(base: str) -> dict[str, float]:
    """The gateway's subscription events so far, by path (written, executed)."""
    text = httpx.get(base + "/metrics", timeout=10).text
    counts = {}
    for line in text.splitlines():
        if line.startswith("statefed_gateway_subscription_events_total{"):
            path = line.split('path="', 1)[1].split('"', 1)[0]
            counts[path] = float(line.rsplit(" ", 1)[1])
    return counts


def test_events_are_written_by_the_compiled_writer_unless_it_cannot_prove_them(
    base: str,
) -> None:
    """A plain selection's events are written without execution; one the writer does not
    cover (a field with a resolver of its own) is executed."""

    async def run(query: str) -> list[dict[str, Any]]:
        async with opened(base) as socket:
            await send(socket, {"id": "c", "type": "subscribe", "payload": {"query": query}})
            messages = []
            while (message := await receive(socket))["type"] != "complete":
                messages.append(message)
            return messages

    before = _pushed(base)
    plain = asyncio.run(run("subscription { steps(start: 2) { value __typename } }"))
    between = _pushed(base)
    resolved = asyncio.run(run("subscription { steps(start: 2) { value double } }"))
    after = _pushed(base)
    assert [m["payload"]["data"]["steps"] for m in plain] == [
        {"value": v, "__typename": "Step"} for v in (2, 1, 0)
    ]
    assert [m["payload"]["data"]["steps"] for m in resolved] == [
        {"value": v, "double": 2 * v} for v in (2, 1, 0)
    ]
    assert between["written"] - before.get("written", 0) == 3
    assert between["executed"] == before.get("executed", 0)
    assert after["executed"] - between["executed"] == 3
    assert after["written"] == between["written"]


async def message_of(socket: ClientConnection, ident: str) -> dict[str, Any]:
    """The next message for `ident`, past those of other operations (ticks keep coming)."""
    async with asyncio.timeout(RECEIVE_S):
        while (message := await receive(socket))["id"] != ident:
            pass
    return message


async def answered(socket: ClientConnection, idents: set[str]) -> dict[str, Any]:
    """The `data` of each of `idents`' `next`, once each has completed."""
    payloads: dict[str, Any] = {}
    done: set[str] = set()
    while done != idents:
        message = await receive(socket)
        assert message["id"] in idents and message["type"] in ("next", "complete"), message
        if message["type"] == "next":
            payloads[message["id"]] = message["payload"]["data"]
        else:
            done.add(message["id"])
    return payloads


@pytest.mark.usefixtures("gate")
def test_operations_over_the_connection_limit_are_refused_with_an_error(capped: str) -> None:
    """Queries and mutations in flight on one WebSocket are capped: one more gets an `error`
    naming the limit and its setting, the connection stays open, and a place frees when an
    operation is answered or the client completes it."""
    echo = {"query": 'mutation { echo(text: "x") }'}

    async def scenario() -> None:
        async with opened(capped) as socket:
            for ident in ("1", "2"):
                await send(socket, {"id": ident, "type": "subscribe", "payload": GATED})
            wait_until(lambda: Gate.waiting == 2, 10, "two gated queries in flight")
            await send(socket, {"id": "3", "type": "subscribe", "payload": echo})
            refused = await receive(socket)
            assert (refused["id"], refused["type"]) == ("3", "error")
            (error,) = refused["payload"]
            assert error["extensions"] == {
                "code": "TOO_MANY_OPERATIONS",
                "limit": 2,
                "variable": MAX_OPERATIONS,
            }
            assert MAX_OPERATIONS in error["message"]
            await send(socket, {"id": "1", "type": "complete"})  # the client gives one up
            wait_until(lambda: Gate.waiting == 1, 10, "the completed query to stop")
            await send(socket, {"id": "3", "type": "subscribe", "payload": echo})  # id free
            assert await answered(socket, {"3"}) == {"3": {"echo": "x"}}
            await send(socket, {"id": "4", "type": "subscribe", "payload": GATED})
            wait_until(lambda: Gate.waiting == 2, 10, "two gated queries in flight again")
            await send(socket, {"id": "5", "type": "subscribe", "payload": echo})
            assert (await receive(socket))["type"] == "error"
            Gate.opened.set()
            assert await answered(socket, {"2", "4"}) == {
                ident: {"gated": "through"} for ident in ("2", "4")
            }
            await send(socket, {"id": "5", "type": "subscribe", "payload": echo})
            assert await answered(socket, {"5"}) == {"5": {"echo": "x"}}

    asyncio.run(scenario())


@pytest.mark.usefixtures("gate")
def test_running_subscriptions_leave_the_operation_limit_to_queries(capped: str) -> None:
    """A subscription counts against the operation limit only until its stream starts; from
    then on the subscription limits count it."""

    async def scenario() -> None:
        async with opened(capped) as socket:
            for ident in ("a", "b"):
                await send(socket, {"id": ident, "type": "subscribe", "payload": TICKS})
                assert (await message_of(socket, ident))["type"] == "next"
            for ident in ("1", "2"):
                await send(socket, {"id": ident, "type": "subscribe", "payload": GATED})
            wait_until(lambda: Gate.waiting == 2, 10, "two gated queries in flight")
            await send(socket, {"id": "3", "type": "subscribe", "payload": GATED})
            refused = await message_of(socket, "3")
            assert refused["type"] == "error"
            assert refused["payload"][0]["extensions"]["code"] == "TOO_MANY_OPERATIONS"

    asyncio.run(scenario())
    wait_until(lambda: Running.count == 0, 10, lambda: f"{Running.count} sources still running")


def test_the_connections_token_expiring_ends_its_subscriptions_and_refuses_more(
    signed: tuple[str, Issuer],
) -> None:
    """Each subscription gets one UNAUTHENTICATED `next` then `complete` once `exp` and the
    leeway have passed; the connection stays open, but a `subscribe` on it is then 4403."""
    base, issuer = signed

    async def scenario() -> None:
        exp = int(time.time()) + 2
        async with opened(base, token=issuer.token(exp=exp)) as socket:
            for ident in ("a", "b"):
                await send(socket, {"id": ident, "type": "subscribe", "payload": TICKS})
            ends: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
            while any(len(end) < 2 for end in ends.values()):
                message = await receive(socket)
                if message["type"] == "next" and "data" in message["payload"]:
                    assert time.time() < exp + LEEWAY_S + RECEIVE_S, "it outlived its token"
                else:
                    ends[message["id"]].append(message)
            assert time.time() >= exp + LEEWAY_S - 0.1  # not before the leeway ran out
            error = {"message": SUBSCRIPTION_EXPIRED, "extensions": {"code": "UNAUTHENTICATED"}}
            for ident, end in ends.items():
                assert end == [
                    {"id": ident, "type": "next", "payload": {"errors": [error]}},
                    {"id": ident, "type": "complete"},
                ]
            await send(socket, {"type": "ping"})
            assert await receive(socket) == {"type": "pong"}
            await send(socket, {"id": "c", "type": "subscribe", "payload": TICKS})
            assert await closed(socket) == (4403, "Forbidden: the token has expired")

    asyncio.run(scenario())
