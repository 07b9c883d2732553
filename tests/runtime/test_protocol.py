"""The gateway's and the node's uvicorn protocol (`runtime.graphql_http.protocol`): the
writes of one event-loop turn reach the socket as one, in order, before any close; a
request waiting in the socket keeps its connection from being closed as idle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn

from runtime.graphql_http.protocol import GraphQLHttpToolsProtocol, _Corked
from tooling.broker import free_port
from tooling.processes import wait_until


class _Transport:
    """Records what reaches it (the socket's side of the transport)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.events.append(data)

    def write_eof(self) -> None:
        self.events.append("eof")

    def close(self) -> None:
        self.closing = True
        self.events.append("close")

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


@contextlib.contextmanager
def _serving(app: Any, **options: Any) -> Iterator[str]:
    """`app` served by uvicorn with this protocol on a loopback port (its URL), in a thread
    of this process, stopped on leaving."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), loop="uvloop", http=GraphQLHttpToolsProtocol,
        lifespan="off", log_config=None, access_log=False, **options,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30, "the server to start")
        yield f"http://127.0.0.1:{config.port}/"
    finally:
        server.should_exit = True
        thread.join(30)


async def _turn() -> None:
    await asyncio.sleep(0)  # one event-loop turn: the flush scheduled by a write runs


def test_a_head_and_body_written_in_one_turn_reach_the_socket_as_one_write() -> None:
    async def scenario() -> list[Any]:
        raw = _Transport()
        corked = _Corked(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
        corked.write(b"HTTP/1.1 200 OK\r\n\r\n")
        corked.write(b"{}")
        assert raw.events == [] and corked.get_write_buffer_size() == 21
        await _turn()
        corked.write(b"next")
        await _turn()
        return raw.events

    assert asyncio.run(scenario()) == [b"HTTP/1.1 200 OK\r\n\r\n{}", b"next"]


def test_closing_sends_what_is_held_first_and_nothing_after() -> None:
    async def scenario() -> list[Any]:
        raw = _Transport()
        corked = _Corked(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
        corked.write(b"a")
        corked.write_eof()
        corked.write(b"b")
        corked.close()
        corked.write(b"too late")
        await _turn()
        assert corked.get_extra_info("socket") == "info socket"  # the transport's own
        return raw.events

    assert asyncio.run(scenario()) == [b"a", "eof", b"b", "close"]


def test_a_whole_response_is_sent_before_what_the_app_does_after_it() -> None:
    """An app that, having answered, blocks its event loop until the client has the answer:
    the answer must already be on the socket (held to the end of the turn, it never would)."""
    received = threading.Event()
    after: list[bool] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"answered"})
        after.append(received.wait(10))  # the app's own work after answering

    with _serving(app) as url:
        try:
            answer = httpx.get(url, timeout=5)
            received.set()
            assert answer.content == b"answered"
            wait_until(lambda: bool(after), 10, "the app to finish")
            assert after == [True]
        finally:
            received.set()  # the app's thread waits no more, whatever failed


def test_a_request_sent_while_the_loop_stood_still_past_the_keep_alive_is_answered() -> None:
    """The event loop stands still (in its I/O phase, as a SIGSTOP or a long collection can
    catch it) for longer than the keep-alive timeout of an idle connection, and the client
    sends its next request meanwhile: the timer fires first when the loop moves again, and
    must not close the connection with the request unread (the client would get a reset)."""
    frozen = threading.Event()
    read_end, write_end = os.pipe()

    def freeze() -> None:
        os.read(read_end, 1)
        frozen.set()
        time.sleep(1.5)  # the freeze itself: longer than the 1 s keep-alive timeout

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if not frozen.is_set():
            asyncio.get_running_loop().add_reader(read_end, freeze)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"answered"})

    try:
        with _serving(app, timeout_keep_alive=1) as url, httpx.Client(timeout=10) as client:
            assert client.get(url).content == b"answered"  # the connection is now idle
            os.write(write_end, b"x")
            assert frozen.wait(10), "the event loop did not run the freeze"
            assert client.get(url).content == b"answered"  # on the same connection
    finally:
        os.close(read_end)
        os.close(write_end)
