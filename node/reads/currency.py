"""Reads that accept no lag from a copy that is not a running ACTIVE one: the node answers
only once it has proved the copy current (request extension `readCurrent`).

```json
{"readCurrent": {"topic": "statefed.word_counts.changelog", "partitions": [3], "waitMs": 900}}
```

A copy of partition p is *proved current* for a read when, after the read arrived, the node
learned the end offset of p of `topic` from a fetch the broker answered after that moment
(`node.reads.endprobe`), and the copy has applied everything before that end. The answer then
holds every change the broker had accepted before the read reached the node, so it is not
behind any answer given before the read was sent, from any copy. A proved copy is read in
any role, even while it restores. When the end is not learned, or the copy does not reach
it within the wait (`waitMs`, at most `MAX_WAIT_MS`), the read is refused with NOT_OWNER and
the gateway asks elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from node.changelog.partitions import PartitionRegistry
from node.errors import MalformedRequestError, NotCaughtUpError, NotCurrentError
from node.reads.catchup import AppliedAtLeast, extension_spec, is_int, wait_applied
from node.reads.endprobe import EndProbe, EndUnknownError
from schema import READ_CURRENT, Role

__all__ = ["MAX_WAIT_MS", "ReadCurrent", "parse_read_current", "prove_current"]

MAX_WAIT_MS = 1000


@dataclass(frozen=True)
class ReadCurrent:
    topic: str
    partitions: tuple[int, ...]
    wait_ms: int


def parse_read_current(extensions: Any) -> ReadCurrent | None:
    """The request's `readCurrent`, None when it has none; MalformedRequestError when it is
    not of the documented shape."""
    problem = f'"extensions.{READ_CURRENT}" must be {{"topic": str, "partitions": [int], '
    problem += '"waitMs": int 0 or more}'
    spec = extension_spec(extensions, READ_CURRENT, problem)
    if spec is None:
        return None
    topic, partitions, wait_ms = spec.get("topic"), spec.get("partitions"), spec.get("waitMs")
    if not isinstance(topic, str) or not isinstance(partitions, list):
        raise MalformedRequestError(problem)
    if not all(is_int(p) and p >= 0 for p in partitions):
        raise MalformedRequestError(problem)
    if not is_int(wait_ms) or wait_ms < 0:
        raise MalformedRequestError(problem)
    return ReadCurrent(topic, tuple(sorted(set(partitions))), min(wait_ms, MAX_WAIT_MS))


async def prove_current(
    registry: PartitionRegistry,
    probe: EndProbe | None,
    wanted: ReadCurrent,
    roles: Collection[Role],
) -> dict[int, dict[str, int]]:
    """Prove this node's copies (in `roles`) of the wanted partitions current: per partition
    proved, the offset of `topic` its copy has applied at least. A partition not held here is
    left out (the read refuses it); NotCurrentError names what could not be proved."""
    applied = {
        p: offset
        for p in wanted.partitions
        if (offset := registry.applied(p, wanted.topic, roles)) is not None
    }
    if not applied:
        return {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wanted.wait_ms / 1000
    if probe is None:
        raise NotCurrentError(wanted.topic, sorted(applied), registry.node_id, "it runs no probe")
    try:
        ends = await probe.ends(wanted.topic, applied, wanted.wait_ms / 1000)
    except EndUnknownError as exc:
        raise NotCurrentError(wanted.topic, sorted(applied), registry.node_id, str(exc)) from exc
    left_ms = max(0, int((deadline - loop.time()) * 1000))
    try:
        await wait_applied(registry, AppliedAtLeast(wanted.topic, ends, left_ms), roles)
    except NotCaughtUpError as exc:
        raise NotCurrentError(wanted.topic, sorted(applied), registry.node_id, str(exc)) from exc
    return {p: {wanted.topic: end} for p, end in ends.items()}
