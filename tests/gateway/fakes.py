"""Fake nodes speaking the node HTTP protocol (team brief, issue 3), and helpers around them.

A `Model` holds what the pipeline would have materialized for every view, and answers the
questions a test asks of the truth. A `FakeNode` is an ASGI app serving the node subgraph
of a catalogue with graphql-core (parsed from SDL written from the protocol, so the
gateway's documents must be valid against the contract), over the model's keys in the
partitions it holds. It counts what it was asked, so tests can assert on requests per
node and partitions read.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import inspect
import struct
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
import orjson
import uvicorn
from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    GraphQLError,
    OperationDefinitionNode,
    build_schema,
    execute,
    graphql,
    parse,
    validate,
)

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed, RoutingTable, build_routing_table
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.writes.producer import EventProducer
from runtime.clock import wall_clock_ms
from runtime.ranking import is_rankable, value_rank
from schema import (
    DEMO_DOMAIN,
    MAX_UINT,
    WORD_COUNTS,
    EventRow,
    FieldType,
    MemberRecord,
    NodeState,
    PartitionStatus,
    Role,
    ValueType,
    View,
    ViewKind,
    field_value,
    pack,
    partition_for,
    wire_value,
)
from tooling.broker import free_port
from tooling.processes import wait_until

WORDS = WORD_COUNTS
# the kinds whose rows are events (an aggregate view's: its results as the fields)
_EVENT_ROWS = (ViewKind.LATEST, ViewKind.HISTORY, ViewKind.AGGREGATE)
_ENTITIES = (ViewKind.COUNT, ViewKind.LATEST, ViewKind.AGGREGATE)  # federation entity types
FULL: tuple[View, ...] = (WORD_COUNTS, *DEMO_DOMAIN)
HOSTS, PER_MINUTE, LAST_BOOKING, BOOKING_HISTORY, HOST_PAGES = DEMO_DOMAIN

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def to_iso(ms: int) -> str:
    """How the fake writes DateTime: UTC with `Z` (the gateway must read any offset)."""
    return (EPOCH + ms * MS).isoformat().replace("+00:00", "Z")


def to_ms(text: str) -> int:
    moment = datetime.fromisoformat(text)
    assert moment.tzinfo is not None, f"naive DateTime {text!r} sent to a node"
    return (moment - EPOCH) // MS


def _columns(view: View, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The packed columns (node.subgraph.fields.scan SCAN_ROWS) of rows written as GraphQL
    objects."""
    packed: dict[str, list[Any]] = {"k": [r[view.key_field] for r in rows]}
    if view.kind is ViewKind.WINDOWED_COUNT:
        packed["s"] = [to_ms(r["start"]) for r in rows]
        packed["e"] = [to_ms(r["end"]) for r in rows]
    if view.kind in _EVENT_ROWS:
        packed["t"] = [to_ms(r["eventTime"]) for r in rows]
        for index, spec in enumerate(view.row_fields):
            packed[f"v{index}"] = [
                wire_value(spec.type, field_value(spec.type, r[spec.name])) for r in rows
            ]
    else:
        packed["c"] = [r["count"] for r in rows]
    return packed


def bad_input(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "BAD_USER_INPUT"})


# -- the node subgraph of issue 3, written out from the protocol --------------------------

_SCALARS = "scalar DateTime\ninput WindowInput { start: DateTime! }\n"
_PAGE_INFO = "type PageInfo { hasNextPage: Boolean!  endCursor: String }\n"
_SCAN_INPUTS = (
    "input SliceInput { partition: Int!  after: String }\n"
    "enum ScanOrder { KEY COUNT START RESULT }\n"
    "scalar JSON\n"
    "type PartitionTotal { partition: Int!  keys: Float!  count: Float! }\n"
    "type PartitionWindowTotal { partition: Int!  start: DateTime!  end: DateTime!  "
    "keys: Float!  count: Float! }\n"
)


