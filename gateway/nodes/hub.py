"""The feed hub: the gateway's follows of the nodes' change feeds (`schema.feed`), one
WebSocket per node (`gateway.nodes.links`), for the subscriptions to read from.

`hub.follow(view, partition, keys, after, snapshot, max_lag)` is a stream of one
partition's changes of a view. The hub picks the copy to follow: the RUNNING ACTIVE owner
of the routing table, else a STANDBY copy at most `max_lag` records behind. On `gone`, a
lost connection, or an owner change in the routing table it follows again on the new copy
FROM THE OFFSETS THE STREAM HAS REACHED (no snapshot), and drops any change below them:
each changelog offset reaches the stream once, across any number of failovers. A node
that refuses the follow itself (an `error` frame with `refused`: a view it does not serve)
ends the stream with a NodeProtocolError instead, as following again would get the same
answer. A reader that falls behind by more than `STREAM_BATCHES` batches makes the
stream stop following and follow again from its offsets once the reader has caught up (the
node replays from the changelog), so a slow subscriber costs no unbounded memory.

```
FeedClosedError     the hub stopped (gateway shutdown): the stream ends
NodeProtocolError   a node refused the follow (gateway.model.errors): the stream ends
```
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.cluster.routing import NodeInfo, RoutingFeed, RoutingTable
from gateway.nodes.links import FeedLink, LinkError
from gateway.nodes.reply import refused_follow
from runtime.tasks import cancelled
from runtime.trust import NodeCallSigner
from schema import NodeState, View
from schema.feed import Change, FeedFrameError, offsets_of

__all__ = ["STREAM_BATCHES", "FeedBatch", "FeedClosedError", "FeedHub", "FeedStream", "KeyWatch"]

log = logging.getLogger(__name__)

STREAM_BATCHES = 256  # batches a stream holds for a slow reader before it stops following
_ROUTING: dict[str, Any] = {"type": "routing"}  # the routing table changed
_RETRY_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)  # waits before following a failed copy again


class FeedClosedError(Exception):
    """The feed hub stopped: no more changes will come."""


@dataclass(frozen=True)
class FeedBatch:
    """Changes of one partition that reached a stream, in offset order (snapshot changes
    first, once), and where the followed copy stood after them."""

    changes: tuple[Change, ...]
    applied: int  # the next offset of the view's changelog the stream has reached
    freshness: Mapping[str, Any]  # partition, node, role, appliedOffset, lag
    snapshot: bool = False
    start: int = 0  # from this offset on, this batch and the stream's next hold every change


@dataclass
class _Copy:
    """What the followed copy said of itself."""

    node: str
    role: str = "ACTIVE"
    state: str = "RUNNING"
    applied: int | None = None
    end: int | None = None


@dataclass
class _Followed:
    link: FeedLink
    ident: int
    frames: asyncio.Queue[Mapping[str, Any]]
    copy: _Copy


class FeedStream:
    """One partition's changes of one view (of `keys`, or all), as `FeedBatch`es."""

    def __init__(
        self,
        hub: FeedHub,
        view: View,
        partition: int,
        keys: Sequence[str] | None,
        after: int | None,
        snapshot: bool,
        max_lag: int,
        batches: int = STREAM_BATCHES,
    ) -> None:
        self.view = view
        self.partition = partition
        self._hub = hub
        self._topic = view.changelog_topic
        self._keys = None if keys is None else list(keys)
        self.reached: int | None = after  # next offset of the changelog this stream has had
        self._snapshot = snapshot and keys is not None and after is None
        self._max_lag = max_lag
        self._out: asyncio.Queue[FeedBatch | BaseException] = asyncio.Queue(batches)
        self._drained = asyncio.Event()
        # node id -> the heartbeat of its record when its follow failed: the node is avoided
        # until it publishes a newer record (a standby let go to become the owner, a node
        # restarted), never for as long as tables keep arriving
        self._avoid: dict[str, int] = {}
        self._followed: _Followed | None = None
        self._task: asyncio.Task[None] | None = None
        self.freshness: dict[str, Any] = {"partition": partition}
        self.following = asyncio.Event()  # set once a copy started the follow

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._guarded())

    async def stop(self) -> None:
        try:
            if self._task is not None:
                await cancelled([self._task], "the feed hub")
        finally:  # also when the caller is cancelled meanwhile: the node stops sending
            await self._leave()

    @property
    def held(self) -> int:
        """Batches waiting for the reader."""
        return self._out.qsize()

    def __aiter__(self) -> FeedStream:
        return self

    async def __anext__(self) -> FeedBatch:
        if self._out.empty():
            self._drained.set()
        item = await self._out.get()
        if isinstance(item, BaseException):
            self._out.put_nowait(item)  # the stream stays ended
            raise item
        return item

    def note(self, frame: Mapping[str, Any]) -> None:
        """A hub event (routing change, shutdown) for the follow in progress."""
        followed = self._followed
        if followed is not None:
            followed.frames.put_nowait(frame)

    def end(self, error: BaseException) -> None:
        """End the stream: its reader gets `error` next."""
        while self._out.full():
            self._out.get_nowait()
        self._out.put_nowait(error)
        if self._task is not None:
            self._task.cancel()

    # -- following --------------------------------------------------------------------

    async def _guarded(self) -> None:
        try:
            await self._run()
        except Exception as exc:  # a bug: the reader must not wait forever
            log.exception("view %s partition %d: following failed", self.view.name, self.partition)
            self.end(exc)

    async def _run(self) -> None:
        attempt = 0
        unreachable = False  # said since the last follow began: the retries go to debug
        while True:
            node = await self._choose(attempt)
            try:
                await self._follow(node)
            except LinkError as exc:
                level = logging.DEBUG if unreachable else logging.INFO
                log.log(level, "view %s partition %d: %s", self.view.name, self.partition, exc)
                unreachable = True
                self._shun(node)
                attempt += 1
                continue
            unreachable = False
            moved = await self._pump()
            await self._leave()
            if moved == "refused":
                self.end(refused_follow(self.view.name, self.partition, node.node_id))
                return
            if moved == "overflow":
                await self._caught_up()
            elif moved in ("lost", "gone", "error"):
                self._shun(node)
                attempt += 1
            else:
                attempt = 0

    async def _caught_up(self) -> None:
        """Wait until the reader has taken every batch held. Judged by the queue, not by a
        cleared `_drained`: a reader that never pauses may have emptied it (and said so)
        while the unfollow was being sent."""
        while not self._out.empty():
            self._drained.clear()
            await self._drained.wait()

    async def _choose(self, attempt: int) -> NodeInfo:
        """The copy to follow; waits for the routing table to offer one."""
        feed = self._hub.routing
        if attempt:
            await feed.newer_within(feed.current.version, _RETRY_S[min(attempt, 5) - 1])
        while True:
            table = feed.current
            node = self._preferred(table)
            if node is not None:
                return node
            if not await feed.newer_within(table.version, _RETRY_S[-1]):
                self._avoid.clear()  # nothing new: copies that failed may be back

    def _shun(self, node: NodeInfo) -> None:
        """Avoid `node` until it publishes a record newer than the one its follow used."""
        newest = self._hub.routing.current.nodes.get(node.node_id, node)
        self._avoid[node.node_id] = max(node.heartbeat_ms, newest.heartbeat_ms)

    def _avoided(self, table: RoutingTable) -> set[str]:
        """The avoided nodes that have published nothing newer since."""
        return {
            node_id
            for node_id, heartbeat_ms in self._avoid.items()
            if node_id not in table.nodes or table.nodes[node_id].heartbeat_ms <= heartbeat_ms
        }

    def _preferred(self, table: RoutingTable) -> NodeInfo | None:
        owner = self._running_owner(table)
        if owner is not None:
            return owner
        return table.standby(self.partition, self._max_lag, avoid=self._avoided(table))

    def _running_owner(self, table: RoutingTable) -> NodeInfo | None:
        owner = table.owner(self.partition)
        if (
            owner is not None
            and owner.state is NodeState.RUNNING
            and not owner.restoring(self.partition)
            and owner.node_id not in self._avoided(table)
        ):
            return owner
        return None

    async def _follow(self, node: NodeInfo) -> None:
        link = self._hub.link(node)
        snapshot = self._snapshot
        frame = {
            "partition": self.partition,
            "views": [self.view.name],
            "keys": self._keys,
            "from": None if self.reached is None or snapshot else {self._topic: self.reached},
            "snapshot": snapshot,
        }
        ident, frames = await link.follow(frame)
        self._followed = _Followed(link, ident, frames, _Copy(node.node_id))

    async def _leave(self) -> None:
        followed, self._followed = self._followed, None
        if followed is not None:
            await followed.link.unfollow(followed.ident)

    async def _pump(self) -> str:
        """Hand the follow's changes on until it ends; why it ended."""
        followed = self._followed
        assert followed is not None
        while True:
            frame = await followed.frames.get()
            kind = frame.get("type")
            try:
                if kind == "following" or kind == "progress":
                    self._copy_said(followed.copy, frame)
                    if self._better_copy(followed.copy):
                        return "moved"
                elif kind == "changes":
                    if not self._changes(followed.copy, frame):
                        return "overflow"
                elif kind == "routing":
                    if self._better_copy(followed.copy):
                        return "moved"
                elif kind == "error" and frame.get("refused") is True:
                    log.warning("node %s refused a follow: %s", followed.copy.node, frame)
                    return "refused"
                elif kind in ("lost", "gone", "error"):
                    if kind != "lost":
                        log.info("node %s on its feed: %s", followed.copy.node, frame)
                    return str(kind)
            except FeedFrameError as exc:
                log.warning("node %s sent a bad feed frame: %s", followed.copy.node, exc)
                return "error"

    def _copy_said(self, copy: _Copy, frame: Mapping[str, Any]) -> None:
        copy.role = str(frame.get("role", copy.role))
        copy.state = str(frame.get("state", copy.state))
        if "applied" in frame:
            copy.applied = offsets_of(frame["applied"], "applied").get(self._topic, copy.applied)
        if "end" in frame:
            copy.end = offsets_of(frame["end"], "end").get(self._topic, copy.end)
        if frame.get("type") == "following":
            self.following.set()
        if frame.get("type") == "following" and self.reached is None and not self._snapshot:
            start = offsets_of(frame.get("from") or {}, "from").get(self._topic)
            self.reached = start if start is not None else copy.applied
        if frame.get("type") == "progress" and self.reached is not None:
            # the follow's cursor: every change below it came before this frame
            passed = offsets_of(frame.get("applied") or {}, "applied").get(self._topic)
            self.reached = max(self.reached, passed if passed is not None else 0)
        self._freshen(copy)

    def _freshen(self, copy: _Copy) -> None:
        lag = None
        if copy.applied is not None and copy.end is not None:
            lag = max(0, copy.end - copy.applied)
        self.freshness = {
            "partition": self.partition,
            "node": copy.node,
            "role": copy.role,
            "appliedOffset": copy.applied,
            "lag": lag,
        }

    def _better_copy(self, copy: _Copy) -> bool:
        """Whether the routing table now says to follow another copy than `copy`: a RUNNING
        owner elsewhere, or (with none) a standby when `copy` is no longer offered at all.
        A standby is not left for a less lagging one, so follows do not flap."""
        table = self._hub.routing.current
        owner = self._running_owner(table)
        if owner is not None:
            return owner.node_id != copy.node
        if table.standby(self.partition, self._max_lag, avoid=self._avoided(table)) is None:
            return False  # nothing better to go to
        claimed = any(n.node_id == copy.node for n in table.claims.get(self.partition, ()))
        standing = any(
            n.node_id == copy.node and lag <= self._max_lag
            for n, lag in table.standbys.get(self.partition, ())
        )
        return not (claimed or standing)

    def _changes(self, copy: _Copy, frame: Mapping[str, Any]) -> bool:
        """Queue the changes of `frame` the stream has not had; False when the reader is too
        far behind to take them (the follow must stop)."""
        raw = frame.get("changes")
        if not isinstance(raw, list):
            raise FeedFrameError("changes must be a list")
        changes = [Change.from_json(doc) for doc in raw]
        applied = offsets_of(frame.get("applied") or {}, "applied").get(self._topic)
        # snapshot rows come once, first, as of their offset (the applied offset they were
        # read at); a snapshot not asked for now (an old follow's) brings nothing new
        snapshot = [c for c in changes if c.snapshot] if self._snapshot else []
        floor = self.reached if self.reached is not None else 0
        if snapshot:
            floor = snapshot[0].offset
        kept = snapshot + [c for c in changes if not c.snapshot and c.offset >= floor]
        ends = [floor] + [c.offset + 1 for c in kept if not c.snapshot]
        reached = max(ends + ([applied] if applied is not None else []))
        if applied is not None:
            copy.applied = max(applied, copy.applied or 0)
        self._freshen(copy)
        if kept:
            if self._out.full():
                return False
            batch = FeedBatch(tuple(kept), reached, self.freshness, bool(snapshot), floor)
            self._out.put_nowait(batch)
        self.reached = reached
        if snapshot:
            self._snapshot = False
        return True


