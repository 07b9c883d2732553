"""The whole-view field of every view kind: its rows in key order, a Relay connection
across every partition (gateway.model.scans merges the partitions' slices, gateway.model.cursors
says what a cursor holds).

```graphql
type WordCountEdge { cursor: String!  node: WordCount! }
type WordCountConnection { edges: [WordCountEdge!]!  pageInfo: PageInfo! }
allWordCounts(first: Int, after: String, last: Int, before: String, prefix: String! = "",
              from: String, to: String, order: ScanOrder! = KEY, maxLag: Int,
              atLeast: String): WordCountConnection!       # `order`: count views only
allHostAccessWindows(first, after, last, before, prefix, from, to,
                     order: WindowScanOrder! = KEY, startFrom: DateTime, startTo: DateTime,
                     window: WindowInput, maxLag, atLeast): HostAccessWindowConnection!
```

A windowed view pages by (key, start) (KEY), by (start, key) over the windows with
startFrom <= start < startTo (START), or one `window`'s keys by count desc, then key (COUNT:
the deep pages of its top-N).
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
import enum
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, NamedTuple

import strawberry

from gateway.api.fields.common import (
    AtLeast,
    MaxLag,
    PageInfo,
    ScanType,
    WindowInput,
    authorize_view,
    given,
    make,
    object_type,
    read_options,
    record_failures,
)
from gateway.api.request import RequestContext
from gateway.model import inputs
from gateway.model.cursors import (
    COUNT_ORDER,
    KEY_ORDER,
    START_ORDER,
    ScanFilter,
    result_order,
)
from gateway.model.errors import BadRequestError
from gateway.model.prices import DEFAULT_SCAN_PAGE
from gateway.model.scans import ScanEdge, ScanPage
from gateway.model.timestamps import ceil_ms, floor_ms
from gateway.reads.protocol import ScanAsk
from schema import KeyType, RecordKey, View

__all__ = [
    "ScanField",
    "ScanOrder",
    "WindowScanOrder",
    "check_scan_bounds",
    "connection_types",
    "scan_field",
]


@strawberry.enum(description="The order of a whole-view scan.")
class ScanOrder(enum.Enum):
    KEY = strawberry.enum_value(
        KEY_ORDER, description="By key: the byte order of its UTF-8, or numeric for numbers."
    )
    COUNT = strawberry.enum_value(
        COUNT_ORDER, description="By count, highest first, then by key (count views)."
    )


@strawberry.enum(description="The order of a whole-view scan of a windowed view.")
class WindowScanOrder(enum.Enum):
    KEY = strawberry.enum_value(KEY_ORDER, description="By key, then window start.")
    START = strawberry.enum_value(
        START_ORDER, description="By window start, then key (startFrom <= start < startTo)."
    )
    COUNT = strawberry.enum_value(
        COUNT_ORDER, description="One `window`'s keys by count, highest first, then by key."
    )


_ORDERS = {ScanOrder.KEY: KEY_ORDER, ScanOrder.COUNT: COUNT_ORDER}
_WINDOW_ORDERS = {
    WindowScanOrder.KEY: KEY_ORDER,
    WindowScanOrder.START: START_ORDER,
    WindowScanOrder.COUNT: COUNT_ORDER,
}

KeyBound = Annotated[str | None, strawberry.argument(name="from")]
KeyEnd = Annotated[str | None, strawberry.argument(name="to")]
StartFrom = Annotated[datetime | None, strawberry.argument(name="startFrom")]
StartTo = Annotated[datetime | None, strawberry.argument(name="startTo")]


def _window_filter(
    view: View,
    spec: ScanFilter,
    order: WindowScanOrder,
    starts: tuple[datetime | None, datetime | None],
    window: datetime | None,
) -> ScanFilter:
    """The filter of a windowed view's scan: window starts from startFrom and startTo (START)
    or from the one `window` (COUNT); BAD_USER_INPUT for arguments of another order."""
    if order is not WindowScanOrder.START and starts != (None, None):
        raise BadRequestError(view.name, "startFrom and startTo apply to order: START only")
    if order is not WindowScanOrder.COUNT and window is not None:
        raise BadRequestError(view.name, "window applies to order: COUNT only")
    if order is WindowScanOrder.START:
        span = inputs.time_range(view, *starts)
        return ScanFilter(spec.prefix, spec.since, spec.until, _ms(span.since), _ms(span.until))
    if order is WindowScanOrder.COUNT:
        if window is None:
            raise BadRequestError(
                view.name, "order: COUNT needs a window, e.g. window: {start: ...}"
            )
        assert view.window is not None
        start = floor_ms(inputs.window_start(view, window))
        return ScanFilter(spec.prefix, spec.since, spec.until, start, start + view.window.hop_ms)
    return spec


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else ceil_ms(moment)


def connection_types(view: View, node_type: Any, what: str) -> tuple[Any, Any]:
    """`<Type>Edge { cursor node }` and `<Type>Connection { edges pageInfo }` of `node_type`,
    whose pages are `what`."""
    name = view.type_name
    edge_type = object_type(
        view,
        f"{name}Edge",
        f"A row of view {view.name} and its cursor.",
        [("cursor", str, None), ("node", node_type, None)],
    )
    connection_type = object_type(
        view,
        f"{name}Connection",
        f"A page of {what}.",
        [("edges", list[edge_type], None), ("pageInfo", PageInfo, None)],  # type: ignore[valid-type]
    )
    return edge_type, connection_type


class _LazyEdge:
    """Stands for an instance of a connection's edge type, whose fields read the attributes
    `f_cursor` and `f_node` (`make`): the cursor is encoded only when the query selects it,
    which costs ~12 us an edge."""

    __slots__ = ("edge", "f_node", "page")

    def __init__(self, page: ScanPage, edge: ScanEdge, node: Any) -> None:
        self.page, self.edge, self.f_node = page, edge, node

    @property
    def f_cursor(self) -> str:
        return self.page.cursor(self.edge)


def _check_edge_type(edge_type: Any) -> None:
    """`_LazyEdge` stands for `edge_type`: fail at start-up if their attributes differ."""
    names = {f.graphql_name: f.python_name for f in edge_type.__strawberry_definition__.fields}
    if names != {"cursor": "f_cursor", "node": "f_node"}:
        raise TypeError(f"{edge_type.__name__} is no edge type of f_cursor and f_node: {names}")


def _key_order(view: View) -> str:
    if isinstance(view.key_type, RecordKey):
        fields = ", ".join(view.key_type.names)
        return f"by {fields}: strings in the byte order of their UTF-8, numbers numerically"
    if view.key_type is KeyType.STRING:
        return f"the byte order of the UTF-8 {view.key_field}"
    return f"numeric order: the {view.key_field}s are of type {view.key_type.value}"


def _bounds(view: View) -> str:
    key = view.key_field
    if view.key_type is KeyType.STRING:
        return f"only {key}s that start with `prefix`, with from <= {key} < to. "
    return "`prefix`, `from` and `to` bound string keys only. "


def check_scan_bounds(view: View, spec: ScanFilter) -> None:
    """`prefix`, `from` and `to` bound string keys; BadRequestError for other key types."""
    if view.key_type is not KeyType.STRING and spec.keyed:
        raise BadRequestError(
            view.name,
            f"prefix, from and to bound string keys, and the {view.key_field}s of view "
            f"{view.name} are of type {view.key_type.value}: page through them without them",
        )


class ScanField(NamedTuple):
    """A view's scan field, and how it reads its arguments and makes its value."""

    fields: dict[str, Any]
    type: ScanType


