"""The gateway's and the node's uvicorn protocol (`runtime.graphql_http.protocol`): the
writes of one event-loop turn reach the socket as one, in order, before any close."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime.graphql_http.protocol import _Corked


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
