"""One WebSocket to one node's change feed (`schema.feed`): opened on the first follow,
its handshake signed like a node call (runtime.trust), its frames handed to the follow
they name.

A follow registers a queue; the link's reader puts every frame of that follow in it, and
`LOST` when the connection ends (the follow is then over: the hub follows again). After a
frame marked `more` (a part of a snapshot of every key), the reader reads on only once the
follower took every frame of that follow, or let it go: a partition's snapshot of a million
rows is never held parsed all at once, a garbage collection walking it would pause the loop
(up to 600 ms, measured), and the node's sending waits on the socket meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.typing import Subprotocol

from runtime.trust import NodeCallSigner
from schema.feed import FEED_PATH, FEED_SUBPROTOCOL, feed_query

__all__ = ["LOST", "FeedLink", "Frames", "LinkError", "feed_url"]

log = logging.getLogger(__name__)

LOST: dict[str, Any] = {"type": "lost"}  # put in a follow's queue when its connection ended
_OPEN_TIMEOUT_S = 10.0
_MAX_FRAME_BYTES = 64 << 20  # a snapshot of many keys comes in one frame
_SHOWN_REFUSAL_CHARS = 300  # of a refusal's body, in the error


class LinkError(Exception):
    """The node's feed could not be reached or refused the handshake; says which and why."""


class Frames(asyncio.Queue[Mapping[str, Any]]):
    """The frames of one follow, in order; `taken` waits until the follower took them all
    (or `release` says it never will)."""

    def __init__(self) -> None:
        super().__init__()
        self._emptied = asyncio.Event()
        self._emptied.set()

    def _put(self, item: Mapping[str, Any]) -> None:
        super()._put(item)  # type: ignore[misc]  # asyncio.Queue's hook for subclasses
        self._emptied.clear()

    def _get(self) -> Mapping[str, Any]:
        item: Mapping[str, Any] = super()._get()  # type: ignore[misc]
        if self.empty():
            self._emptied.set()
        return item

    def release(self) -> None:
        """The follow is over: nothing waits for its frames to be taken any more."""
        self._emptied.set()

    async def taken(self) -> None:
        await self._emptied.wait()


