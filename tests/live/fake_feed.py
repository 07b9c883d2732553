"""A fake node change feed for unit tests of the gateway's hub and subscriptions: a real
WebSocket server on loopback speaking `schema.feed`, over changelogs the test appends to.

`Changelog` is one view's changelog (per partition, the list of changes in offset order);
several `FakeFeedNode`s may serve the same changelog, each as a copy that has applied a
prefix of it (`applied`), like an owner and its standby.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from runtime.trust import (
    CALLER_HEADER,
    REQUEST_ID_HEADER,
    SIGNATURE_HEADER,
    ClusterSecret,
    RequestVerifier,
    SignatureError,
)
from schema import View, partition_for
from schema.feed import FEED_PATH, FEED_SUBPROTOCOL, Change, feed_query


@dataclass
class Changelog:
    """One view's changelog, per partition: the changes in offset order (offset = index)."""

    view: View
    partitions: int
    records: dict[int, list[Change]] = field(default_factory=dict)

    def append(self, key: str, row: Mapping[str, Any] | None, at: tuple[int, ...] = ()) -> Change:
        partition = partition_for(key, self.partitions)
        log = self.records.setdefault(partition, [])
        change = Change(self.view.name, key, len(log), dict(row) if row else None, at)
        log.append(change)
        return change

    def of(self, partition: int) -> list[Change]:
        return self.records.get(partition, [])


def count_row(key: str, count: int) -> dict[str, Any]:
    return {"key": key, "count": count, "last_event_ms": 1_700_000_000_000 + count}


@dataclass
class _Follow:
    ident: int
    partition: int
    keys: set[str] | None
    sent: int  # next offset to send
    replaying: bool = False  # asked from an offset: paced by the node's replay_step


