"""A test client of a node's `/feed` WebSocket (schema.feed), on the websockets sync client."""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from gateway.nodes.links import feed_url
from node.config import NodeConfig
from runtime.trust import ClusterSecret, NodeCallSigner
from schema.feed import FEED_SUBPROTOCOL, Change
from tooling.processes import client_tls

Frame = dict[str, Any]


def _feed_url(node: NodeConfig) -> tuple[str, str]:
    """The feed URL of `node`'s running process (its incarnation read from its /health) and
    the request target the handshake's signature covers, as the gateway makes them."""
    health = httpx.get(f"{node.url}/health", timeout=10, verify=client_tls()).json()
    return feed_url(node.url, node.node_id, health["incarnation"])


@contextlib.contextmanager
def open_feed(
    node: NodeConfig,
    secret: ClusterSecret | None = None,
    subprotocol: str = FEED_SUBPROTOCOL,
    receive_buffer: int | None = None,
) -> Iterator[FeedClient]:
    """A connection to `node`'s feed, its handshake signed with `secret` when given;
    `receive_buffer` shrinks the socket's buffer (a slow reader backs up sooner)."""
    sock = None
    uri, target = _feed_url(node)
    if receive_buffer is not None:
        parts = urllib.parse.urlsplit(node.url)
        host, port = parts.hostname, parts.port
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.connect((host, port))
    headers = []
    if secret is not None:
        headers = NodeCallSigner(secret).headers(b"GET", target.encode(), b"", ["test"])
    with connect(
        uri,
        subprotocols=[Subprotocol(subprotocol)],
        additional_headers=[(name.decode(), value.decode()) for name, value in headers],
        proxy=None,
        open_timeout=10,
        sock=sock,
        max_size=4 << 20,
    ) as connection:
        yield FeedClient(connection)


class FeedClient:
    """Frames by follow id, read as they come."""

    def __init__(self, connection: ClientConnection):
        self.connection = connection
        self.frames: list[Frame] = []

    def send(self, frame: Frame) -> None:
        self.connection.send(orjson.dumps(frame).decode())

    def follow(self, follow_id: int, partition: int, views: list[str], **extra: Any) -> None:
        self.send({"type": "follow", "id": follow_id, "partition": partition, "views": views,
                   **extra})  # fmt: skip

    def of(self, follow_id: int | None, kind: str | None = None) -> list[Frame]:
        return [f for f in self.frames if f.get("id") == follow_id and kind in (None, f["type"])]

    def of_type(self, kind: str) -> list[Frame]:
        return [f for f in self.frames if f["type"] == kind]

    def changes(self, follow_id: int) -> list[Change]:
        return [
            Change.from_json(doc) for frame in self.of(follow_id, "changes")
            for doc in frame["changes"]
        ]  # fmt: skip

    def wait_for(self, what: str, done: Callable[[], bool], timeout_s: float = 30) -> None:
        """Read frames until `done()`; AssertionError naming `what` after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not done():
            left = deadline - time.monotonic()
            assert left > 0, f"no {what} within {timeout_s} s; frames: {self.frames[-5:]}"
            try:
                text = self.connection.recv(timeout=min(left, 1.0))
            except TimeoutError:
                continue
            self.frames.append(orjson.loads(text))

    def applied(self, follow_id: int, topic: str) -> int:
        """Where the follow stands in `topic`: the `applied` of its latest changes or
        progress frame (or the `from` of `following` before any). A keyed follow gets no
        changes frame for a batch without its keys: only a progress frame says it passed."""
        stands = [
            f["applied"][topic]
            for f in self.of(follow_id)
            if f["type"] in ("changes", "progress") and topic in f["applied"]
        ]
        if stands:
            return int(stands[-1])
        following = self.of(follow_id, "following")
        return int(following[0]["from"][topic]) if following else -1
