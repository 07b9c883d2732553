"""Read-your-writes: consistency tokens, and waiting until a write is visible.

A token names one write to an input topic, `<topic>:<partition>:<offset>` (the `produce`
mutation returns it; any producer can build it from its delivery report). A read with
`atLeast: token` first waits until the pipeline's status for the view says the write's
offset is processed; that status also carries the view's changelog offsets acknowledged by
then, which the nodes must have applied before they answer (`AppliedAtLeast`, sent as the
request extension `appliedAtLeast`, see node.reads.catchup). Both waits end at the request's
deadline with a CONSISTENCY_TIMEOUT error.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gateway.cluster.pipeline import StatusBoard
from gateway.model.errors import BadRequestError, ConsistencyTimeoutError
from schema import View

__all__ = ["AppliedAtLeast", "Token", "parse_token", "wait_processed"]

# the board is fed by a consumer thread; a status arrives every micro-batch (~0.5 s), so
# looking every 10 ms adds little to the wait and costs nothing measurable
_STEP_S = 0.01
# the node must answer before the gateway's own deadline, to say why it could not
_NODE_WAIT_SHARE = 0.8

_TOKEN = re.compile(r"^([A-Za-z0-9._-]{1,249}):(\d{1,10}):(\d{1,19})$")


@dataclass(frozen=True)
class Token:
    """One write: its input topic, partition and offset."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"


def parse_token(view: View, text: str, partitions: int | None = None) -> Token:
    """The token `text` for a read of `view`: BadRequestError when it is malformed, names a
    topic the view does not read, or a partition outside `partitions` (the view's partition
    count; None while not known, when no partition is refused)."""
    match = _TOKEN.match(text)
    if match is None:
        raise BadRequestError(
            view.name,
            f"atLeast {text[:100]!r} is no consistency token (<topic>:<partition>:"
            "<offset>, as returned by the produce mutation)",
        )
    token = Token(match[1], int(match[2]), int(match[3]))
    if token.topic != view.topic:
        raise BadRequestError(
            view.name,
            f"atLeast names a write to topic {token.topic}, but the view reads topic {view.topic}",
        )
    if partitions is not None and token.partition >= partitions:
        raise BadRequestError(
            view.name,
            f"atLeast names partition {token.partition} of topic {token.topic}, which has "
            f"{partitions} partitions (0..{partitions - 1}): no write can have landed there",
        )
    return token


@dataclass(frozen=True)
class AppliedAtLeast:
    """The next offsets per partition of `topic` (a changelog) the copies read must have
    applied."""

    topic: str
    offsets: tuple[tuple[int, int], ...]

    def extension(self, partitions: Iterable[int], wait_s: float) -> dict[str, Any] | None:
        """The `appliedAtLeast` request extension for a node read of `partitions`, None
        when none of them has to wait."""
        wanted = dict(self.offsets)
        named = {str(p): wanted[p] for p in partitions if p in wanted}
        if not named:
            return None
        wait_ms = max(0, int(wait_s * _NODE_WAIT_SHARE * 1000))
        return {"topic": self.topic, "offsets": named, "waitMs": wait_ms}


async def wait_processed(
    board: StatusBoard, view: View, token: Token, deadline: float
) -> AppliedAtLeast:
    """Wait until the pipeline reports `token`'s write processed for `view`; return what
    the nodes must have applied to show it. ConsistencyTimeoutError at `deadline` (loop
    time)."""
    loop = asyncio.get_running_loop()
    while True:
        status = board.get(view.name)
        if status is not None and status.source_offsets.get(token.partition, 0) > token.offset:
            offsets = tuple(sorted(status.changelog_offsets.items()))
            return AppliedAtLeast(view.changelog_topic, offsets)
        if loop.time() >= deadline:
            processed = None if status is None else status.source_offsets.get(token.partition)
            raise ConsistencyTimeoutError(view.name, str(token), processed)
        await asyncio.sleep(_STEP_S)