def _window_start(window: Any) -> datetime | None:
    """The start of a `window` argument: a WindowInput (a resolver's), or the dict
    graphql-core coerces it to (the fast path's)."""
    if window is None:
        return None
    start: datetime = window["start"] if isinstance(window, dict) else window.start
    return start


def _ask_of(view: View, counted: bool, ranked: bool) -> Callable[[Mapping[str, Any]], ScanAsk]:
    """The page a scan of `view` asks, from its arguments by their GraphQL names (a name
    left out or null: None); BAD_USER_INPUT for arguments of another order."""

    def ask(arguments: Mapping[str, Any]) -> ScanAsk:
        get = arguments.get
        spec = ScanFilter(get("prefix") or "", get("from"), get("to"))
        page = (get("first"), get("after"), get("last"), get("before"))
        if view.window is not None:
            order = get("order") or WindowScanOrder.KEY
            starts = (get("startFrom"), get("startTo"))
            spec = _window_filter(view, spec, order, starts, _window_start(get("window")))
            return ScanAsk(spec, *page, _WINDOW_ORDERS[order])
        if ranked:
            by = get("by")
            return ScanAsk(spec, *page, KEY_ORDER if by is None else result_order(by.value))
        if counted:
            return ScanAsk(spec, *page, _ORDERS[get("order") or ScanOrder.KEY])
        return ScanAsk(spec, *page)

    return ask