def _scan_sdl(view: View) -> tuple[str, str]:
    """(types, query fields) of the view's scan field (slices of partitions in key order)
    and, for count and windowed views, its totals field."""
    t = view.type_name
    order = ", order: ScanOrder! = KEY" if view.kind is ViewKind.COUNT else ""
    if view.kind is ViewKind.AGGREGATE:
        order = ", order: ScanOrder! = KEY, by: String"
    if view.kind is ViewKind.WINDOWED_COUNT:
        order = ", order: ScanOrder! = KEY, startFrom: DateTime, startTo: DateTime"
    totals = ""
    if view.kind is ViewKind.COUNT:
        totals = f"{view.totals_field}(partitions: [Int!]!): [PartitionTotal!]!\n"
    if view.kind is ViewKind.WINDOWED_COUNT:
        totals = (
            f"{view.totals_field}(partitions: [Int!]!, from: DateTime, to: DateTime): "
            "[PartitionWindowTotal!]!\n"
        )
    return (f"type {t}Slice {{ partition: Int!  rows: JSON! }}\n"), (
        f"{view.scan_field}(slices: [SliceInput!]!, first: Int!, backward: Boolean! = false, "
        f'prefix: String! = "", from: String, to: String{order}): [{t}Slice!]!\n' + totals
    )


def _scalar(value_type: ValueType) -> str:
    if not isinstance(value_type, FieldType):
        raise NotImplementedError(f"the fake subgraph has scalar value fields only: {value_type}")
    return value_type.value


def _event_type(view: View, name: str) -> str:
    values = " ".join(f"{f.name}: {_scalar(f.type)}" for f in view.row_fields)
    return f"type {name} {{ {view.key_field}: String!  {values}  eventTime: DateTime! }}\n"


def _view_sdl(view: View) -> tuple[str, str]:
    """(types, query fields) of one view."""
    t, k = view.type_name, view.key_field
    if view.kind is ViewKind.COUNT:
        return f"type {t} {{ {k}: String!  count: Int! }}\n", (
            f"{view.point_field}({k}: String!): {t}\n"
            f"{view.many_field}({view.keys_arg}: [String!]!): [{t}]!\n"
            f"{view.top_field}(limit: Int!, partitions: [Int!]): [{t}!]!\n"
        )
    if view.kind is ViewKind.WINDOWED_COUNT:
        types = f"type {t} {{ {k}: String!  start: DateTime!  end: DateTime!  count: Int! }}\n"
        return types, (
            f"{view.point_field}({k}: String!, from: DateTime, to: DateTime): [{t}!]!\n"
            f"{view.top_field}(limit: Int!, window: WindowInput!, partitions: [Int!]): [{t}!]!\n"
        )
    if view.kind is ViewKind.LATEST:
        return _event_type(view, t), (
            f"{view.point_field}({k}: String!): {t}\n"
            f"{view.many_field}({view.keys_arg}: [String!]!): [{t}]!\n"
        )
    if view.kind is ViewKind.AGGREGATE:
        return _event_type(view, t), (
            f"{view.point_field}({k}: String!): {t}\n"
            f"{view.many_field}({view.keys_arg}: [String!]!): [{t}]!\n"
            f"{view.top_field}(limit: Int!, by: String!, partitions: [Int!]): [{t}!]!\n"
        )
    types = _event_type(view, t) + (
        f"type {t}Edge {{ cursor: String!  node: {t}! }}\n"
        f"type {t}Connection {{ edges: [{t}Edge!]!  pageInfo: PageInfo! }}\n"
    )
    return types, (
        f"{view.point_field}({k}: String!, from: DateTime, to: DateTime, first: Int! = 100, "
        f"after: String, newestFirst: Boolean! = false): {t}Connection!\n"
    )


def _entities_sdl(catalogue: Sequence[View]) -> tuple[str, str]:
    """Federation's `_entities` over the entity types (count and latest views), if any."""
    entities = [v.type_name for v in catalogue if v.kind in _ENTITIES]
    if not entities:
        return "", ""
    types = f"scalar _Any\nunion _Entity = {' | '.join(entities)}\n"
    return types, "_entities(representations: [_Any!]!): [_Entity]!\n"


def node_sdl(catalogue: Sequence[View]) -> str:
    parts = [_view_sdl(view) for view in catalogue]
    parts.extend(_scan_sdl(view) for view in catalogue)
    parts.append(_entities_sdl(catalogue))
    types = "".join(t for t, _ in parts)
    query = "type Query {\n" + "".join(q for _, q in parts) + "}\n"
    return _SCALARS + _PAGE_INFO + _SCAN_INPUTS + types + query


