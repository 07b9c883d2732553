"""gateway.transport against a scripted HTTP/1.1 server on loopback: keep-alive reuse, a
connection closed by the server, failures raised as httpx's exceptions, the pool limit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import pytest

from gateway.transport import NodeTransport

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


async def post(client: httpx.AsyncClient, url: str) -> httpx.Response:
    return await client.post(url, content=b'{"query":"{ a }"}')


def client(limit: int = 4, timeout: float = 5.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=NodeTransport(limit), timeout=timeout)


def test_answers_over_one_kept_alive_connection() -> None:
    async def scenario() -> None:
        server = ScriptedServer(always_ok)
        async with server as url, client() as c:
            answers = [await post(c, url) for _ in range(5)]
        assert [a.status_code for a in answers] == [200] * 5
        assert {a.json()["ok"] for a in answers} == {True}
        assert server.connections == 1
        head, body = server.requests[0].split(b"\r\n\r\n")
        assert head.startswith(b"POST /graphql HTTP/1.1\r\n")
        assert b"\r\nhost: 127.0.0.1:" in head.lower()
        assert body == b'{"query":"{ a }"}'

    asyncio.run(scenario())


def test_a_reused_connection_closed_before_answering_is_retried_on_a_new_one() -> None:
    async def closes_after_first(connection: int, n: int) -> bytes | None:
        return OK if n == 0 else None  # as a keep-alive timeout racing the next request

    async def scenario() -> None:
        server = ScriptedServer(closes_after_first)
        async with server as url, client() as c:
            first = await post(c, url)
            second = await post(c, url)
        assert (first.status_code, second.status_code) == (200, 200)
        assert server.connections == 2
        assert len(server.requests) == 3  # the second request was sent twice

    asyncio.run(scenario())


def test_a_new_connection_closed_without_answer_is_an_error_not_a_retry() -> None:
    async def never_answers(connection: int, n: int) -> bytes | None:
        return None

    async def scenario() -> None:
        server = ScriptedServer(never_answers)
        async with server as url, client() as c:
            with pytest.raises(httpx.RemoteProtocolError, match="without answering"):
                await post(c, url)
        assert len(server.requests) == 1

    asyncio.run(scenario())


def test_an_answer_cut_short_is_a_protocol_error() -> None:
    async def cut(connection: int, n: int) -> bytes | None:
        return Closing(OK[:-4]) if connection == 0 else OK

    async def scenario() -> None:
        server = ScriptedServer(cut)
        async with server as url, client() as c:
            with pytest.raises(httpx.RemoteProtocolError, match="mid-answer"):
                await post(c, url)
            assert (await post(c, url)).status_code == 200  # a new connection works

    asyncio.run(scenario())


def test_no_server_is_a_connect_error() -> None:
    async def scenario() -> None:
        server = ScriptedServer(always_ok)
        async with server as url:
            pass  # the port is free again
        async with client() as c:
            with pytest.raises(httpx.ConnectError, match=r"cannot connect to 127\.0\.0\.1"):
                await post(c, url)

    asyncio.run(scenario())


def test_a_silent_server_is_a_read_timeout_and_its_connection_is_dropped() -> None:
    async def silent_first(connection: int, n: int) -> bytes | None:
        if connection == 0:
            await asyncio.sleep(30)
        return OK

    async def scenario() -> None:
        server = ScriptedServer(silent_first)
        async with server as url, client(timeout=0.2) as c:
            with pytest.raises(httpx.ReadTimeout):
                await post(c, url)
            assert (await post(c, url)).status_code == 200
        assert server.connections == 2

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
        async with server as url, client() as c:
            first = await post(c, url)
            second = await post(c, url)
        assert first.json() == second.json() == {"ok": True}
        assert server.connections == 2  # `connection: close` was not reused

    asyncio.run(scenario())


def test_at_most_the_limit_of_connections_are_open_to_one_host() -> None:
    async def slow(connection: int, n: int) -> bytes:
        await asyncio.sleep(0.01)
        return OK

    async def scenario() -> None:
        server = ScriptedServer(slow)
        async with server as url, client(limit=3) as c:
            answers = await asyncio.gather(*(post(c, url) for _ in range(30)))
        assert [a.status_code for a in answers] == [200] * 30
        assert server.most_open == 3
        assert server.connections == 3

    asyncio.run(scenario())


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections must be at least 1"):
        NodeTransport(0)


def test_post_sends_json_and_answers_status_and_body() -> None:
    async def scenario() -> None:
        server = ScriptedServer(always_ok)
        transport = NodeTransport(2)
        async with server as url:
            try:
                answers = [await transport.post(url, b'{"query":"{ a }"}') for _ in range(3)]
            finally:
                await transport.aclose()
        assert answers == [(200, b'{"ok":true}')] * 3
        assert server.connections == 1
        head, body = server.requests[0].split(b"\r\n\r\n")
        assert head.startswith(b"POST /graphql HTTP/1.1\r\nhost: 127.0.0.1:")
        assert b"\r\ncontent-type: application/json\r\n" in head
        assert b"\r\ncontent-length: 17" in head
        assert body == b'{"query":"{ a }"}'

    asyncio.run(scenario())


def test_an_abandoned_post_closes_its_connection_so_a_late_answer_goes_nowhere() -> None:
    async def first_is_late(connection: int, n: int) -> bytes | None:
        if connection == 0:
            await asyncio.sleep(0.3)
            return b'HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n"late"'
        return OK

    async def scenario() -> None:
        server = ScriptedServer(first_is_late)
        transport = NodeTransport(1)
        async with server as url:
            try:
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.05):
                        await transport.post(url, b"{}")
                answer = await transport.post(url, b"{}")
            finally:
                await transport.aclose()
        assert answer == (200, b'{"ok":true}')
        assert server.connections == 2

    asyncio.run(scenario())


def test_post_speaks_plain_http_only() -> None:
    async def scenario() -> None:
        transport = NodeTransport(1)
        try:
            with pytest.raises(httpx.UnsupportedProtocol, match="plain http only"):
                await transport.post("https://127.0.0.1:1/graphql", b"{}")
        finally:
            await transport.aclose()

    asyncio.run(scenario())


def test_idle_connections_the_server_closed_are_forgotten() -> None:
    async def scenario() -> None:
        server = ScriptedServer(always_ok)
        transport = NodeTransport(4)
        try:
            async with server as url:
                await asyncio.gather(*(transport.post(url, b"{}") for _ in range(3)))
                pool = next(iter(transport._pools.values()))
                assert len(pool._idle) == 3
            # leaving the server closed every connection
            deadline = asyncio.get_running_loop().time() + 5
            while pool._idle and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            assert pool._idle == []
        finally:
            await transport.aclose()

    asyncio.run(scenario())
