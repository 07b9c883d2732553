"""What the per-kind builders share: what a builder makes of a view (`ViewFields`), object
types made from catalogue entries, the shared GraphQL types (WindowInput, PageInfo), and
recording partial results on the request."""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

import strawberry
from strawberry.federation.schema_directives import Key, Shareable

from gateway.api.fields.keys import key_fields, key_names, key_values
from gateway.api.request import KeyResult, RequestContext
from gateway.cluster.consistency import parse_token, wait_processed
from gateway.cluster.readtoken import ReadPositions, is_read_token
from gateway.model.errors import BadRequestError, ForbiddenError, RoutingError
from gateway.model.rows import Event, Page
from gateway.model.scans import ScanPage
from gateway.reads.protocol import KeyRead, ReadOptions, ScanAsk, TotalsResult
from runtime.valuetypes import annotation
from schema import View

__all__ = [
    "EVENT_TIME",
    "AtLeast",
    "Entity",
    "FieldSpec",
    "MaxLag",
    "PageInfo",
    "PageType",
    "ScanType",
    "TotalsType",
    "ViewFields",
    "WindowInput",
    "attribute",
    "authorize",
    "authorize_view",
    "duration_text",
    "entity_key",
    "event_type",
    "event_values",
    "given",
    "make",
    "object_type",
    "read_options",
    "record_failures",
    "record_key_read",
    "record_missing",
]

EVENT_TIME = "eventTime"

FieldSpec = tuple[str, Any, str | None]  # GraphQL name, annotation, description


@dataclass(frozen=True)
class Entity:
    """A view's type as a federation entity, `@key(fields: "<key field>")`. `values(row)`:
    the instance's field values by GraphQL name, of a row found; `convert` makes the
    instance from them (None for no row)."""

    view: View
    type: Any
    values: Callable[[Any], dict[str, Any]]

    def convert(self, row: Any) -> Any:
        return None if row is None else make(self.type, self.values(row))


@dataclass(frozen=True)
class RowType:
    """A view's type that is no federation entity (a windowed view's window): `convert`
    makes an instance from a row a read found."""

    view: View
    type: Any
    convert: Callable[[Any], Any]


@dataclass(frozen=True)
class PageType:
    """What a history view's field makes of the page of a key's events a read found
    (`convert`): the connection of its point field, or the one event its `asOf` field
    asks (`as_of`: the newest at or before `at`, or None)."""

    view: View
    convert: Callable[[Page], Any]
    as_of: bool = False


@dataclass(frozen=True)
class TotalsType:
    """A view's totals field: `convert` makes its value from the totals read."""

    view: View
    convert: Callable[[TotalsResult], Any]


@dataclass(frozen=True)
class ScanType:
    """A view's scan field: `ask` reads the page its arguments ask (by their GraphQL
    names), `convert` makes its connection from the page read."""

    view: View
    ask: Callable[[Mapping[str, Any]], ScanAsk]
    convert: Callable[[ScanPage], Any]


@dataclass(frozen=True)
class ViewFields:
    """What a kind's builder makes of a view: its Query fields, its entity if it has one
    (else its row type, if it has one), what its fields of a key's events, its totals field
    and its scan field make of their reads if it has them, and its Subscription fields
    (`gateway.api.fields.live`)."""

    fields: dict[str, Any]
    entity: Entity | None = None
    subscriptions: dict[str, Any] = field(default_factory=dict)
    row_type: RowType | None = None
    page_types: tuple[PageType, ...] = ()
    totals_type: TotalsType | None = None
    scan_type: ScanType | None = None


MaxLag = Annotated[
    int | None,
    strawberry.argument(
        name="maxLag",
        description="When the active copy of a partition cannot answer, read a standby at "
        "most this many changelog records behind (0 = no lag: only a standby the node proves "
        "current for the read; default: the gateway's STATEFED_GATEWAY_MAX_LAG). "
        "extensions.freshness says which copy answered.",
    ),
]
AtLeast = Annotated[
    str | None,
    strawberry.argument(
        name="atLeast",
        description="A consistency token (from the produce mutation, or <topic>:<partition>:"
        "<offset> of your own write): answer only once that write is visible; or a read "
        "token (extensions.readToken of an earlier answer, from any gateway): answer nothing "
        "older than that answer. Fails with CONSISTENCY_TIMEOUT at the request's deadline.",
    ),
]


def authorize(context: RequestContext, scope: str | None, what: str) -> None:
    """ForbiddenError unless the request's principal holds `scope` (None: anyone may)."""
    principal = context.principal
    if scope is not None and scope not in principal.scopes:
        subject = f"the token of {principal.subject!r}" if principal.authenticated else "anonymous"
        raise ForbiddenError(what, scope, subject)


def authorize_view(context: RequestContext, view: View) -> None:
    """ForbiddenError unless the principal may read `view`: the first thing every field of
    a view resolves (and `_entities` per entity), so a forbidden field fails alone."""
    if view.scope is not None:
        authorize(context, view.scope, f"view {view.name}")