# -- the truth ----------------------------------------------------------------------------


def event_order(event: EventRow) -> tuple[int, int, int]:
    return (event.event_ms, event.source_partition, event.source_offset)


@dataclass
class Model:
    """What the pipeline would have materialized, by view name: COUNT key -> count;
    WINDOWED_COUNT (key, window start ms) -> count; LATEST and HISTORY key -> events."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    windows: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    events: dict[str, dict[str, list[EventRow]]] = field(default_factory=dict)

    @classmethod
    def of_counts(cls, counts: Mapping[str, int], view: View = WORDS) -> Model:
        return cls(counts={view.name: dict(counts)})

    def add_event(self, view: View, event: EventRow) -> None:
        self.events.setdefault(view.name, {}).setdefault(event.key, []).append(event)

    def top(self, view: View, limit: int, start_ms: int | None = None) -> list[tuple[str, int]]:
        if start_ms is None:
            rows = list(self.counts.get(view.name, {}).items())
        else:
            windows = self.windows.get(view.name, {})
            rows = [(k, c) for (k, s), c in windows.items() if s == start_ms]
        return sorted(rows, key=lambda kc: (-kc[1], kc[0]))[:limit]

    def windows_of(
        self, view: View, key: str, since: int | None = None, until: int | None = None
    ) -> list[tuple[int, int]]:
        """(start ms, count) of `key`'s windows with since <= start < until, in time order."""
        return sorted(
            (s, c)
            for (k, s), c in self.windows.get(view.name, {}).items()
            if k == key and (since is None or since <= s) and (until is None or s < until)
        )

    def latest(self, view: View, key: str) -> EventRow | None:
        events = self.events.get(view.name, {}).get(key, [])
        return max(events, key=event_order) if events else None

    def history(
        self, view: View, key: str, since: int | None = None, until: int | None = None
    ) -> list[EventRow]:
        events = self.events.get(view.name, {}).get(key, [])
        return sorted(
            (
                e
                for e in events
                if (since is None or since <= e.event_ms) and (until is None or e.event_ms < until)
            ),
            key=event_order,
        )


def cursor_of(event: EventRow) -> str:
    packed = struct.pack(">qII", event.event_ms, event.source_partition, event.source_offset)
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, int, int]:
    try:
        packed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        event_ms, partition, offset = struct.unpack(">qII", packed)
    except (binascii.Error, ValueError, struct.error) as exc:
        raise bad_input(f"bad cursor {cursor!r}") from exc
    return event_ms, partition, offset


# -- the fake node ------------------------------------------------------------------------


