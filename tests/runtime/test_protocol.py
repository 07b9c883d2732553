"""The gateway's and the node's uvicorn protocol (`runtime.graphql_http.protocol`): the
writes of one event-loop turn reach the socket as one, in order, before any close."""

from __future__ import annotations

import asyncio
import threading
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

    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), loop="uvloop", http=GraphQLHttpToolsProtocol,
        lifespan="off", log_config=None, access_log=False,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30, "the server to start")
        answer = httpx.get(f"http://127.0.0.1:{config.port}/", timeout=5)
        received.set()
        assert answer.content == b"answered"
        wait_until(lambda: bool(after), 10, "the app to finish")
        assert after == [True]
    finally:
        received.set()
        server.should_exit = True
        thread.join(30)