async def read_options(
    context: RequestContext, view: View, max_lag: int | None, at_least: str | None
) -> ReadOptions:
    """The read options of a field's `maxLag` and `atLeast` arguments; waits for the
    pipeline to have processed the `atLeast` write."""
    max_lag, at_least = given(max_lag), given(at_least)
    if max_lag is not None and max_lag < 0:
        raise BadRequestError(view.name, f"maxLag must be 0 or more, got {max_lag}")
    caller = context.principal.subject
    if at_least is None:
        return ReadOptions(max_lag, caller=caller)
    if is_read_token(at_least):
        seen = ReadPositions.parse(view, at_least)
        context.positions.merge(seen)  # the answer's token is never older than this one
        return ReadOptions(max_lag, seen.applied_at_least(view), caller)
    # a view's input topic has its changelog's partition count (runtime.topics checks it)
    known = context.feed.current.partition_counts.get(view.name)
    token = parse_token(view, at_least, known)
    applied = await wait_processed(context.statuses, view, token, context.deadline)
    return ReadOptions(max_lag, applied, caller)


def entity_key(view: View) -> Key:
    """`@key(fields: "<key fields>")`: an entity of the view is found by its key alone."""
    return Key(fields=" ".join(key_names(view)))  # type: ignore[arg-type]


@strawberry.input(
    description="One window, named by its start (UTC): a whole multiple of the window size "
    "since the epoch, or of the slide for hopping windows."
)
class WindowInput:
    start: datetime


# @shareable: Relay's PageInfo is defined by many subgraphs of a supergraph
@strawberry.type(
    description="Where a page of a connection ends, and whether more follows.",
    directives=[Shareable()],
)
class PageInfo:
    has_next_page: bool
    end_cursor: str | None = strawberry.field(
        default=None,
        description="Pass as `after` to get the next page; null when the page is empty (a "
        "page of a scan whose partitions did not all answer has one: it resumes them).",
    )
    has_previous_page: bool = strawberry.field(
        default=False,
        description="Whether rows come before the page: known when paging backwards (`last`), "
        "else false.",
    )
    start_cursor: str | None = strawberry.field(
        default=None,
        description="Pass as `before` to get the page before; null when the page is empty.",
    )


def attribute(name: str) -> str:
    """The attribute that holds field `name` of an instance `make` made."""
    # GraphQL names from the catalogue may be Python keywords (`from`): prefix them
    return f"f_{name}"


def object_type(
    view: View,
    name: str,
    description: str,
    fields: Sequence[FieldSpec],
    directives: Sequence[object] = (),
) -> Any:
    """A GraphQL object type `name` with `fields`; instances are built with `make`."""
    names = [field[0] for field in fields]
    if len(set(names)) != len(names):
        raise ValueError(f"view {view.name}: type {name} would repeat a field: {names}")
    namespace: dict[str, Any] = {"__annotations__": {}}
    for field_name, field_annotation, field_description in fields:
        namespace["__annotations__"][attribute(field_name)] = field_annotation
        namespace[attribute(field_name)] = strawberry.field(
            name=field_name, description=field_description
        )
    return strawberry.type(
        type(name, (), namespace), description=description, directives=directives
    )


def make(object_class: Any, values: Mapping[str, Any]) -> Any:
    """An instance of a class from `object_type`, from values by GraphQL field name."""
    return object_class(**{attribute(name): value for name, value in values.items()})


def event_type(view: View, name: str, description: str, directives: Sequence[object] = ()) -> Any:
    """The type of one event of a latest or history view: key, value fields, event time."""
    fields: list[FieldSpec] = key_fields(view)
    fields.extend((f.name, annotation(f.type) | None, None) for f in view.row_fields)
    fields.append((EVENT_TIME, datetime, "When the event happened (UTC)."))
    return object_type(view, name, description, fields, directives)


def event_values(view: View, event: Event) -> dict[str, Any]:
    """The field values of `event_type(view, ...)` for `event`."""
    values = {f.name: event.values.get(f.name) for f in view.row_fields}
    return {**key_values(view, event.key), **values, EVENT_TIME: event.event_time}


def given(value: Any) -> Any:
    """An optional argument's value, None when the client left it out."""
    return None if value is strawberry.UNSET else value


def duration_text(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def record_missing(
    context: RequestContext, info: strawberry.Info, results: Sequence[KeyResult]
) -> None:
    """One PARTITION_UNAVAILABLE error per partition that some looked-up keys are in."""
    keyed = ((r.key, r.partition, r.error) for r in results)
    context.add_missing_keys(info.path.as_list(), keyed)


def record_failures(
    context: RequestContext, info: strawberry.Info, failures: Mapping[int, RoutingError]
) -> None:
    path = info.path.as_list()
    for partition, error in sorted(failures.items()):
        context.add_missing(path, partition, error, ())


def record_key_read(
    context: RequestContext, info: strawberry.Info, view: View, read: KeyRead[Any]
) -> None:
    context.add_freshness(view, read.freshness)
    if read.failure is not None:
        context.add_missing(info.path.as_list(), read.partition, read.failure, [read.key])