class FakeNode:
    """An ASGI node holding the `held` partitions of `model` for the views of `catalogue`."""

    def __init__(
        self,
        node_id: str,
        model: Model,
        held: Iterable[int],
        partitions: int,
        catalogue: Sequence[View] = (WORDS,),
        delay_s: float = 0.0,
    ) -> None:
        self.node_id = node_id
        self.model = model
        self.held = set(held)
        self.partitions = partitions
        self.delay_s = delay_s
        self.requests = 0
        self.partitions_read: list[int] = []  # by top fields, one entry per partition per request
        self.keys_asked: list[str] = []
        self.fields_asked: list[str] = []  # the root field of every request
        self.entities_asked: list[str] = []  # per `_entities` request, each type name asked
        self._schema = build_schema(node_sdl(catalogue))
        self._documents: dict[str, DocumentNode] = {}  # valid query texts, parsed once
        self._topics = [view.changelog_topic for view in catalogue]
        self._root: dict[str, Callable[..., Any]] = {"_entities": self._entities}
        self._entity_views = {v.type_name: v for v in catalogue if v.kind in _ENTITIES}
        for view in catalogue:
            self._root.update(self._resolvers(view))

    def url(self) -> str:
        return f"http://{self.node_id}.test"

    def _resolvers(self, view: View) -> dict[str, Callable[..., Any]]:
        k = view.key_field

        def point(info: Any, **args: Any) -> Any:
            return self._rows(info, view, [args[k]])[0]

        def many(info: Any, **args: Any) -> Any:
            return self._rows(info, view, args[view.keys_arg])

        def top(info: Any, limit: int, partitions: list[int] | None = None, **args: Any) -> Any:
            if "by" in args:
                return self._ranked(info, view, limit, partitions, args["by"])
            return self._top(info, view, limit, partitions, args.get("window"))

        def windows(info: Any, **args: Any) -> Any:
            return self._windows(info, view, args[k], args.get("from"), args.get("to"))

        def history(info: Any, **args: Any) -> Any:
            return self._history(info, view, args[k], args)

        def scan(info: Any, **args: Any) -> Any:
            return self._scan(info, view, args)

        def totals(info: Any, partitions: list[int], **args: Any) -> Any:
            return self._totals(info, view, partitions, args.get("from"), args.get("to"))

        if view.kind is ViewKind.WINDOWED_COUNT:
            return {
                view.point_field: windows,
                view.top_field: top,
                view.scan_field: scan,
                view.totals_field: totals,
            }
        if view.kind is ViewKind.HISTORY:
            return {view.point_field: history, view.scan_field: scan}
        fields: dict[str, Callable[..., Any]] = {
            view.point_field: point,
            view.many_field: many,
            view.scan_field: scan,
        }
        if view.kind in (ViewKind.COUNT, ViewKind.AGGREGATE):
            fields[view.top_field] = top
        if view.kind is ViewKind.COUNT:
            fields[view.totals_field] = totals
        return fields

    def _entities(self, info: Any, representations: list[dict[str, Any]]) -> list[Any]:
        """Rows by representation, one read per view; NOT_OWNER as for the multi-key field."""
        by_type: dict[str, list[int]] = {}
        for index, representation in enumerate(representations):
            name = representation.get("__typename")
            if name not in self._entity_views:
                raise bad_input(f"no entity type {name!r}")
            by_type.setdefault(name, []).append(index)
        rows: list[Any] = [None] * len(representations)
        for name, indexes in by_type.items():
            self.entities_asked.append(name)
            view = self._entity_views[name]
            keys = [representations[i][view.key_field] for i in indexes]
            for index, row in zip(indexes, self._rows(info, view, keys), strict=True):
                rows[index] = None if row is None else {"__typename": name, **row}
        return rows

    def _not_owner(self, view: View, foreign: Sequence[int], what: str) -> GraphQLError:
        return GraphQLError(
            f"view {view.name}: {what} is in partition {foreign[0]}, which node "
            f"{self.node_id} does not hold",
            extensions={
                "code": "NOT_OWNER",
                "view": view.name,
                "partition": foreign[0],
                "partitions": list(foreign),
                "node": self.node_id,
            },
        )

    def _own(self, info: Any, view: View, keys: Sequence[str]) -> None:
        """Check the keys are held (else NOT_OWNER) and note their partitions as read."""
        self.keys_asked.extend(keys)
        if any(not k for k in keys):
            raise bad_input("empty key")
        parts = [partition_for(k, self.partitions) for k in keys]
        foreign = sorted({p for p in parts if p not in self.held})
        if foreign:
            raise self._not_owner(view, foreign, f"key {keys[parts.index(foreign[0])]!r}")
        info.context["read"].update(parts)

    def _rows(self, info: Any, view: View, keys: Sequence[str]) -> list[Any]:
        self._own(info, view, keys)
        if view.kind is ViewKind.COUNT:
            counts = self.model.counts.get(view.name, {})
            return [
                None if k not in counts else {view.key_field: k, "count": counts[k]} for k in keys
            ]
        latest = [self.model.latest(view, k) for k in keys]
        return [None if e is None else self._event(view, e) for e in latest]

    def _event(self, view: View, event: EventRow) -> dict[str, Any]:
        values = {f.name: event.fields.get(f.name) for f in view.row_fields}
        return {view.key_field: event.key, **values, "eventTime": to_iso(event.event_ms)}

    def _window(self, view: View, key: str, start: int, count: int) -> dict[str, Any]:
        assert view.window is not None
        end = to_iso(start + view.window.size_ms)
        return {view.key_field: key, "start": to_iso(start), "end": end, "count": count}

    def _top(
        self,
        info: Any,
        view: View,
        limit: int,
        partitions: list[int] | None,
        window: dict[str, Any] | None,
    ) -> list[Any]:
        if not 1 <= limit <= 10_000:
            raise bad_input("bad limit")
        start = None if window is None else to_ms(window["start"])
        if view.window is not None and (start is None or start % view.window.hop_ms):
            raise bad_input(f"window start {window} is not aligned")
        wanted = sorted(self.held) if partitions is None else partitions
        foreign = sorted({p for p in wanted if p not in self.held})
        if foreign:
            raise self._not_owner(view, foreign, f"partition {foreign[0]}")
        self.partitions_read.extend(wanted)
        info.context["read"].update(wanted)
        rows = [
            (k, c)
            for k, c in self.model.top(view, 1_000_000, start)
            if partition_for(k, self.partitions) in wanted
        ][:limit]
        if start is None:
            return [{view.key_field: k, "count": c} for k, c in rows]
        return [self._window(view, k, start, c) for k, c in rows]

    def _ranked(
        self, info: Any, view: View, limit: int, partitions: list[int] | None, by: str
    ) -> list[Any]:
        """An aggregate view's top by the result `by` (its rows are the model's latest
        events, whose fields are the results)."""
        if not 1 <= limit <= 10_000 or by not in view.ranked_fields:
            raise bad_input("bad limit or by")
        wanted = sorted(self.held) if partitions is None else partitions
        foreign = sorted({p for p in wanted if p not in self.held})
        if foreign:
            raise self._not_owner(view, foreign, f"partition {foreign[0]}")
        self.partitions_read.extend(wanted)
        info.context["read"].update(wanted)
        rows = [
            e
            for k in self.model.events.get(view.name, {})
            if partition_for(k, self.partitions) in wanted
            and (e := self.model.latest(view, k)) is not None
            and is_rankable(e.fields.get(by))
        ]
        rows.sort(key=lambda e: value_rank(e.fields[by], e.key))
        return [self._event(view, e) for e in rows[:limit]]

    def _windows(
        self, info: Any, view: View, key: str, since: str | None, until: str | None
    ) -> list[Any]:
        self._own(info, view, [key])
        found = self.model.windows_of(
            view,
            key,
            None if since is None else to_ms(since),
            None if until is None else to_ms(until),
        )
        return [self._window(view, key, s, c) for s, c in found]

    def _history(self, info: Any, view: View, key: str, args: dict[str, Any]) -> dict[str, Any]:
        self._own(info, view, [key])
        first, after = args["first"], args.get("after")
        if not 1 <= first <= 1000:
            raise bad_input("bad first")
        since, until = args.get("from"), args.get("to")
        events = self.model.history(
            view,
            key,
            None if since is None else to_ms(since),
            None if until is None else to_ms(until),
        )
        newest_first = args.get("newestFirst", False)
        if newest_first:
            events = events[::-1]
        if after is not None:
            position = decode_cursor(after)
            events = [
                e
                for e in events
                if (event_order(e) < position if newest_first else event_order(e) > position)
            ]
        page = events[:first]
        edges = [{"cursor": cursor_of(e), "node": self._event(view, e)} for e in page]
        return {
            "edges": edges,
            "pageInfo": {
                "hasNextPage": len(events) > first,
                "endCursor": edges[-1]["cursor"] if edges else None,
            },
        }

    def _totals(
        self, info: Any, view: View, partitions: list[int], since: str | None, until: str | None
    ) -> list[Any]:
        """Each asked partition's keys and sum of counts (per window, for windowed views)."""
        foreign = sorted({p for p in partitions if p not in self.held})
        if foreign:
            raise self._not_owner(view, foreign, f"partition {foreign[0]}")
        info.context["read"].update(partitions)
        found: dict[tuple[int, int | None], list[int]] = {}
        if view.window is None:
            for key, count in self.model.counts.get(view.name, {}).items():
                found.setdefault((partition_for(key, self.partitions), None), []).append(count)
        else:
            low = None if since is None else to_ms(since)
            high = None if until is None else to_ms(until)
            for (key, begins), count in self.model.windows.get(view.name, {}).items():
                if (low is None or low <= begins) and (high is None or begins < high):
                    at = (partition_for(key, self.partitions), begins)
                    found.setdefault(at, []).append(count)
        totals = []
        for (partition, start), counts in sorted(
            found.items(), key=lambda f: (f[0][0], f[0][1] or 0)
        ):
            if partition not in partitions:
                continue
            total: dict[str, Any] = {
                "partition": partition,
                "keys": len(counts),
                "count": sum(counts),
            }
            if start is not None:
                assert view.window is not None
                total.update(start=to_iso(start), end=to_iso(start + view.window.size_ms))
            totals.append(total)
        return totals

    def _positioned(self, view: View, order: str) -> list[tuple[bytes, str, Any]]:
        """(position, key, row) of every row of the view, as the node orders them."""
        if view.kind is ViewKind.COUNT:
            counts = self.model.counts.get(view.name, {}).items()
            rank = (
                (lambda k, c: pack(MAX_UINT - c, k)) if order == "COUNT" else (lambda k, c: pack(k))
            )
            return [(rank(k, c), k, {view.key_field: k, "count": c}) for k, c in counts]
        if view.kind is ViewKind.WINDOWED_COUNT:
            windows = self.model.windows.get(view.name, {}).items()
            place = {
                "KEY": lambda k, s, c: pack(k, s),
                "START": lambda k, s, c: pack(s, k),
                "COUNT": lambda k, s, c: pack(s, MAX_UINT - c, k),
            }[order]
            return [(place(k, s, c), k, self._window(view, k, s, c)) for (k, s), c in windows]
        events = self.model.events.get(view.name, {})
        if view.kind in (ViewKind.LATEST, ViewKind.AGGREGATE):
            latest = {k: self.model.latest(view, k) for k in events}
            return [(pack(k), k, self._event(view, e)) for k, e in latest.items() if e]
        return [
            (pack(k, *event_order(e)), k, self._event(view, e))
            for k, es in events.items()
            for e in es
        ]

    def _scan(self, info: Any, view: View, args: dict[str, Any]) -> list[Any]:
        """Each asked partition's next `first` rows after its position (NOT_OWNER if not held)."""
        first, backward = args["first"], args["backward"]
        if not 1 <= first <= 10_001:
            raise bad_input("bad first")
        wanted = [piece["partition"] for piece in args["slices"]]
        foreign = sorted({p for p in wanted if p not in self.held})
        if foreign:
            raise self._not_owner(view, foreign, f"partition {foreign[0]}")
        info.context["read"].update(wanted)
        prefix, since, until = args["prefix"], args.get("from"), args.get("to")
        first_start, end_start = args.get("startFrom"), args.get("startTo")
        starts = (
            None if first_start is None else to_ms(first_start),
            None if end_start is None else to_ms(end_start),
        )
        rows = sorted(
            (
                r
                for r in self._positioned(view, args.get("order", "KEY"))
                if (
                    r[1].startswith(prefix)
                    and (since is None or r[1].encode() >= since.encode())
                    and (until is None or r[1].encode() < until.encode())
                    and (starts[0] is None or to_ms(r[2]["start"]) >= starts[0])
                    and (starts[1] is None or to_ms(r[2]["start"]) < starts[1])
                )
            ),
            key=lambda r: r[0],
            reverse=backward,
        )
        slices = []
        for piece in args["slices"]:
            after = piece.get("after")
            at = None if after is None else bytes.fromhex(after)
            mine = [
                r
                for r in rows
                if partition_for(r[1], self.partitions) == piece["partition"]
                and (at is None or (r[0] < at if backward else r[0] > at))
            ][:first]
            packed = {"a": [r[0].hex() for r in mine], **_columns(view, [r[2] for r in mine])}
            slices.append({"partition": piece["partition"], "rows": packed})
        return slices

    def freshness(self, read: Iterable[int]) -> list[dict[str, Any]]:
        return [
            {
                "partition": p,
                "node": self.node_id,
                "role": "ACTIVE",
                "appliedOffset": 100 + p,
                "lag": 0,
                "positions": dict.fromkeys(self._topics, 100 + p),
                "applied": dict.fromkeys(self._topics, 100 + p),
            }
            for p in sorted(read)
        ]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.requests += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if scope["path"] == "/health":
            doc: dict[str, Any] = {
                "node_id": self.node_id,
                "state": "RUNNING",
                "active": sorted(self.held),
                "standby": [],
            }
        else:
            doc = await self._graphql(orjson.loads(body))
        payload = orjson.dumps(doc)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _graphql(self, request: dict[str, Any]) -> dict[str, Any]:
        context: dict[str, Any] = {"read": set()}
        query = request["query"]
        document = self._document(query)
        if document is None:  # not valid: graphql() says why, as a node would
            result = await graphql(
                self._schema,
                query,
                root_value=self._root,
                variable_values=request.get("variables"),
                context_value=context,
            )
            document = parse(query)
        else:
            executed = execute(
                self._schema,
                document,
                root_value=self._root,
                variable_values=request.get("variables"),
                context_value=context,
            )
            result = await executed if inspect.isawaitable(executed) else executed
            assert isinstance(result, ExecutionResult)
        operation = document.definitions[0]
        assert isinstance(operation, OperationDefinitionNode)
        self.fields_asked.extend(
            s.name.value for s in operation.selection_set.selections if isinstance(s, FieldNode)
        )
        doc: dict[str, Any] = {"data": result.data}
        if result.errors:
            doc["errors"] = [e.formatted for e in result.errors]
        doc["extensions"] = {"freshness": self.freshness(context["read"])}
        return doc

    def _document(self, query: str) -> DocumentNode | None:
        """`query` parsed and validated, once per text (the gateway sends few texts, many
        times: parsing each again was most of a fake node's time); None when not valid."""
        document = self._documents.get(query)
        if document is None:
            try:
                document = parse(query)
            except GraphQLError:
                return None
            if validate(self._schema, document):
                return None
            self._documents[query] = document
        return document


