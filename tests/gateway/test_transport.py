"""gateway.nodes.transport against a scripted HTTP/1.1 server on loopback: keep-alive reuse, a
connection closed by the server, failures raised as the transport's own exceptions, the
pool limit, https through httpx."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson
import pytest

from gateway.nodes.transport import (
    NodeConnectError,
    NodeConnections,
    NodeReadError,
    NodeTransportTimeoutError,
)
from tooling.processes import wait_until_async

OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'

# what the server does with the n-th request (from 0) on the c-th connection (from 0)
Script = Callable[[int, int], Awaitable[bytes | None]]


class Closing(bytes):
    """An answer after which the server closes the connection."""


class ScriptedServer:
    """Reads whole requests (headers and content-length body) and writes what `script`
    returns; None closes the connection without answering, so does Closing after writing."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/graphql"

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index, self.connections = self.connections, self.connections + 1
        self.open += 1
        self._writers.add(writer)
        self.most_open = max(self.most_open, self.open)
        try:
            n = 0
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                answer = await self.script(index, n)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if isinstance(answer, Closing):
                    break
                n += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            self._writers.discard(writer)
            writer.close()


async def always_ok(connection: int, n: int) -> bytes:
    return OK


BODY = b'{"query":"{ a }"}'


@contextlib.asynccontextmanager
async def connections(limit: int = 4) -> AsyncIterator[NodeConnections]:
    opened = NodeConnections(limit)
    try:
        yield opened
    finally:
        await opened.aclose()


def test_answers_over_one_kept_alive_connection() -> None:
    async def scenario() -> None:
        server = ScriptedServer(always_ok)
        async with server as url, connections() as c:
            answers = [await c.post(url, BODY) for _ in range(5)]
        assert answers == [(200, b'{"ok":true}')] * 5
        assert server.connections == 1
        head, body = server.requests[0].split(b"\r\n\r\n")
        assert head.startswith(b"POST /graphql HTTP/1.1\r\nhost: 127.0.0.1:")
        assert b"\r\ncontent-type: application/json\r\n" in head
        assert b"\r\ncontent-length: 17" in head
        assert body == BODY

    asyncio.run(scenario())


def test_a_reused_connection_closed_before_answering_is_retried_on_a_new_one() -> None:
    async def closes_after_first(connection: int, n: int) -> bytes | None:
        return OK if n == 0 else None  # as a keep-alive timeout racing the next request

    async def scenario() -> None:
        server = ScriptedServer(closes_after_first)
        async with server as url, connections() as c:
            first = await c.post(url, BODY)
            second = await c.post(url, BODY)
        assert (first[0], second[0]) == (200, 200)
        assert server.connections == 2
        assert len(server.requests) == 3  # the second request was sent twice

    asyncio.run(scenario())


def test_a_new_connection_closed_without_answer_is_an_error_not_a_retry() -> None:
    async def never_answers(connection: int, n: int) -> bytes | None:
        return None

    async def scenario() -> None:
        server = ScriptedServer(never_answers)
        async with server as url, connections() as c:
            with pytest.raises(NodeReadError, match="without answering"):
                await c.post(url, BODY)
        assert len(server.requests) == 1

    asyncio.run(scenario())


def test_an_answer_cut_short_is_a_protocol_error() -> None:
    async def cut(connection: int, n: int) -> bytes | None:
        return Closing(OK[:-4]) if connection == 0 else OK

    async def scenario() -> None:
        server = ScriptedServer(cut)
        async with server as url, connections() as c:
            with pytest.raises(NodeReadError, match="mid-answer"):
                await c.post(url, BODY)
            assert (await c.post(url, BODY))[0] == 200  # a new connection works

    asyncio.run(scenario())


def test_no_server_is_a_connect_error() -> None:
    async def scenario() -> None:
        server = ScriptedServer(always_ok)
        async with server as url:
            pass  # the port is free again
        async with connections() as c:
            with pytest.raises(NodeConnectError, match=r"cannot connect to 127\.0\.0\.1"):
                await c.post(url, BODY)

    asyncio.run(scenario())


