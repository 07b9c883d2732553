"""Coalescing key lookups of different client requests into one node request.

A node request costs the gateway far more CPU than a GraphQL field (httpx's client side
does ~1,000-1,500 requests/s per process), so concurrent lookups of one view that go to
the same node with the same request extensions are sent as one `_entities` body: lookups
arriving in one event-loop turn are collected (a batch is sent early once it holds
`max_keys` keys), and each waiter gets the rows of its own keys and the freshness entries
of its own partitions. The lookup that opens a batch yields that turn to the others; when
none joined it (a quiet gateway: one client request at a time), it asks the node itself,
in its own task, with no shared call to hand its rows over from.

Failures stay per waiter: an unreachable or slow node fails every waiter with an error
naming that waiter's partitions and keys; an answer that may concern only some of the
batched partitions (NOT_OWNER, a protocol error, rejected arguments) is not shared: each
waiter of that batch asks again alone, exactly as it would have without coalescing. Each
waiter waits only until its own deadline, and may be cancelled (a hedged read whose other
copy answered first): the batch goes on for the others, and is cancelled (its connection
closed) only once no waiter is left. A batch names every waiter's caller to the node
(`statefed-caller`: the distinct subjects, comma-separated, see runtime.trust).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from gateway.cluster.routing import NodeInfo
from gateway.model.errors import NodeTimeoutError, NodeUnavailableError
from gateway.model.principal import ANONYMOUS
from gateway.model.rows import Event, Row
from gateway.nodes.documents import with_extensions
from gateway.nodes.reply import NodeReply, for_waiter, past_deadline, read_answer

if TYPE_CHECKING:
    from gateway.nodes.documents import ViewQueries

__all__ = ["Coalescer", "Post"]

log = logging.getLogger(__name__)

# the node refuses more keys per request (node.subgraph.fields.common.MAX_KEYS is 10,000); smaller
# batches also keep one slow batch from holding many client requests
DEFAULT_MAX_KEYS = 1000

Rows = list[Row | Event | None]


class Post(Protocol):
    """`Upstream.post`, which the coalescer wraps: one body to one node under a deadline."""

    def __call__(
        self,
        node: NodeInfo,
        body: bytes,
        *,
        view: str,
        partitions: Sequence[int],
        keys: Sequence[str] = (),
        deadline: float,
        callers: Sequence[str] = (),
    ) -> Awaitable[NodeReply]: ...


@dataclass
class _Waiter:
    partitions: list[int]
    keys: list[str]
    deadline: float
    answer: asyncio.Future[tuple[Rows, list[dict[str, Any]]]]
    caller: str  # the subject of the principal it asks for


@dataclass
class _Batch:
    node: NodeInfo
    queries: ViewQueries
    extensions: bytes  # the request extensions as JSON, b"" for none
    waiters: list[_Waiter] = field(default_factory=list)
    keys: dict[str, None] = field(default_factory=dict)  # in order, without repeats
    task: asyncio.Task[None] | None = None  # once sent

    def forsaken(self, _answer: object = None) -> None:
        """Cancel the call once every waiter has its answer or gave up (a waiter's
        done-callback). Once the call has answered there is nothing to cancel: the
        callbacks of the waiters it settled return at once, instead of each looking at
        every waiter (a batch of 32 looked 1,024 times)."""
        task = self.task
        if task is not None and not task.done() and all(w.answer.done() for w in self.waiters):
            task.cancel()


_BatchKey = tuple[str, str, str, bytes]  # node id, node URL, view, extensions


class Coalescer:
    """Sends the lookups of one event-loop turn to each (node, view, extensions) as one
    request through `post`."""

    def __init__(
        self,
        post: Post,
        max_keys: int = DEFAULT_MAX_KEYS,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        """`on_batch` is told how many lookups each node request carries."""
        if max_keys < 1:
            raise ValueError(f"max_keys must be at least 1, got {max_keys}")
        self._post = post
        self._max_keys = max_keys
        self._on_batch = on_batch
        self._open: dict[_BatchKey, _Batch] = {}
        self._sending: set[asyncio.Task[None]] = set()

    async def lookup(
        self,
        node: NodeInfo,
        queries: ViewQueries,
        partitions: Sequence[int],
        keys: Sequence[str],
        extensions: Mapping[str, Any],
        deadline: float,
        caller: str = ANONYMOUS.subject,
    ) -> tuple[Rows, list[dict[str, Any]]]:
        """The rows of `keys` (in order) from `node`, and the freshness entries of
        `partitions`, asked for `caller`; raises the RoutingError or BadRequestError of this
        lookup."""
        loop = asyncio.get_running_loop()
        encoded = orjson.dumps(extensions, option=orjson.OPT_SORT_KEYS) if extensions else b""
        waiter = _Waiter(list(partitions), list(keys), deadline, loop.create_future(), caller)
        opened = self._enqueue(loop, node, queries, encoded, waiter)
        if opened is not None and await self._alone_in_turn(*opened):
            return await self._ask_alone(opened[1], waiter)
        # at its deadline only this waiter's future fails: the batch goes on for the others
        # (a timer, not asyncio.timeout_at, as the transport's deadlines: the context manager
        # took about 2% more of the gateway's CPU on uniform point lookups)
        expiry = loop.call_at(deadline, _expire, waiter.answer)
        try:
            return await waiter.answer
        except TimeoutError as exc:
            where = {"partitions": partitions, "node": node.node_id, "keys": keys}
            raise past_deadline(queries.view.name, where) from exc
        finally:
            expiry.cancel()

    def _enqueue(
        self,
        loop: asyncio.AbstractEventLoop,
        node: NodeInfo,
        queries: ViewQueries,
        extensions: bytes,
        waiter: _Waiter,
    ) -> tuple[_BatchKey, _Batch] | None:
        """Add `waiter` to the open batch of its node, view and extensions; the batch and its
        key when `waiter` opened it (its opener closes it after this turn)."""
        key = (node.node_id, node.url, queries.view.name, extensions)
        batch = self._open.get(key)
        new_keys = [k for k in waiter.keys if batch is None or k not in batch.keys]
        if batch is not None and len(batch.keys) + len(new_keys) > self._max_keys:
            self._send(self._open.pop(key))
            batch = None
        opened = None
        if batch is None:
            batch = self._open[key] = _Batch(node, queries, extensions)
            opened = (key, batch)
        batch.waiters.append(waiter)
        waiter.answer.add_done_callback(batch.forsaken)
        batch.keys.update(dict.fromkeys(waiter.keys))
        if len(batch.keys) >= self._max_keys:
            self._send(self._open.pop(key))
        return opened

    async def _alone_in_turn(self, key: _BatchKey, batch: _Batch) -> bool:
        """Yield this event-loop turn to lookups that may join the batch its caller opened,
        then close it: True when nobody joined (the caller asks alone), else the batch is
        sent for all of them (unless it was sent already, full)."""
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:  # the opener gave up: the others still get the call
            batch.waiters[0].answer.cancel()
            self._close(key, batch)
            raise
        if self._open.get(key) is batch:
            self._open.pop(key)
            if len(batch.waiters) == 1:
                return True
            self._send(batch)
        return False

    def _close(self, key: _BatchKey, batch: _Batch) -> None:
        if self._open.get(key) is batch:
            self._send(self._open.pop(key))

    async def _ask_alone(self, batch: _Batch, waiter: _Waiter) -> tuple[Rows, list[dict[str, Any]]]:
        """A batch of one lookup, asked in the lookup's own task (its deadline is the call's):
        the errors are those the shared call would give its one waiter."""
        if self._on_batch is not None:
            self._on_batch(1)
        try:
            return await self._ask(batch, [waiter], waiter.keys, waiter.deadline)
        except (NodeUnavailableError, NodeTimeoutError) as exc:
            raise for_waiter(exc, waiter.partitions, waiter.keys) from exc.__cause__

    def _send(self, batch: _Batch) -> None:
        task = batch.task = asyncio.get_running_loop().create_task(self._answer(batch))
        self._sending.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._sending.discard)

    async def _answer(self, batch: _Batch) -> None:
        waiters = [w for w in batch.waiters if not w.answer.done()]
        if not waiters:
            return
        if len(waiters) < len(batch.waiters):
            batch.keys = dict.fromkeys(k for w in waiters for k in w.keys)
        if self._on_batch is not None:
            self._on_batch(len(waiters))
        try:
            rows, freshness = await self._ask(
                batch, waiters, list(batch.keys), max(w.deadline for w in waiters)
            )
        except (NodeUnavailableError, NodeTimeoutError) as exc:
            # the node itself failed: every waiter's partitions are unavailable alike
            for waiter in waiters:
                _settle(waiter, exception=for_waiter(exc, waiter.partitions, waiter.keys))
            return
        except Exception as exc:
            if len(waiters) == 1:
                _settle(waiters[0], exception=exc)
                return
            # the answer may concern only some partitions: let each waiter ask alone
            await asyncio.gather(*(self._alone(batch, w) for w in waiters))
            return
        by_key = dict(zip(batch.keys, rows, strict=True))
        for waiter in waiters:
            mine = set(waiter.partitions)
            entries = [e for e in freshness if e.get("partition") in mine]
            _settle(waiter, result=([by_key[k] for k in waiter.keys], entries))

    async def _alone(self, batch: _Batch, waiter: _Waiter) -> None:
        try:
            answer = await self._ask(batch, [waiter], waiter.keys, waiter.deadline)
        except Exception as exc:
            _settle(waiter, exception=exc)
        else:
            _settle(waiter, result=answer)

    async def _ask(
        self, batch: _Batch, waiters: list[_Waiter], keys: list[str], deadline: float
    ) -> tuple[Rows, list[dict[str, Any]]]:
        view = batch.queries.view.name
        partitions = sorted({p for w in waiters for p in w.partitions})
        body = batch.queries.lookup_body(keys)
        if batch.extensions:
            body = with_extensions(body, batch.extensions)
        reply = await self._post(
            batch.node,
            body,
            view=view,
            partitions=partitions,
            keys=keys,
            deadline=deadline,
            callers=[w.caller for w in waiters],
        )
        where = {"partitions": partitions, "node": batch.node.node_id, "keys": keys}

        def read(data: Any) -> Rows:
            return batch.queries.read_lookup(data, asked=len(keys))

        return read_answer(read, reply, view, where), reply.freshness


def _expire(answer: asyncio.Future[Any]) -> None:
    """A waiter's deadline passed before its answer came."""
    if not answer.done():
        answer.set_exception(TimeoutError())


def _settle(
    waiter: _Waiter,
    *,
    result: tuple[Rows, list[dict[str, Any]]] | None = None,
    exception: BaseException | None = None,
) -> None:
    if waiter.answer.done():  # gave up at its deadline, or was cancelled
        return
    if exception is not None:
        waiter.answer.set_exception(exception)
    else:
        assert result is not None
        waiter.answer.set_result(result)