# -- routing, clients and the gateway over fake nodes -------------------------------------


def split(counts: Mapping[str, int], partitions: int) -> dict[int, dict[str, int]]:
    """`counts` by partition, as the pipeline would have written them."""
    out: dict[int, dict[str, int]] = {p: {} for p in range(partitions)}
    for key, count in counts.items():
        out[partition_for(key, partitions)][key] = count
    return out


def member(
    node_id: str,
    url: str,
    active: Iterable[int],
    heartbeat_ms: int,
    interval_ms: int = 1000,
    state: NodeState = NodeState.RUNNING,
) -> MemberRecord:
    return MemberRecord(
        node_id=node_id,
        url=url,
        state=state,
        heartbeat_ms=heartbeat_ms,
        heartbeat_interval_ms=interval_ms,
        partitions=tuple(PartitionStatus(p, Role.ACTIVE, 100 + p, 100 + p) for p in active),
    )


def table_for(
    claims: Mapping[str, tuple[str, Iterable[int]]],
    partitions: int,
    catalogue: Sequence[View] = FULL,
    heartbeat_ms: int | None = None,
) -> RoutingTable:
    """A routing table where node id -> (url, claimed partitions), all alive, and every view
    of `catalogue` has `partitions` partitions."""
    beat = wall_clock_ms() if heartbeat_ms is None else heartbeat_ms
    members = {
        node_id: member(node_id, url, parts, beat) for node_id, (url, parts) in claims.items()
    }
    return build_routing_table(members, {v.name: partitions for v in catalogue}, beat)