class FakeFeedNode:
    """A node's `/feed` over `log`, holding `partitions` in `role`; `applied[p]` is how much
    of partition p's changelog this copy has applied (all of it by default, see `catch_up`).
    With `secret`, unsigned or wrongly signed handshakes get 401. `ignore_from` makes it
    replay every follow from offset 0 (a node the gateway must dedupe). A follow asking for
    heartbeats gets a `progress` frame every `HEARTBEAT_S`, its lease held. With
    `replay_step`, a follow from an offset gets at most that many offsets of the changelog
    per publish (a copy replaying from Kafka, behind the live follows). With `serves`, a
    follow of any other view is refused, as a node of another catalogue refuses it."""

    HEARTBEAT_S = 0.2

    def __init__(
        self,
        node_id: str,
        log: Changelog,
        partitions: Iterable[int],
        role: str = "ACTIVE",
        secret: ClusterSecret | None = None,
        ignore_from: bool = False,
        tls: ssl.SSLContext | None = None,
        replay_step: int | None = None,
        serves: Iterable[str] | None = None,
    ) -> None:
        self.node_id = node_id
        self.serves = None if serves is None else set(serves)
        self.incarnation = f"{node_id}-1"  # the process its membership record names
        self.replay_step = replay_step
        self.log = log
        self.partitions = set(partitions)
        self.role = role
        self.applied: dict[int, int] | None = None  # None: everything in the log
        self.ignore_from = ignore_from
        self.follows_asked: list[dict[str, Any]] = []
        self.refused = 0
        self._beats: set[asyncio.Task[None]] = set()
        self._verifier = None if secret is None else RequestVerifier(secret)
        self._tls = tls
        self._server: Server | None = None
        self._connections: set[ServerConnection] = set()
        self._follows: dict[ServerConnection, dict[int, _Follow]] = {}
        self.port = 0

    @property
    def url(self) -> str:
        scheme = "http" if self._tls is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> FakeFeedNode:
        self._server = await serve(
            self._serve,
            "127.0.0.1",
            port,
            subprotocols=[FEED_SUBPROTOCOL],  # type: ignore[list-item]
            process_request=self._admit,
            compression=None,
            ssl=self._tls,
        )
        self.port = port or self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop serving and drop every connection (a node that died)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def applied_of(self, partition: int) -> int:
        whole = len(self.log.of(partition))
        return whole if self.applied is None else min(whole, self.applied.get(partition, 0))

    def _admit(self, connection: ServerConnection, request: Request) -> Response | None:
        path, _, query = request.path.partition("?")
        if path != FEED_PATH:
            return connection.respond(404, "no such path\n")
        if self._verifier is None:
            return None
        headers: Headers = request.headers
        try:
            stamp = self._verifier.stamp(_header(headers, SIGNATURE_HEADER))
            self._verifier.verify(
                stamp,
                b"GET",
                request.path.encode(),
                _header(headers, CALLER_HEADER) or b"",
                _header(headers, REQUEST_ID_HEADER) or b"",
                b"",
            )
            if query != feed_query(self.node_id, self.incarnation):
                raise SignatureError(f"signed for {query!r}, not for node {self.node_id}")
        except SignatureError:
            self.refused += 1
            return connection.respond(401, "unsigned\n")
        return None

    async def _serve(self, connection: ServerConnection) -> None:
        self._connections.add(connection)
        self._follows[connection] = {}
        try:
            async for message in connection:
                await self._handle(connection, orjson.loads(message))
        finally:
            self._connections.discard(connection)
            self._follows.pop(connection, None)

    async def _handle(self, connection: ServerConnection, frame: dict[str, Any]) -> None:
        if frame["type"] == "unfollow":
            self._follows[connection].pop(frame["id"], None)
            return
        self.follows_asked.append(frame)
        partition = frame["partition"]
        topic = self.log.view.changelog_topic
        if self.serves is not None and not set(frame["views"]) <= self.serves:
            refusal = {"type": "error", "id": frame["id"], "refused": True}
            await _send(connection, {**refusal, "message": "views this node serves: none"})
            return
        if partition not in self.partitions:
            await _send(connection, {"type": "gone", "id": frame["id"], "reason": "not held"})
            return
        applied = self.applied_of(partition)
        start = (frame.get("from") or {}).get(topic, applied)
        if self.ignore_from:
            start = 0
        keys = None if frame["keys"] is None else set(frame["keys"])
        follow = _Follow(frame["id"], partition, keys, start, frame.get("from") is not None)
        await _send(connection, self._following(follow, start, "following"))
        if frame.get("snapshot"):
            await _send(connection, self._snapshot(follow, applied))
            follow.sent = applied
        self._follows[connection][follow.ident] = follow
        await self._push(connection, follow)
        if frame.get("heartbeat"):
            beat = asyncio.get_running_loop().create_task(self._beat(connection, follow))
            self._beats.add(beat)
            beat.add_done_callback(self._beats.discard)

    async def _beat(self, connection: ServerConnection, follow: _Follow) -> None:
        while follow.ident in self._follows.get(connection, {}):
            frame = {**self._following(follow, follow.sent, "progress"), "leased": True}
            try:
                await _send(connection, frame)
            except Exception:
                return  # the connection is gone
            await asyncio.sleep(self.HEARTBEAT_S)

    def _following(self, follow: _Follow, start: int, kind: str) -> dict[str, Any]:
        topic = self.log.view.changelog_topic
        applied = self.applied_of(follow.partition)
        return {
            "type": kind,
            "id": follow.ident,
            "partition": follow.partition,
            "role": self.role,
            "state": "RUNNING",
            "from": {topic: start},
            "applied": {topic: applied},
            "end": {topic: len(self.log.of(follow.partition))},
        }

    def _snapshot(self, follow: _Follow, applied: int) -> dict[str, Any]:
        """Per asked key the newest row of each of its entries (a count's row, each window),
        or one null row for a key without any."""
        entries: dict[tuple[str, tuple[int, ...]], Change] = {}
        for change in self.log.of(follow.partition)[:applied]:
            if follow.keys is not None and change.key in follow.keys:
                entries[(change.key, change.at)] = change
        changes = [
            Change(self.log.view.name, key, applied, c.row, at, True)
            for (key, at), c in sorted(entries.items())
            if c.row is not None
        ]
        held = {c.key for c in changes}
        changes += [
            Change(self.log.view.name, key, applied, None, (), True)
            for key in sorted(follow.keys or ())
            if key not in held
        ]
        topic = self.log.view.changelog_topic
        return {
            "type": "changes",
            "id": follow.ident,
            "changes": [c.to_json() for c in changes],
            "applied": {topic: applied},
        }

    async def _push(self, connection: ServerConnection, follow: _Follow) -> None:
        applied = self.applied_of(follow.partition)
        if follow.sent >= applied:
            return
        if follow.replaying and self.replay_step is not None:
            applied = min(applied, follow.sent + self.replay_step)
        changes = [
            c.to_json()
            for c in self.log.of(follow.partition)[follow.sent : applied]
            if follow.keys is None or c.key in follow.keys
        ]
        follow.sent = applied
        topic = self.log.view.changelog_topic
        frame = {"type": "changes", "id": follow.ident, "changes": changes}
        await _send(connection, {**frame, "applied": {topic: applied}})

    async def publish(self) -> None:
        """Send every follow what this copy applied since its last frame."""
        for connection, follows in list(self._follows.items()):
            for follow in list(follows.values()):
                with contextlib.suppress(Exception):
                    await self._push(connection, follow)

    async def gone(self, partition: int) -> None:
        """Drop `partition`: its follows get `gone`."""
        self.partitions.discard(partition)
        for connection, follows in list(self._follows.items()):
            for ident, follow in list(follows.items()):
                if follow.partition == partition:
                    follows.pop(ident)
                    await _send(connection, {"type": "gone", "id": ident, "reason": "detached"})

    async def progress(self, role: str) -> None:
        """Change this copy's role; follows get `progress`."""
        self.role = role
        for connection, follows in list(self._follows.items()):
            for follow in list(follows.values()):
                await _send(connection, self._following(follow, follow.sent, "progress"))

    def follows_open(self) -> int:
        return sum(len(f) for f in self._follows.values())


def _header(headers: Headers, name: bytes) -> bytes | None:
    value = headers.get(name.decode())
    return None if value is None else value.encode()


async def _send(connection: ServerConnection, frame: dict[str, Any]) -> None:
    with contextlib.suppress(Exception):
        await connection.send(orjson.dumps(frame).decode())


async def wait_for(condition: Any, timeout_s: float, what: str) -> None:
    """Poll `condition` on the event loop until it is true, or fail naming `what`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
