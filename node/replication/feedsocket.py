"""The `/feed` WebSocket: the gateway's follows of this node's partitions (schema.feed).

The handshake must offer subprotocol `statefed-feed.v1` and, with the cluster secret, be
signed like a node call (node.replication.trust): a refused one gets the HTTP status and error body
(401 unsigned, 503 starting, 400 without the subprotocol) where the server can send one,
else close code 4401 / 4503 / 4400. Each follow then runs as its own task: it reads the
partition's ring (node.changelog.feed) from its cursor, replays from Kafka what the ring no longer
holds (node.replication.feedreplay) and waits for the next publish; while it runs, the replicators
keep the changes of its partition (`ChangeFeed.followed`). A follow never buffers: it reads
what it sends when it can send it, so a slow connection only falls behind into a replay.
Every `PROGRESS_INTERVAL_S` at most, a follow whose copy's role, state or end offsets
changed, or whose cursor moved without a change to send, gets a `progress` frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import orjson

from node.changelog.feed import ChangeFeed
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import ReplayError
from node.replication.feedreplay import Replay
from node.replication.feedsnapshot import (
    SnapshotTooLarge,
    has_snapshot,
    has_whole_snapshot,
    snapshot_changes,
)
from node.replication.trust import CallGuard
from node.storage.store import PartitionStore
from runtime.clock import Clock
from runtime.graphql_http import Receive, RequestError, Scope, Send
from schema import Role, View
from schema.feed import FEED_SUBPROTOCOL, FeedFrameError, offsets_of

__all__ = ["PROGRESS_INTERVAL_S", "FeedEndpoint"]

log = logging.getLogger(__name__)

# a progress frame at most this often; every time for a follow that asked for heartbeats
PROGRESS_INTERVAL_S = 0.5
# at most this many changes or about this many bytes of them in one frame
_FRAME_CHANGES = 500
_FRAME_BYTES = 256 << 10
# a snapshot of every key comes in frames of at most this many rows, all but the last with
# "more": each is parsed in a few ms on the gateway's loop, not the whole partition at once
SNAPSHOT_FRAME_ROWS = 5_000
_CLOSE_CODES = {400: 4400, 401: 4401, 503: 4503}
_READABLE = (Role.ACTIVE, Role.STANDBY)


@dataclass(frozen=True)
class _Follow:
    """One checked `follow` frame."""

    id: int
    partition: int
    views: tuple[View, ...]
    keys: frozenset[str] | None
    wanted: dict[str, int | None]  # per changelog topic: the first offset, None = now
    snapshot: bool
    heartbeat: bool = False  # a progress frame every interval, changed or not
    limit: int = 0  # the rows a snapshot of every key (keys None) may hold


def _int(doc: dict[str, object], name: str) -> int:
    value = doc.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FeedFrameError(f"a follow's {name} must be an int >= 0, not {value!r:.100}")
    return value


class FeedEndpoint:
    """The ASGI handler of `/feed` WebSocket connections."""

    def __init__(
        self,
        feed: ChangeFeed,
        registry: PartitionRegistry,
        config: NodeConfig,
        catalogue: Iterable[View],
        guard: CallGuard,
        clock: Clock,
    ):
        self.feed = feed
        self.registry = registry
        self.config = config
        self.views = {view.name: view for view in catalogue}
        self.guard = guard
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        try:
            self.guard.admit_handshake(scope)
            if FEED_SUBPROTOCOL not in scope.get("subprotocols", ()):
                raise RequestError(
                    f"the change feed speaks WebSocket subprotocol {FEED_SUBPROTOCOL}: offer it "
                    "in Sec-WebSocket-Protocol"
                )
        except RequestError as exc:
            await _refuse(scope, send, exc)
            return
        await send({"type": "websocket.accept", "subprotocol": FEED_SUBPROTOCOL})
        await _Connection(self, send).run(receive)

    def parse_follow(self, doc: dict[str, object]) -> _Follow:
        """The follow `doc` asks for; FeedFrameError naming what is wrong with it."""
        follow_id, partition = _int(doc, "id"), _int(doc, "partition")
        names = doc.get("views")
        if not isinstance(names, list) or not names or not all(n in self.views for n in names):
            raise FeedFrameError(
                f"a follow's views must be a non-empty list of views this node serves "
                f"({', '.join(sorted(self.views))}), not {names!r:.200}"
            )
        views = tuple(self.views[name] for name in dict.fromkeys(names))
        keys = doc.get("keys")
        if keys is not None and (
            not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
        ):
            raise FeedFrameError(
                f"a follow's keys must be a list of strings or null, not {keys!r:.200}"
            )
        wanted: dict[str, int | None] = {view.changelog_topic: None for view in views}
        start = doc.get("from")
        if start is not None:
            for topic, offset in offsets_of(start, "a follow's from").items():
                if topic not in wanted:
                    raise FeedFrameError(f"a follow's from names {topic}, not a topic of its views")
                wanted[topic] = offset
        snapshot = doc.get("snapshot", False)
        if not isinstance(snapshot, bool):
            raise FeedFrameError("a follow's snapshot must be a boolean")
        limit = doc.get("limit")
        if snapshot:
            self._check_snapshot(views, keys, start, limit)
        heartbeat = doc.get("heartbeat", False)
        if not isinstance(heartbeat, bool):
            raise FeedFrameError("a follow's heartbeat must be a boolean")
        chosen = None if keys is None else frozenset(keys)
        rows = _int(doc, "limit") if snapshot and keys is None else 0
        return _Follow(follow_id, partition, views, chosen, wanted, snapshot, heartbeat, rows)

    @staticmethod
    def _check_snapshot(
        views: tuple[View, ...], keys: object, start: object, limit: object
    ) -> None:
        if start is not None:
            raise FeedFrameError("a snapshot follow has no from: it continues from the snapshot")
        if keys is None and limit is None:
            raise FeedFrameError(
                "a snapshot follow of every key (keys null) names its limit: the most rows it takes"
            )
        whole = keys is None
        for view in views:
            if not (has_whole_snapshot(view) if whole else has_snapshot(view)):
                what = "a row per key to snapshot whole" if whole else "a current row to snapshot"
                raise FeedFrameError(
                    f"view {view.name} ({view.kind.value}) has no {what}: follow it from offsets"
                )


async def _refuse(scope: Scope, send: Send, exc: RequestError) -> None:
    """Refuse a handshake: an HTTP answer where the server can send one, else a close code."""
    if "websocket.http.response" in (scope.get("extensions") or {}):
        body = orjson.dumps(exc.body())
        headers = [(b"content-type", b"application/json"), *exc.headers]
        start = {"type": "websocket.http.response.start", "status": exc.status, "headers": headers}
        await send(start)
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": _CLOSE_CODES.get(exc.status, 4400)})


class _Closed(Exception):
    """The connection is gone: nothing more can be sent."""


class _Connection:
    """One gateway connection: its follows, each a task, and one sender at a time."""

    def __init__(self, endpoint: FeedEndpoint, send: Send):
        self.endpoint = endpoint
        self._send = send
        self._sending = asyncio.Lock()
        self.tasks: dict[int, asyncio.Task[None]] = {}

    async def run(self, receive: Receive) -> None:
        try:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message["type"] == "websocket.receive":
                    text = message.get("text")
                    if text is None:
                        text = (message.get("bytes") or b"").decode("utf-8", errors="replace")
                    await self._handle(text)
        except _Closed:
            return
        finally:
            tasks = list(self.tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def send_text(self, text: str) -> None:
        async with self._sending:
            try:
                await self._send({"type": "websocket.send", "text": text})
            except Exception as exc:  # the client went: uvicorn raises on a closed socket
                raise _Closed from exc

    async def send_doc(self, doc: dict[str, object]) -> None:
        await self.send_text(orjson.dumps(doc).decode())

    async def _handle(self, text: str) -> None:
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            await self.send_doc({"type": "error", "id": None, "message": "a frame is JSON text"})
            return
        kind = doc.get("type") if isinstance(doc, dict) else None
        if kind == "follow":
            await self._start(doc)
        elif kind == "unfollow":
            await self._stop(doc.get("id"))
        else:
            message = f"unknown frame type {kind!r:.100}: follow or unfollow"
            await self.send_doc({"type": "error", "id": None, "message": message})

    async def _stop(self, follow_id: object) -> None:
        """End the follow an `unfollow` names (one that ended already: nothing to do); an
        id no follow can have is refused, the connection goes on."""
        if not isinstance(follow_id, int) or isinstance(follow_id, bool):
            message = f"an unfollow's id must be the int id of a follow, not {follow_id!r:.100}"
            await self.send_doc({"type": "error", "id": None, "message": message})
            return
        task = self.tasks.get(follow_id)
        if task is not None:
            task.cancel()

    async def _start(self, doc: dict[str, object]) -> None:
        frame_id = doc.get("id")
        try:
            follow = self.endpoint.parse_follow(doc)
        except FeedFrameError as exc:  # no copy of this node would take it: `refused`
            await self.send_doc(
                {"type": "error", "id": frame_id, "message": str(exc), "refused": True}
            )
            return
        if follow.id in self.tasks:
            message = f"follow {follow.id} is running: unfollow it first or take another id"
            await self.send_doc({"type": "error", "id": follow.id, "message": message})
            return
        task = asyncio.create_task(self._follow(follow), name=f"feed-follow-{follow.id}")
        self.tasks[follow.id] = task
        task.add_done_callback(lambda done: self._forget(follow.id, done))

    def _forget(self, follow_id: int, task: asyncio.Task[None]) -> None:
        if self.tasks.get(follow_id) is task:
            del self.tasks[follow_id]

    async def _follow(self, follow: _Follow) -> None:
        try:
            try:
                await _FollowRun(self, follow).run()
            except ReplayError as exc:
                await self.send_doc({"type": "error", "id": follow.id, "message": str(exc)})
            except _Closed:
                raise
            except Exception as exc:
                log.exception("feed follow %s of partition %s failed", follow.id, follow.partition)
                message = f"the follow failed: {exc}"
                await self.send_doc({"type": "error", "id": follow.id, "message": message})
        except _Closed:
            pass  # the connection is gone: its other follows end with it


class _FollowRun:
    """One follow: `following`, a snapshot maybe, then changes from ring and replay."""

    def __init__(self, connection: _Connection, follow: _Follow):
        self.connection = connection
        self.endpoint = connection.endpoint
        self.feed = connection.endpoint.feed
        self.follow = follow
        self.topics = {view.changelog_topic: view for view in follow.views}
        self.cursor: dict[str, int] = {}
        self.generation = 0  # of the ring followed
        self.seq = 0
        self._sent_status: tuple[object, ...] | None = None
        self._sent_cursor: dict[str, int] = {}
        self._progress_at = 0.0

    async def run(self) -> None:
        # counted before the first read: the replicators keep every change from then on
        with self.feed.followed(self.follow.partition, self.follow.keys) as changed:
            if await self._begin():
                await self._go_on(changed)

    async def _go_on(self, changed: asyncio.Event) -> None:
        """Send changes from the ring, and replays, until the copy is gone."""
        follow, partition = self.follow, self.follow.partition
        while True:
            changed.clear()
            read = self.feed.read(
                partition, self.generation, self.seq, self.cursor, follow.keys,
                _FRAME_CHANGES, _FRAME_BYTES,
            )  # fmt: skip
            if read.gone is not None:
                await self._gone(read.gone)
                return
            if read.behind:
                for topic in read.behind:
                    await self._replay(topic)
                continue
            self.seq = read.seq
            if read.entries:
                await self._changes([e.doc for e in read.entries], read.cursor)
            self.cursor = dict(read.cursor)
            await self._progress()
            if not read.more:
                await _woken(changed, self._progress_at + PROGRESS_INTERVAL_S - time.monotonic())
            elif not read.entries:
                await asyncio.sleep(0)  # a long run of others' changes: let others in

    async def _begin(self) -> bool:
        """Send `following` (and the snapshot); False when the follow cannot start."""
        follow, partition = self.follow, self.follow.partition
        snapshot = None
        try:
            if follow.snapshot:
                snapshot = await self._snapshot()
                if snapshot is None:
                    return await self._unreadable()
            else:
                self.generation, self.cursor, self.seq = self.feed.start(partition, follow.wanted)
            role, restoring, applied, end, version = self.feed.status(partition)
        except KeyError:
            await self._gone(self.feed.gone_reason(partition) or "the node does not hold it")
            return False
        except SnapshotTooLarge as exc:
            return await self._too_large(exc)
        await self.connection.send_doc(
            {"type": "following", "id": follow.id, "partition": partition, "role": role.value,
             "state": _state(restoring), "from": self.cursor,
             "applied": {t: applied.get(t, 0) for t in self.topics},
             "end": {t: n for t, n in end.items() if t in self.topics}}
        )  # fmt: skip
        self._sent_status, self._sent_cursor = (role, restoring, version), dict(self.cursor)
        self._progress_at = time.monotonic()
        if snapshot is not None:
            await self._send_snapshot(snapshot)
        return True

    async def _snapshot(self) -> list[bytes] | None:
        """The snapshot changes' JSON; sets the cursor and seq it continues from. None when
        the copy cannot be read (restoring, or not held here); KeyError when not held. A
        snapshot of every key is read in a worker thread (`PartitionRegistry.read_long`):
        on the event loop, one of 166,667 rows paused every read of the node for 1.2-2 s;
        in a worker, it takes about twice as long and the longest read measured waited 41 ms."""
        follow, partition = self.follow, self.follow.partition
        # the seq before the read: every entry after it may hold a record the read missed
        generation, seq = self.feed.end_seq(partition)
        keys = None if follow.keys is None else sorted(follow.keys)
        views, limit = list(follow.views), follow.limit
        now = self.endpoint.clock()
        registry = self.endpoint.registry

        def reader(store: PartitionStore) -> tuple[list[bytes], dict[str, int]]:
            return snapshot_changes(store, views, keys, now, limit)

        if keys is None:
            read = await asyncio.to_thread(registry.read_long, partition, reader, _READABLE)
        else:
            read = registry.read(partition, reader, _READABLE)
        if read is None:
            return None
        (docs, offsets), _status = read
        self.cursor = {topic: offsets.get(topic, 0) for topic in self.topics}
        self.generation, self.seq = generation, seq
        return docs

    async def _too_large(self, exc: SnapshotTooLarge) -> bool:
        why = f"holds {exc}: a snapshot of every key takes at most {self.follow.limit}"
        return await self._no_snapshot(why, tooLarge=True)

    async def _unreadable(self) -> bool:
        why = "cannot be read now (restoring, or not held): follow a caught-up copy for a snapshot"
        return await self._no_snapshot(why)

    async def _no_snapshot(self, why: str, **extra: bool) -> bool:
        """An `error` frame saying why the follow's snapshot cannot be sent; False."""
        follow = self.follow
        message = f"partition {follow.partition} on node {self.endpoint.config.node_id} {why}"
        await self.connection.send_doc(
            {"type": "error", "id": follow.id, "message": message, **extra}
        )
        return False

    async def _replay(self, topic: str) -> None:
        """Replay `topic` from the cursor up to where the ring holds it."""
        partition, keys = self.follow.partition, self.follow.keys
        replay = Replay(self.endpoint.config, self.topics[topic], partition, self.cursor[topic])
        log.info(
            "node %s: feed follow %d of partition %d replays %s from offset %d",
            self.endpoint.config.node_id, self.follow.id, partition, topic, replay.position,
        )  # fmt: skip
        try:
            while True:
                first = self.feed.first(partition, self.generation, topic)
                if first is None or replay.position >= first:
                    return
                effects = await asyncio.to_thread(replay.read, first)
                wanted = [e for e in effects if keys is None or e.key in keys]
                docs = [e.json() for e in wanted]
                for size in _frame_sizes(docs):  # frames as a ring read cuts them
                    self.cursor[topic] = wanted[size - 1].offset + 1
                    await self._changes(docs[:size], self.cursor)
                    del docs[:size], wanted[:size]
                self.cursor[topic] = replay.position
        finally:
            # in a worker, after any read still running there (a cancelled follow's)
            asyncio.get_running_loop().run_in_executor(None, replay.close)

    async def _send_snapshot(self, docs: list[bytes]) -> None:
        """The snapshot's changes: one frame for a keyed snapshot; for a snapshot of every
        key, frames of at most SNAPSHOT_FRAME_ROWS, each but the last marked `more`."""
        if self.follow.keys is not None or len(docs) <= SNAPSHOT_FRAME_ROWS:
            await self._changes(docs, self.cursor, snapshot=True)
            return
        for start in range(0, len(docs), SNAPSHOT_FRAME_ROWS):
            more = start + SNAPSHOT_FRAME_ROWS < len(docs)
            rows = docs[start : start + SNAPSHOT_FRAME_ROWS]
            await self._changes(rows, self.cursor, snapshot=True, more=more)
            await asyncio.sleep(0)  # a frame at a time: reads go on between them

    async def _changes(
        self,
        docs: list[bytes],
        applied: Mapping[str, int],
        snapshot: bool = False,
        more: bool = False,
    ) -> None:
        head = b'{"type":"changes","id":%d,"changes":[' % self.follow.id
        tail = b'],"applied":' + orjson.dumps(applied)
        if snapshot:
            tail += b',"snapshot":true'
        if more:
            tail += b',"more":true'
        await self.connection.send_text((head + b",".join(docs) + tail + b"}").decode())
        self._sent_cursor = dict(applied)

    async def _gone(self, reason: str) -> None:
        await self.connection.send_doc({"type": "gone", "id": self.follow.id, "reason": reason})

    async def _progress(self) -> None:
        """A progress frame when something changed (every time for a follow that asked for
        heartbeats), at most every PROGRESS_INTERVAL_S. `leased` says whether the node's
        lease holds (node.changelog.lease): a heartbeat sent while it has lapsed vouches for
        nothing."""
        now = time.monotonic()
        if now - self._progress_at < PROGRESS_INTERVAL_S:
            return
        try:
            role, restoring, _applied, end, version = self.feed.status(self.follow.partition)
        except KeyError:
            return  # the next read says it is gone
        status = (role, restoring, version)
        unchanged = status == self._sent_status and self.cursor == self._sent_cursor
        if unchanged and not self.follow.heartbeat:
            return
        self._progress_at = now
        self._sent_status, self._sent_cursor = status, dict(self.cursor)
        leased = self.endpoint.registry.refusal_reason() is None
        await self.connection.send_doc(
            {"type": "progress", "id": self.follow.id, "role": role.value,
             "state": _state(restoring), "applied": dict(self.cursor),
             "end": {t: n for t, n in end.items() if t in self.topics}, "leased": leased}
        )  # fmt: skip


async def _woken(changed: asyncio.Event, due_s: float) -> None:
    """Wait for `changed`, or until a progress frame is due (a full interval when one was
    just due: the status had not changed)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(due_s if due_s > 0 else PROGRESS_INTERVAL_S):
            await changed.wait()


def _frame_sizes(docs: list[bytes]) -> list[int]:
    """How many of `docs` go in each frame, in order: at most _FRAME_CHANGES changes or
    about _FRAME_BYTES bytes of them."""
    sizes, count, size = [], 0, 0
    for doc in docs:
        count, size = count + 1, size + len(doc)
        if count >= _FRAME_CHANGES or size >= _FRAME_BYTES:
            sizes.append(count)
            count, size = 0, 0
    if count:
        sizes.append(count)
    return sizes


def _state(restoring: bool) -> str:
    """A copy's state as the feed names it."""
    return "RESTORING" if restoring else "RUNNING"