def feed_for(
    nodes: Sequence[FakeNode], partitions: int, catalogue: Sequence[View] = FULL
) -> RoutingFeed:
    """A feed whose table says each fake node owns what it holds."""
    claims = {n.node_id: (n.url(), n.held) for n in nodes}
    return RoutingFeed(table_for(claims, partitions, catalogue))


def client_for(
    nodes: Sequence[FakeNode], extra: Mapping[str, httpx.AsyncBaseTransport] | None = None
) -> httpx.AsyncClient:
    """One httpx client reaching every fake node (and `extra` transports) by its URL."""
    mounts: dict[str, httpx.AsyncBaseTransport] = {
        n.url(): httpx.ASGITransport(app=n) for n in nodes
    }
    mounts.update(extra or {})
    return httpx.AsyncClient(mounts=mounts)


def round_robin(partitions: int, nodes: int) -> list[list[int]]:
    """Partition p goes to node p % nodes."""
    return [[p for p in range(partitions) if p % nodes == i] for i in range(nodes)]


def fake_nodes(
    model: Model, partitions: int, count: int, catalogue: Sequence[View] = (WORDS,)
) -> list[FakeNode]:
    """`count` fake nodes n0, n1, ... holding the partitions round robin."""
    return [
        FakeNode(f"n{i}", model, held, partitions, catalogue)
        for i, held in enumerate(round_robin(partitions, count))
    ]