class KeyWatch:
    """A key subscription's share of a partition's shared follow (`FeedHub.watch_keys`): the
    changes of its `keys` from each batch, and, while `eager`, every batch (with none of its
    changes maybe: each says from which offset the follow holds every change)."""

    def __init__(
        self,
        keys: Sequence[str],
        on_batch: Callable[[FeedBatch | Exception], None],
        eager: set[KeyWatch],
    ):
        self.keys = tuple(dict.fromkeys(keys))
        self.on_batch = on_batch
        self._eager = eager  # the shared follow's eager watches, this one among them

    def settle(self) -> None:
        """From now on only batches with changes of its keys."""
        self._eager.discard(self)


class _Watched:
    """One follow shared by watchers (`FeedHub.watch`, `FeedHub.watch_keys`): each batch goes
    to each watcher of every change, and the changes of each key to its key watchers."""

    def __init__(self) -> None:
        self.watchers: list[Callable[[FeedBatch | Exception], None]] = []
        self.by_key: dict[str, list[KeyWatch]] = {}
        self.key_watches: list[KeyWatch] = []
        self.eager: set[KeyWatch] = set()
        self.stream: asyncio.Future[FeedStream] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None

    @property
    def unwatched(self) -> bool:
        return not self.watchers and not self.key_watches

    def add(
        self, keys: Sequence[str], on_batch: Callable[[FeedBatch | Exception], None]
    ) -> KeyWatch:
        watch = KeyWatch(keys, on_batch, self.eager)
        self.eager.add(watch)
        self.key_watches.append(watch)
        for key in watch.keys:
            self.by_key.setdefault(key, []).append(watch)
        return watch

    def remove(self, watch: KeyWatch) -> None:
        watch.settle()
        self.key_watches.remove(watch)
        for key in watch.keys:
            watches = self.by_key[key]
            watches.remove(watch)
            if not watches:
                del self.by_key[key]

    async def run(self, follow: contextlib.AbstractAsyncContextManager[FeedStream]) -> None:
        try:
            async with follow as stream:
                self.stream.set_result(stream)
                async for batch in stream:
                    for watcher in list(self.watchers):
                        _call(watcher, batch)
                    if self.key_watches:
                        self._split(batch)
        except Exception as exc:  # the watchers learn it; a new watch follows anew
            if not self.stream.done():
                self.stream.set_exception(exc)
                self.stream.exception()  # key watches do not await it: no "never retrieved"
            for watcher in list(self.watchers):
                _call(watcher, exc)
            for watch in list(self.key_watches):
                _call(watch.on_batch, exc)

    def _split(self, batch: FeedBatch) -> None:
        """Hand each key watcher the changes of its keys (and each eager one the batch)."""
        found: dict[KeyWatch, list[Change]] = {watch: [] for watch in self.eager}
        for change in batch.changes:
            for watch in self.by_key.get(change.key, ()):
                found.setdefault(watch, []).append(change)
        for watch, changes in found.items():
            mine = FeedBatch(tuple(changes), batch.applied, batch.freshness, start=batch.start)
            _call(watch.on_batch, mine)

    async def stop(self) -> None:
        if self.task is not None:
            await cancelled([self.task], "the feed hub")