def scan_field(
    view: View,
    node_type: Any,
    to_type: Callable[[Any], Any],
    types: tuple[Any, Any] | None = None,
    counted: bool = False,
    ranking: Any = None,
) -> ScanField:
    """`view.scan_field`: pages of the view's rows (gateway.model.rows.Scanned of the view's
    kind), each shown as `to_type(row)`, in the
    connection `types` (edge, connection), made here when None; `counted` (count views)
    adds `order`, to page by count instead; `ranking` (an aggregate view's enum of its
    numeric results, `gateway.api.fields.ranked`) adds `by`, to page by one of them."""
    edge_type, connection_type = types or connection_types(
        view, node_type, f"view {view.name} in key order"
    )

    _check_edge_type(edge_type)

    def to_connection(page: ScanPage) -> Any:
        edges = [_LazyEdge(page, e, to_type(e.row)) for e in page.edges]
        info = PageInfo(
            has_next_page=page.has_next_page,
            has_previous_page=page.has_previous_page,
            start_cursor=page.start_cursor,
            end_cursor=page.end_cursor,
        )
        return make(connection_type, {"edges": edges, "pageInfo": info})

    async def answer(info: strawberry.Info, ask: ScanAsk, max_lag: Any, at_least: Any) -> Any:
        context: RequestContext = info.context
        authorize_view(context, view)
        check_scan_bounds(view, ask.scan_filter)
        context.planner.check_scan(view, ask)  # before atLeast's wait
        options = await read_options(context, view, max_lag, at_least)
        result = await context.planner.scan(view, ask, context.deadline, options)
        context.add_freshness(view, result.freshness)
        record_failures(context, info, result.failures)
        return to_connection(result.page)

    ask_of = _ask_of(view, counted, ranking is not None)

    async def scan(
        info: strawberry.Info,
        first: int | None = strawberry.UNSET,
        after: str | None = strawberry.UNSET,
        last: int | None = strawberry.UNSET,
        before: str | None = strawberry.UNSET,
        prefix: str = "",
        since: KeyBound = strawberry.UNSET,
        until: KeyEnd = strawberry.UNSET,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> connection_type:  # type: ignore[valid-type]
        page = _page(first, after, last, before, prefix, since, until)
        return await answer(info, ask_of(page), max_lag, at_least)

    async def scan_in_order(
        info: strawberry.Info,
        first: int | None = strawberry.UNSET,
        after: str | None = strawberry.UNSET,
        last: int | None = strawberry.UNSET,
        before: str | None = strawberry.UNSET,
        prefix: str = "",
        since: KeyBound = strawberry.UNSET,
        until: KeyEnd = strawberry.UNSET,
        order: ScanOrder = ScanOrder.KEY,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> connection_type:  # type: ignore[valid-type]
        page = _page(first, after, last, before, prefix, since, until)
        return await answer(info, ask_of({**page, "order": order}), max_lag, at_least)

    async def scan_windows(
        info: strawberry.Info,
        first: int | None = strawberry.UNSET,
        after: str | None = strawberry.UNSET,
        last: int | None = strawberry.UNSET,
        before: str | None = strawberry.UNSET,
        prefix: str = "",
        since: KeyBound = strawberry.UNSET,
        until: KeyEnd = strawberry.UNSET,
        order: WindowScanOrder = WindowScanOrder.KEY,
        start_from: StartFrom = strawberry.UNSET,
        start_to: StartTo = strawberry.UNSET,
        window: WindowInput | None = strawberry.UNSET,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> connection_type:  # type: ignore[valid-type]
        page = _page(first, after, last, before, prefix, since, until)
        starts = {"startFrom": given(start_from), "startTo": given(start_to)}
        arguments = {**page, "order": order, **starts, "window": given(window)}
        return await answer(info, ask_of(arguments), max_lag, at_least)

    key = view.key_field
    resolver: Callable[..., Any] = scan_in_order if counted else scan
    if ranking is not None:  # the annotation of `by` needs the enum

        async def scan_ranked(
            info: strawberry.Info,
            first: int | None = strawberry.UNSET,
            after: str | None = strawberry.UNSET,
            last: int | None = strawberry.UNSET,
            before: str | None = strawberry.UNSET,
            prefix: str = "",
            since: KeyBound = strawberry.UNSET,
            until: KeyEnd = strawberry.UNSET,
            by: ranking | None = strawberry.UNSET,  # type: ignore[valid-type]
            max_lag: MaxLag = strawberry.UNSET,
            at_least: AtLeast = strawberry.UNSET,
        ) -> connection_type:  # type: ignore[valid-type]
            page = _page(first, after, last, before, prefix, since, until)
            return await answer(info, ask_of({**page, "by": given(by)}), max_lag, at_least)

        resolver = scan_ranked
    if view.window is not None:
        resolver = scan_windows
    field = {
        view.scan_field: strawberry.field(
            resolver=resolver,
            name=view.scan_field,
            description=f"Every row of view {view.name} in {key} order ({_key_order(view)}), "
            f"across all partitions: `first` rows after the cursor `after`, or "
            f"the `last` before `before` (default first {DEFAULT_SCAN_PAGE}); {_bounds(view)}"
            "Rows added or changed while paging "
            "are never repeated nor make others be skipped; a partition that cannot answer is "
            "a PARTITION_UNAVAILABLE error, and the page's cursors resume it."
            + (
                f" `order: COUNT` pages by count (desc, then {key}) instead, without prefix, "
                "from or to; a key whose count changes while paging may move across the "
                "cursor (be missed or come twice)."
                if counted
                else ""
            )
            + (
                f" `by`, a numeric result, pages by it instead (desc, then {key}), without prefix, "
                f"from or to, and without the {key}s that have no value of it; a {key} "
                "whose result changes while paging may move across the cursor."
                if ranking is not None
                else ""
            )
            + (
                " `order: START` pages by window start, then key, over the windows with "
                "startFrom <= start < startTo; `order: COUNT` pages one `window`'s "
                f"{key}s by count (desc, then {key}): the pages past its top-N."
                if view.window is not None
                else ""
            ),
        )
    }
    return ScanField(field, ScanType(view, ask_of, to_connection))


def _page(
    first: Any, after: Any, last: Any, before: Any, prefix: str, since: Any, until: Any
) -> dict[str, Any]:
    """A resolver's page and key bounds, by their GraphQL names."""
    return {
        "first": given(first),
        "after": given(after),
        "last": given(last),
        "before": given(before),
        "prefix": prefix,
        "from": given(since),
        "to": given(until),
    }