class LaggingNode(FakeNode):
    """A fake node holding every partition of `counts`, whose copies have applied changelog
    offsets up to `applied` (exclusive): it records each request's `appliedAtLeast` in
    `waits` and refuses one waiting for more with NOT_CAUGHT_UP, as node.reads.catchup does."""

    def __init__(self, applied: int, counts: Mapping[str, int], partitions: int) -> None:
        super().__init__("n1", Model.of_counts(counts), range(partitions), partitions)
        self.applied = applied
        self.waits: list[dict[str, Any]] = []

    async def _graphql(self, request: dict[str, Any]) -> dict[str, Any]:
        wanted = (request.get("extensions") or {}).get("appliedAtLeast")
        if wanted is not None:
            self.waits.append(wanted)
            for partition, offset in wanted["offsets"].items():
                if offset > self.applied:
                    message = f"partition {partition} has applied up to {self.applied}"
                    error = {"message": message, "extensions": {"code": "NOT_CAUGHT_UP"}}
                    return {"errors": [error], "extensions": {"freshness": []}}
        return await super()._graphql(request)


class ServerThread:
    """An ASGI app under a real uvicorn on a loopback port, in a thread, owned by this handle;
    `lifespan="on"` runs the app's start-up (a gateway's) before the server is started."""

    def __init__(
        self,
        app: Callable[..., Any],
        port: int | None = None,
        lifespan: Literal["on", "off"] = "off",
    ) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            loop="asyncio",
            log_level="warning",
            lifespan=lifespan,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self._thread.start()
        wait_until(self._started, 10, f"uvicorn on port {self.port} to start", 0.01)
        return self

    def _started(self) -> bool:
        if not self._thread.is_alive():
            raise RuntimeError(f"uvicorn on port {self.port} stopped before it started")
        return self._server.started

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)