def _call(watcher: Callable[[FeedBatch | Exception], None], item: FeedBatch | Exception) -> None:
    """Hand `item` (a batch, or the error that ended the follow) to one watcher of a shared
    follow: its failure is its own."""
    try:
        watcher(item)
    except Exception:  # a bug in one watcher must not end the follow of the others
        log.exception("a watcher of a shared feed follow failed")


class FeedHub:
    """The gateway's follows of the nodes' feeds, over one link per node; lives on the
        event loop from `start` to `stop`. `max_lag` is the default bound of standby copies;
    `ca` verifies wss node URLs; a stream holds `stream_batches` for a slow reader."""

    def __init__(
        self,
        routing: RoutingFeed,
        signer: NodeCallSigner,
        max_lag: int,
        ca: Path | None = None,
        stream_batches: int = STREAM_BATCHES,
    ) -> None:
        self.routing = routing
        self.max_lag = max_lag
        self._stream_batches = stream_batches
        self._signer = signer
        self._ca = ca
        self._links: dict[tuple[str, str, str], FeedLink] = {}  # (node id, URL, incarnation)
        self._streams: set[FeedStream] = set()
        self._watched: dict[tuple[str, int, int], _Watched] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()  # pruned links closing meanwhile
        self._stopped = False

    async def start(self) -> None:
        # from the table current now: a change published before the task runs is told too
        version = self.routing.current.version
        self._watcher = asyncio.get_running_loop().create_task(self._watch(version))

    async def stop(self) -> None:
        """End every stream and close the links."""
        self._stopped = True
        if self._watcher is not None:
            await cancelled([self._watcher], "the feed hub")
        for stream in list(self._streams):
            stream.end(FeedClosedError("the gateway is shutting down: resume with your token"))
        links, self._links = self._links, {}
        for link in links.values():
            await link.close()
        for closing in list(self._closing):  # a node that never answers the close
            closing.cancel()
        await asyncio.gather(*self._closing, return_exceptions=True)

    def link(self, node: NodeInfo) -> FeedLink:
        """The link to `node`'s feed (made on first use; a node at a new URL, or restarted,
        gets a new one: its handshake names the node process)."""
        key = _link_key(node)
        found = self._links.get(key)
        if found is None:
            found = self._links[key] = FeedLink(
                node.node_id, node.url, self._signer, self._ca, node.incarnation
            )
        return found

    @contextlib.asynccontextmanager
    async def follow(
        self,
        view: View,
        partition: int,
        keys: Sequence[str] | None = None,
        after: int | None = None,
        snapshot: bool = False,
        max_lag: int | None = None,
        batches: int | None = None,
    ) -> AsyncIterator[FeedStream]:
        """A stream of `partition`'s changes of `view` (of `keys` only, when given) from
        changelog offset `after` (None: from now; with `snapshot` and keys, first the keys'
        current rows), followed on the best copy within `max_lag` (None: the hub's), holding
        up to `batches` for its reader (None: the hub's)."""
        if self._stopped:
            raise FeedClosedError("the gateway is shutting down")
        lag = self.max_lag if max_lag is None else max_lag
        held = self._stream_batches if batches is None else batches
        stream = FeedStream(self, view, partition, keys, after, snapshot, lag, held)
        self._streams.add(stream)
        stream.start()
        try:
            yield stream
        finally:
            self._streams.discard(stream)
            await stream.stop()

    @contextlib.asynccontextmanager
    async def watch(
        self,
        view: View,
        partition: int,
        max_lag: int | None,
        on_batch: Callable[[FeedBatch | Exception], None],
    ) -> AsyncIterator[FeedStream]:
        """Call `on_batch` with every change of `partition` of `view` from now (or with the
        error that ended the stream), from one follow shared by every watcher of the same
        view, partition and maxLag (top-N subscriptions: a change only tells them to read
        again). The shared stream is yielded for its offsets and freshness."""
        shared, ident = self._shared(view, partition, max_lag)
        shared.watchers.append(on_batch)
        try:
            yield await shared.stream
        finally:
            shared.watchers.remove(on_batch)
            await self._unwatched(shared, ident)

    @contextlib.asynccontextmanager
    async def watch_keys(
        self,
        view: View,
        partition: int,
        max_lag: int | None,
        keys: Sequence[str],
        on_batch: Callable[[FeedBatch | Exception], None],
    ) -> AsyncIterator[KeyWatch]:
        """Call `on_batch` with the changes of `keys` in each batch of `partition` of `view`
        from now (and with every batch while the watch is eager), from the follow `watch`
        shares: key subscriptions cost the node one follow per partition, not one each."""
        shared, ident = self._shared(view, partition, max_lag)
        watch = shared.add(keys, on_batch)
        try:
            yield watch
        finally:
            shared.remove(watch)
            await self._unwatched(shared, ident)

    def _shared(
        self, view: View, partition: int, max_lag: int | None
    ) -> tuple[_Watched, tuple[str, int, int]]:
        """The shared follow of `partition` of `view` within `max_lag`, started if need be."""
        lag = self.max_lag if max_lag is None else max_lag
        ident = (view.name, partition, lag)
        shared = self._watched.get(ident)
        if shared is None or (shared.task is not None and shared.task.done()):
            shared = self._watched[ident] = _Watched()
            shared.task = asyncio.get_running_loop().create_task(  # shared: no one's trace
                shared.run(self.follow(view, partition, max_lag=lag)), context=contextvars.Context()
            )
        return shared, ident

    async def _unwatched(self, shared: _Watched, ident: tuple[str, int, int]) -> None:
        if shared.unwatched and self._watched.get(ident) is shared:
            del self._watched[ident]
            await shared.stop()

    def streams(self) -> tuple[FeedStream, ...]:
        """The streams open now."""
        return tuple(self._streams)

    async def _watch(self, version: int) -> None:
        """Tell every stream of each routing change after `version`, and close the links it
        leaves idle; a failure is logged and the next change told all the same."""
        while True:
            table = await self.routing.newer(version)
            version = table.version
            try:
                for stream in list(self._streams):
                    stream.note(_ROUTING)
                self._prune(table)
            except Exception:  # a bug: the streams must still hear of the changes to come
                log.exception("routing table %d: telling the feed streams failed", version)

    def _prune(self, table: RoutingTable) -> None:
        """Close the idle links of nodes the table no longer names (or names elsewhere, or
        as another process), each in a task of its own: a node that does not answer the
        close (up to its timeout) holds back no routing change."""
        for key, link in list(self._links.items()):
            node = table.nodes.get(key[0])
            if link.idle and (node is None or _link_key(node) != key or not node.alive):
                del self._links[key]
                closing = asyncio.get_running_loop().create_task(link.close())
                self._closing.add(closing)
                closing.add_done_callback(self._closed)

    def _closed(self, closing: asyncio.Task[None]) -> None:
        self._closing.discard(closing)
        if not closing.cancelled() and closing.exception() is not None:
            log.warning("closing a feed link failed: %s", closing.exception())


def _link_key(node: NodeInfo) -> tuple[str, str, str]:
    """What a feed link is made for: the node, where it serves, and which process of it."""
    return node.node_id, node.url, node.incarnation
