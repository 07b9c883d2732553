"""The cursors of whole-view scans: opaque to clients, versioned, unpadded base64url of a
JSON object saying which scan they belong to and where each partition stands.

A scan reads every partition from its own position (the key tail of the last row of that
partition the scan has passed, `node.subgraph.fields.scan`), so a cursor holds one position per
partition: paging on continues each partition exactly after what was already returned,
whatever was added or updated meanwhile, and a partition that could not be read keeps its
old position. A cursor also names its view, order and filter (prefix, from, to; or the
window starts of a windowed view's START and COUNT orders) and the partition count; used
with anything else it is BAD_USER_INPUT naming the argument.

Each cursor continues in the direction of the page that made it (`backward` for pages
read with `last`). Used the other way (`before` with a cursor of a forward page, or the
reverse), it stands for its edge: every partition from that edge's position (`at`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.model.errors import BadRequestError
from schema import View

__all__ = [
    "COUNT_ORDER",
    "KEY_ORDER",
    "MAX_SCAN_CURSOR_CHARS",
    "START_ORDER",
    "ScanCursor",
    "ScanFilter",
    "decode",
    "encode",
    "encoder",
    "ranked_by",
    "result_order",
]

VERSION = 1
KEY_ORDER = "key"
COUNT_ORDER = "count"  # count desc, then key (the top-N index; per window when windowed)
START_ORDER = "start"  # windowed views: window start, then key
_RESULT_ORDER = "result:"  # aggregate views: one result desc, then key (`result_order`)
# a position is a key tail (at most the gateway's key bytes and some); P of them per cursor
MAX_SCAN_CURSOR_CHARS = 1 << 20


def result_order(field: str) -> str:
    """The order of an aggregate view's rows by its numeric result `field`, descending,
    then by key (the nodes' rank index of it)."""
    return _RESULT_ORDER + field


def ranked_by(order: str) -> str | None:
    """The result an order of `result_order` ranks by; None for other orders."""
    return order[len(_RESULT_ORDER) :] if order.startswith(_RESULT_ORDER) else None


@dataclass(frozen=True)
class ScanFilter:
    """Which keys a scan reads: those starting with `prefix`, with since <= key < until; or
    (windowed views in START or COUNT order) the windows with since_ms <= start < until_ms."""

    prefix: str = ""
    since: str | None = None
    until: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    @property
    def keyed(self) -> bool:
        """Whether it bounds keys (which only the key order can)."""
        return bool(self.prefix) or self.since is not None or self.until is not None

    @property
    def timed(self) -> bool:
        """Whether it bounds window starts (which only the START and COUNT orders can)."""
        return self.since_ms is not None or self.until_ms is not None


@dataclass(frozen=True)
class ScanCursor:
    """Where a scan of `view` in `order` over `scan_filter` stands on each of `partitions`
    partitions: `positions` (None: the partition's first row, or its last when `backward`),
    continuing `backward` or forwards; `at` is the position of the edge it names (None for
    the cursor of a page without edges)."""

    view: str
    order: str
    scan_filter: ScanFilter
    partitions: int
    backward: bool
    at: bytes | None
    positions: tuple[bytes | None, ...]

    def starts(self, backward: bool) -> tuple[bytes | None, ...]:
        """Each partition's position for a page read `backward` or forwards from here."""
        if backward == self.backward:
            return self.positions
        return (self.at,) * self.partitions


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: Any) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError("a position is no string")
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def encode(cursor: ScanCursor) -> str:
    """The cursor as clients see it. The positions most partitions share are written once
    (after a page every partition that answered stands at its last edge)."""
    return encoder(cursor)(cursor.at, cursor.positions)


def encoder(start: ScanCursor) -> Callable[[bytes | None, tuple[bytes | None, ...]], str]:
    """`encode` of the cursors of `start`'s scan at `at` with `positions`: what the cursors
    of one page share is built once (a page encodes one cursor per edge)."""
    spec = start.scan_filter
    head = {
        "v": VERSION,
        "w": start.view,
        "o": start.order,
        "f": [spec.prefix, spec.since, spec.until, spec.since_ms, spec.until_ms],
        "n": start.partitions,
        "b": start.backward,
    }

    def encode_at(at: bytes | None, positions: tuple[bytes | None, ...]) -> str:
        common = max(positions, key=positions.count) if positions else None
        doc = {
            **head,
            "a": _b64(at),
            "d": _b64(common),
            "x": {str(p): _b64(pos) for p, pos in enumerate(positions) if pos != common},
        }
        return base64.urlsafe_b64encode(orjson.dumps(doc)).rstrip(b"=").decode("ascii")

    return encode_at


def decode(
    view: View, text: str, argument: str, order: str, scan_filter: ScanFilter, partitions: int
) -> ScanCursor:
    """The cursor `text` given as `argument`; BAD_USER_INPUT naming the argument when it is
    no cursor, or one of another view, order, filter or partition count."""
    cursor = _parse(view, text, argument)
    if cursor.view != view.name or cursor.order != order:
        raise _bad(view, argument, f"is a cursor of view {cursor.view} in {cursor.order} order")
    if cursor.scan_filter != scan_filter:
        raise _bad(
            view,
            argument,
            "belongs to another prefix, from, to, window or time range: page with the same ones",
        )
    if cursor.partitions != partitions:
        raise _bad(
            view,
            argument,
            f"was made when the view had {cursor.partitions} partitions, it has {partitions} now",
        )
    return cursor


def _parse(view: View, text: str, argument: str) -> ScanCursor:
    try:
        if len(text) > MAX_SCAN_CURSOR_CHARS:
            raise ValueError("too long")
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
        doc = orjson.loads(raw)
        if not isinstance(doc, dict) or doc.get("v") != VERSION:
            raise ValueError(f"no cursor of version {VERSION}")
        # part 1's cursors had no window starts: they stay valid
        prefix, since, until, *starts = doc["f"]
        since_ms, until_ms = starts or (None, None)
        count, common, exceptions = doc["n"], _unb64(doc["d"]), doc["x"]
        if not isinstance(count, int) or not 0 < count <= 1 << 16:
            raise ValueError("no partition count")
        positions = [common] * count
        for partition, at in exceptions.items():
            index = int(partition)
            if not 0 <= index < count:
                raise ValueError(f"partition {index} is outside 0..{count - 1}")
            positions[index] = _unb64(at)
        scan_filter = ScanFilter(
            _text(prefix), _optional(since), _optional(until), _ms(since_ms), _ms(until_ms)
        )
        cursor = ScanCursor(
            _text(doc["w"]),
            _text(doc["o"]),
            scan_filter,
            count,
            doc["b"] is True,
            _unb64(doc["a"]),
            tuple(positions),
        )
    except (binascii.Error, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise _bad(view, argument, "is no cursor of this field (use pageInfo's cursors)") from exc
    return cursor


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def _optional(value: Any) -> str | None:
    return None if value is None else _text(value)


def _ms(value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError("not a time")
    return value


def _bad(view: View, argument: str, problem: str) -> BadRequestError:
    return BadRequestError(view.name, f"{argument}: the cursor {problem}")
