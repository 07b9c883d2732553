"""The feed link's reader (gateway.nodes.links), against an in-memory stream of frames: a
frame of a snapshot marked `more` is followed by the next read only once its follower took
it, or let the follow go; a follow whose start was cancelled is not left registered; follows
waiting for a link to a node that does not answer share one attempt to connect (against a
real socket on loopback that never answers the handshake)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from gateway.nodes import links
from gateway.nodes.links import FeedLink, LinkError
from runtime.trust import NodeCallSigner
from tests.live.test_cache import settle

pytestmark = pytest.mark.timeout(30)


class _Stream:
    """Messages as a WebSocket connection yields them, as they are released."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[str | None] = asyncio.Queue()
        self.read = 0

    def send(self, frame: dict[str, Any]) -> None:
        self.messages.put_nowait(orjson.dumps(frame).decode())

    def end(self) -> None:
        self.messages.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[str]:
        while (message := await self.messages.get()) is not None:
            self.read += 1
            yield message


async def _linked() -> tuple[FeedLink, _Stream, asyncio.Task[None]]:
    link = FeedLink("n1", "http://127.0.0.1:9", NodeCallSigner(None))
    stream = _Stream()
    reader = asyncio.get_running_loop().create_task(link._read(stream))  # type: ignore[arg-type]
    return link, stream, reader


async def _registered(link: FeedLink) -> tuple[int, asyncio.Queue[Any]]:
    async def sent(frame: dict[str, Any]) -> None:
        pass

    link.open = _no_connection  # type: ignore[method-assign]
    link._send = sent  # type: ignore[method-assign]
    return await link.follow({"partition": 0, "keys": None, "snapshot": True})


async def _no_connection() -> None:
    pass


def _changes(ident: int, rows: int, more: bool) -> dict[str, Any]:
    frame = {"type": "changes", "id": ident, "changes": [{"n": i} for i in range(rows)]}
    return {**frame, "applied": {"t": 5}, "snapshot": True, **({"more": True} if more else {})}


def test_the_next_frame_of_a_snapshot_is_read_once_the_last_was_taken() -> None:
    async def scenario() -> None:
        link, stream, reader = await _linked()
        ident, frames = await _registered(link)
        stream.send(_changes(ident, 3, more=True))
        stream.send(_changes(ident, 3, more=True))
        stream.send(_changes(ident, 2, more=False))
        await settle()
        assert (stream.read, frames.qsize()) == (1, 1)  # the second waits on the socket
        await frames.get()
        await settle()
        assert (stream.read, frames.qsize()) == (2, 1)
        await frames.get()
        await settle()
        assert (stream.read, frames.qsize()) == (3, 1)  # the last: no wait after it
        stream.end()
        await reader

    asyncio.run(scenario())


def test_a_follow_let_go_mid_snapshot_does_not_hold_the_reader() -> None:
    async def scenario() -> None:
        link, stream, reader = await _linked()
        ident, _ = await _registered(link)
        other, others = await _registered(link)
        stream.send(_changes(ident, 3, more=True))
        stream.send({"type": "progress", "id": other, "applied": {"t": 6}})
        await settle()
        assert others.empty()  # behind the snapshot frame nobody took yet
        await link.unfollow(ident)
        await settle()
        assert (await others.get())["type"] == "progress"
        stream.end()
        await reader

    asyncio.run(scenario())


def test_a_follow_cancelled_while_it_was_being_sent_is_not_left_registered() -> None:
    async def scenario() -> None:
        link = FeedLink("n1", "http://127.0.0.1:9", NodeCallSigner(None))
        sending = asyncio.Event()

        async def stuck(frame: dict[str, Any]) -> None:
            sending.set()
            await asyncio.Event().wait()

        link.open = _no_connection  # type: ignore[method-assign]
        link._send = stuck  # type: ignore[method-assign]
        follow = asyncio.get_running_loop().create_task(link.follow({"partition": 0}))
        await sending.wait()
        assert not link.idle
        follow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follow
        assert link.idle  # no queue left for frames nobody would take

    asyncio.run(scenario())


class _Silent:
    """A TCP server on loopback that accepts connections and never answers; counts them."""

    def __init__(self) -> None:
        self.accepted = 0
        self._held: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _accept(self, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._held.append(writer)

    async def stop(self) -> None:
        for writer in self._held:
            writer.close()
        self._server.close()
        await self._server.wait_closed()


def test_follows_waiting_on_a_node_that_does_not_answer_share_one_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(links, "_OPEN_TIMEOUT_S", 1.0)

    async def scenario() -> None:
        node = _Silent()
        link = FeedLink("n1", await node.start(), NodeCallSigner(None))
        try:
            follows = [link.follow({"partition": p}) for p in range(4)]
            outcomes = await asyncio.gather(*follows, return_exceptions=True)
            assert all(isinstance(o, LinkError) for o in outcomes), outcomes
            assert "feed unreachable" in str(outcomes[0])
            # one attempt for all (each its own, one after another, before)
            assert node.accepted == 1
            assert link.idle  # no follow left registered, no attempt left running
        finally:
            await link.close()
            await node.stop()

    asyncio.run(scenario())


def test_closing_a_link_while_it_connects_fails_its_waiters_with_a_link_error() -> None:
    async def scenario() -> None:
        node = _Silent()
        link = FeedLink("n1", await node.start(), NodeCallSigner(None))
        try:
            follow = asyncio.get_running_loop().create_task(link.follow({"partition": 0}))
            deadline = asyncio.get_running_loop().time() + 10
            while node.accepted == 0:  # the attempt reached the node
                assert asyncio.get_running_loop().time() < deadline, "no connection attempt"
                await asyncio.sleep(0.01)
            await link.close()
            with pytest.raises(LinkError, match="closed while connecting"):
                await follow
            assert link.idle
        finally:
            await node.stop()

    asyncio.run(scenario())