def test_chunked_answers_are_decoded_and_connection_close_is_honoured() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        b'5\r\n{"ok"\r\n6\r\n:true}\r\n0\r\n\r\n'
    )

    async def answer(connection: int, n: int) -> bytes | None:
        return chunked

    async def scenario() -> None:
        server = ScriptedServer(answer)
        async with server as url, connections() as c:
            first = await c.post(url, BODY)
            second = await c.post(url, BODY)
        assert orjson.loads(first[1]) == orjson.loads(second[1]) == {"ok": True}
        assert server.connections == 2  # `connection: close` was not reused

    asyncio.run(scenario())


def test_at_most_the_limit_of_connections_are_open_to_one_host() -> None:
    async def slow(connection: int, n: int) -> bytes:
        await asyncio.sleep(0.01)
        return OK

    async def scenario() -> None:
        server = ScriptedServer(slow)
        async with server as url, connections(limit=3) as c:
            answers = await asyncio.gather(*(c.post(url, BODY) for _ in range(30)))
        assert [status for status, _ in answers] == [200] * 30
        assert server.most_open == 3
        assert server.connections == 3

    asyncio.run(scenario())


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections must be at least 1"):
        NodeConnections(0)


def test_an_abandoned_post_closes_its_connection_so_a_late_answer_goes_nowhere() -> None:
    async def first_is_late(connection: int, n: int) -> bytes | None:
        if connection == 0:
            await asyncio.sleep(0.3)
            return b'HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n"late"'
        return OK

    async def scenario() -> None:
        server = ScriptedServer(first_is_late)
        async with server as url, connections(limit=1) as c:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await c.post(url, BODY)
            answer = await c.post(url, BODY)
        assert answer == (200, b'{"ok":true}')
        assert server.connections == 2

    asyncio.run(scenario())


def test_https_urls_are_posted_with_tls_by_httpx() -> None:
    first_bytes: list[bytes] = []

    async def refuse_after_hello(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        first_bytes.append(await reader.read(5))
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(refuse_after_hello, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with connections() as c:
                with pytest.raises(NodeConnectError):
                    await c.post(f"https://127.0.0.1:{port}/graphql", BODY)
        finally:
            server.close()
            await server.wait_closed()
        assert first_bytes[0][:2] == b"\x16\x03"  # a TLS handshake record, not a request

    asyncio.run(scenario())


def test_idle_connections_the_server_closed_are_forgotten() -> None:
    async def scenario() -> None:
        server = ScriptedServer(always_ok)
        async with connections() as c:
            async with server as url:
                await asyncio.gather(*(c.post(url, BODY) for _ in range(3)))
                pool = next(iter(c._pools.values()))
                assert len(pool._idle) == 3
            # leaving the server closed every connection
            deadline = asyncio.get_running_loop().time() + 5
            while pool._idle and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            assert pool._idle == []

    asyncio.run(scenario())


def test_a_post_past_its_deadline_is_a_timeout_and_its_connection_is_not_reused() -> None:
    async def first_is_late(connection: int, n: int) -> bytes | None:
        if connection == 0:
            await asyncio.sleep(0.3)
            return b'HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n"late"'
        return OK

    async def scenario() -> None:
        server = ScriptedServer(first_is_late)
        async with server as url, connections(limit=1) as c:
            deadline = asyncio.get_running_loop().time() + 0.05
            with pytest.raises(NodeTransportTimeoutError, match="before the deadline"):
                await c.post(url, BODY, deadline=deadline)
            later = asyncio.get_running_loop().time() + 5
            answer = await c.post(url, BODY, deadline=later)
        assert answer == (200, b'{"ok":true}')
        assert server.connections == 2

    asyncio.run(scenario())


def test_waiting_for_a_free_connection_ends_at_the_deadline() -> None:
    release = asyncio.Event()

    async def held(connection: int, n: int) -> bytes:
        await release.wait()
        return OK

    async def scenario() -> None:
        server = ScriptedServer(held)
        async with server as url, connections(limit=1) as c:
            busy = asyncio.ensure_future(c.post(url, BODY))
            await wait_until_async(lambda: _true(server.requests), 5, "the first request", 0.01)
            deadline = asyncio.get_running_loop().time() + 0.05
            with pytest.raises(NodeTransportTimeoutError, match="no free connection to the node"):
                await c.post(url, BODY, deadline=deadline)
            release.set()
            assert await busy == (200, b'{"ok":true}')
        assert server.connections == 1

    asyncio.run(scenario())


async def _true(value: object) -> bool:
    return bool(value)
