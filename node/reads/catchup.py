"""Read-your-writes on the node: a request may name changelog offsets its copies must have
applied before it is answered (request extension `appliedAtLeast`).

```json
{"appliedAtLeast": {"topic": "statefed.word_counts.changelog",
                    "offsets": {"3": 1207}, "waitMs": 2000}}
```

`offsets` are next offsets per partition (everything before them applied). Only copies
this node holds in the roles the request may read are waited for; a partition it does
not hold is answered (or refused with NOT_OWNER) by the read itself. `waitMs` is what is
left of the caller's own deadline (the gateway sends it with every such read); the node
waits no longer than that, and never longer than `MAX_WAIT_MS`, so no request holds a
node's connection open for long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, TypeGuard

from node.changelog.partitions import PartitionRegistry
from node.errors import MalformedRequestError, NotCaughtUpError
from schema import APPLIED_AT_LEAST, Role

__all__ = ["AppliedAtLeast", "extension_spec", "is_int", "parse_applied_at_least", "wait_applied"]

MAX_WAIT_MS = 10_000
# how often a waiting request looks at the applied offsets: the materializer applies a
# poll batch at a time, so a finer step would only burn CPU
_STEP_S = 0.005


@dataclass(frozen=True)
class AppliedAtLeast:
    topic: str
    offsets: dict[int, int]
    wait_ms: int


def parse_applied_at_least(extensions: Any) -> AppliedAtLeast | None:
    """The request's `appliedAtLeast`, None when it has none; MalformedRequestError when it
    is not of the documented shape."""
    problem = f'"extensions.{APPLIED_AT_LEAST}" must be {{"topic": str, "offsets": '
    problem += '{"<partition>": int}, "waitMs": int}'
    spec = extension_spec(extensions, APPLIED_AT_LEAST, problem)
    if spec is None:
        return None
    topic, offsets, wait_ms = spec.get("topic"), spec.get("offsets"), spec.get("waitMs")
    if not isinstance(topic, str) or not isinstance(offsets, dict):
        raise MalformedRequestError(problem)
    if not is_int(wait_ms):
        raise MalformedRequestError(problem)
    if wait_ms < 0:
        raise MalformedRequestError(f"{problem}; waitMs 0 or more")
    try:
        parsed = {int(p): o for p, o in offsets.items() if is_int(o)}
    except ValueError as exc:
        raise MalformedRequestError(problem) from exc
    if len(parsed) != len(offsets):
        raise MalformedRequestError(problem)
    return AppliedAtLeast(topic, parsed, min(wait_ms, MAX_WAIT_MS))


def extension_spec(extensions: Any, name: str, problem: str) -> dict[str, Any] | None:
    """The object of request extension `name`, None when the request has none;
    MalformedRequestError(`problem`) when it is not an object."""
    if not isinstance(extensions, dict) or extensions.get(name) is None:
        return None
    spec = extensions[name]
    if not isinstance(spec, dict):
        raise MalformedRequestError(problem)
    return spec


def is_int(value: Any) -> TypeGuard[int]:
    """An int that is no bool (JSON true is not an offset)."""
    return isinstance(value, int) and not isinstance(value, bool)


async def wait_applied(
    registry: PartitionRegistry, wanted: AppliedAtLeast, roles: Collection[Role]
) -> None:
    """Return once every held copy (in `roles`) of the named partitions has applied its
    offset; raise NotCaughtUpError naming the first that has not when the wait is over."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wanted.wait_ms / 1000
    while True:
        behind = _first_behind(registry, wanted, roles)
        if behind is None:
            return
        if loop.time() >= deadline:
            partition, applied = behind
            raise NotCaughtUpError(
                wanted.topic,
                partition,
                applied,
                wanted.offsets[partition],
                registry.node_id,
                wanted.wait_ms,
            )
        await asyncio.sleep(_STEP_S)


def _first_behind(
    registry: PartitionRegistry, wanted: AppliedAtLeast, roles: Collection[Role]
) -> tuple[int, int] | None:
    for partition, offset in sorted(wanted.offsets.items()):
        applied = registry.applied(partition, wanted.topic, roles)
        if applied is not None and applied < offset:
            return partition, applied
    return None