@contextlib.asynccontextmanager
async def running_gateway(
    nodes: Sequence[FakeNode],
    partitions: int,
    config: GatewayConfig | None = None,
    feed: RoutingFeed | None = None,
    extra: Mapping[str, httpx.AsyncBaseTransport] | None = None,
    catalogue: Sequence[View] = (WORDS,),
    statuses: StatusBoard | None = None,
    producer: EventProducer | None = None,
    clock: Callable[[], int] = wall_clock_ms,
) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway app over fake nodes, started, with an httpx client talking to it;
    `producer` and `clock` are the app's seams for the produce mutation and its time."""
    upstream = client_for(nodes, extra)
    app = GatewayApp(
        config or GatewayConfig(),
        feed=feed or feed_for(nodes, partitions, catalogue),
        client=upstream,
        statuses=statuses,
        catalogue=catalogue,
        producer=producer,
        clock=clock,
    )
    await app.startup()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http
    finally:
        await app.shutdown()
        await upstream.aclose()


async def post_query(
    http: httpx.AsyncClient, query: str, variables: Mapping[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    response = await http.post("/graphql", json={"query": query, "variables": variables})
    return response.status_code, response.json()


def top_truth(counts: Mapping[str, int], limit: int) -> list[dict[str, Any]]:
    ranked = sorted(counts.items(), key=lambda kc: (-kc[1], kc[0]))[:limit]
    return [{"word": k, "count": c} for k, c in ranked]


def codes(body: Mapping[str, Any]) -> list[str]:
    """The `extensions.code` of every error of a response body."""
    return [e["extensions"]["code"] for e in body.get("errors", [])]