def feed_url(node_url: str, node_id: str, incarnation: str) -> tuple[str, str]:
    """The feed's ws(s) URL of node `node_id`'s process `incarnation` served at `node_url`,
    and its request target (what the handshake's signature covers: it names the node
    process, which admits no other's)."""
    parts = urlsplit(node_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    path, query = parts.path.rstrip("/") + FEED_PATH, feed_query(node_id, incarnation)
    return urlunsplit((scheme, parts.netloc, path, query, "")), f"{path}?{query}"


class FeedLink:
    """The gateway's connection to the feed of node `node_id` at `url` (its process
    `incarnation`)."""

    def __init__(
        self,
        node_id: str,
        url: str,
        signer: NodeCallSigner,
        ca: Path | None = None,
        incarnation: str = "",
    ) -> None:
        self.node_id = node_id
        self.url = url
        self.incarnation = incarnation  # the node process, as its membership record says
        self._signer = signer
        self._ca = ca
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        # the one attempt to connect in progress: every follow waiting for the link shares
        # it, and its LinkError, rather than trying again one after another (each up to
        # _OPEN_TIMEOUT_S against a node that does not answer)
        self._connecting: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._follows: dict[int, Frames] = {}

    @property
    def idle(self) -> bool:
        """No follow on it, and none being started."""
        return not self._follows and self._connecting is None

    async def open(self) -> None:
        """Connect unless connected; LinkError naming the node when that fails."""
        if self._ws is not None:
            return
        if self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(self._connect())
            self._connecting.add_done_callback(self._connected)
        attempt = self._connecting
        try:  # a waiter cancelled (its follower gone) leaves the attempt to the others
            await asyncio.shield(attempt)
        except asyncio.CancelledError:
            waiter = asyncio.current_task()
            if attempt.cancelled() and waiter is not None and not waiter.cancelling():
                raise LinkError(f"node {self.node_id}: feed link closed while connecting") from None
            raise

    def _connected(self, attempt: asyncio.Task[None]) -> None:
        """The attempt is over: the next `open` after a failure tries again."""
        if self._connecting is attempt:
            self._connecting = None
        if not attempt.cancelled():
            attempt.exception()  # its waiters were told; no "never retrieved" warning

    async def _connect(self) -> None:
        uri, target = feed_url(self.url, self.node_id, self.incarnation)
        headers = self._signer.headers(b"GET", target.encode(), b"", ())
        try:
            ws = await connect(
                uri,
                subprotocols=[Subprotocol(FEED_SUBPROTOCOL)],
                additional_headers=[(k.decode(), v.decode()) for k, v in headers],
                ssl=self._ssl(uri),
                proxy=None,
                open_timeout=_OPEN_TIMEOUT_S,
                max_size=_MAX_FRAME_BYTES,
                compression=None,
            )
        except InvalidStatus as exc:  # the node answered, and said why it refused
            body = exc.response.body.decode("utf-8", "replace")[:_SHOWN_REFUSAL_CHARS]
            raise LinkError(
                f"node {self.node_id}: feed handshake refused with HTTP "
                f"{exc.response.status_code}: {body}"
            ) from exc
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise LinkError(f"node {self.node_id}: feed unreachable ({exc})") from exc
        self._ws = ws
        self._reader = asyncio.get_running_loop().create_task(self._read(ws))

    def _ssl(self, uri: str) -> ssl.SSLContext | None:
        if not uri.startswith("wss:"):
            return None
        return ssl.create_default_context(cafile=None if self._ca is None else str(self._ca))

    async def follow(self, frame: dict[str, Any]) -> tuple[int, Frames]:
        """Send a follow (its id set here); the queue its frames will come in."""
        ident = next(self._ids)
        queue = Frames()
        self._follows[ident] = queue  # from now on the link is not idle: the hub keeps it
        try:
            await self.open()
            await self._send({**frame, "type": "follow", "id": ident})
        except BaseException:  # a LinkError, or the follower cancelled: nobody takes frames
            self._forget(ident)
            raise
        return ident, queue

    async def unfollow(self, ident: int) -> None:
        """Stop follow `ident`; frames of it still in flight are dropped."""
        if self._forget(ident) and self._ws is not None:
            with contextlib.suppress(LinkError):
                await self._send({"type": "unfollow", "id": ident})

    def _forget(self, ident: int) -> bool:
        """Drop follow `ident`'s queue, freeing a reader waiting on it; whether it was there."""
        queue = self._follows.pop(ident, None)
        if queue is None:
            return False
        queue.release()
        return True

    async def _send(self, frame: dict[str, Any]) -> None:
        ws = self._ws
        if ws is None:
            raise LinkError(f"node {self.node_id}: feed connection closed")
        try:
            await ws.send(orjson.dumps(frame).decode())
        except (OSError, WebSocketException) as exc:
            raise LinkError(f"node {self.node_id}: feed connection lost ({exc})") from exc

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for message in ws:
                waiting = self._dispatch(message)
                if waiting is not None:  # a part of a snapshot: one at a time
                    await waiting.taken()
        except (OSError, WebSocketException) as exc:
            log.info("feed of node %s at %s ended: %s", self.node_id, self.url, exc)
        finally:
            self._lost(ws)

    def _dispatch(self, message: str | bytes) -> Frames | None:
        """Hand `message` to its follow; that follow's queue when the frame is a part of a
        snapshot with more to come."""
        try:
            frame = orjson.loads(message)
        except orjson.JSONDecodeError:
            log.warning("node %s sent a feed frame that is no JSON: %.200r", self.node_id, message)
            return None
        ident = frame.get("id") if isinstance(frame, dict) else None
        queue = self._follows.get(ident) if isinstance(ident, int) else None
        if queue is not None:
            queue.put_nowait(frame)
            return queue if frame.get("more") is True else None
        if isinstance(frame, dict) and frame.get("type") == "error":
            log.warning("node %s feed error: %.300s", self.node_id, frame.get("message"))
        return None

    def _lost(self, ws: ClientConnection) -> None:
        if self._ws is ws:
            self._ws = None
        follows, self._follows = self._follows, {}
        for queue in follows.values():
            queue.put_nowait(LOST)
            queue.release()

    async def close(self) -> None:
        if self._connecting is not None:  # its waiters get a LinkError
            self._connecting.cancel()
        ws, reader = self._ws, self._reader
        if ws is not None:
            await ws.close()
        if reader is not None:  # ends with the connection
            await asyncio.wait({reader})
            if not reader.cancelled() and reader.exception() is not None:
                log.warning("node %s feed reader failed", self.node_id, exc_info=reader.exception())
