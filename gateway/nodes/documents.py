"""The node subgraph as the gateway speaks it: per view, the documents it sends (built once;
a request only adds variables) and the readers of the answers. Which documents a view has,
and how its rows are read, its kind says (`gateway.api.kinds`) from the parts here.

Lookups of count, latest and aggregate views ask the node's federation `_entities` for a batch of
representations `{"__typename", <key field>}`. Nodes answer under the alias `r`. Keys,
counts, window bounds and event times come back under short aliases (`k`, `c`, `s`, `e`,
`t`) and value fields as `v0`, `v1`, ..., so no field name of a view can collide with
another; a scan's slices come packed in columns of the same names (`ScanColumns`). A
reader raises ValueError for anything the protocol does not allow; the planner turns it
into a NodeProtocolError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from gateway.model.cursors import KEY_ORDER, ScanFilter, ranked_by
from gateway.model.inputs import TimeRange
from gateway.model.rows import (
    Edge,
    Event,
    Page,
    PartialTotal,
    Ranked,
    ResultTotal,
    Row,
    Scanned,
    WindowCount,
)
from gateway.model.scans import ScanSlice
from gateway.model.timestamps import floor_ms, from_ms, iso, iso_ms, parse_utc
from schema import FieldType, ListOf, RecordOf, ValueType, View, field_value, type_text

__all__ = [
    "NodeDocuments",
    "ScanColumns",
    "ViewQueries",
    "aggregate_totals_document",
    "count_columns",
    "count_row",
    "count_selection",
    "event_columns",
    "event_selection",
    "history_document",
    "lookup_document",
    "ranked_top_document",
    "read_event",
    "scan_document",
    "top_document",
    "totals_document",
    "window_columns",
    "window_row",
    "window_selection",
    "windows_document",
    "with_extensions",
]

R = TypeVar("R")

# the JSON types of the values of a packed column of each scalar (None: a missing value);
# a Long, a Decimal, a DateTime and a Date are written as text (schema.fieldtypes)
_STR, _INT, _NONE = frozenset({str}), frozenset({int}), type(None)
_SCALAR_COLUMNS: Mapping[FieldType, type | tuple[type, ...]] = {
    FieldType.INT: int,
    FieldType.FLOAT: (int, float),
    FieldType.BOOLEAN: bool,
}
# the ms since the epoch a datetime can hold (years 1 to 9999)
_MS_RANGE = (floor_ms(datetime.min.replace(tzinfo=UTC)), floor_ms(datetime.max.replace(tzinfo=UTC)))


def _head(document: str) -> bytes:
    """`{"query":...,"variables":` so that a body is this plus the variables plus `}`."""
    return orjson.dumps({"query": document})[:-1] + b',"variables":'


def _body(head: bytes | None, view: View, what: str, variables: dict[str, Any]) -> bytes:
    if head is None:
        raise ValueError(f"view {view.name} ({view.kind.value}) has no {what}")
    return head + orjson.dumps(variables) + b"}"


def with_extensions(body: bytes, extensions: bytes) -> bytes:
    """A body built by ViewQueries (which has no `extensions`) with the request extensions
    `extensions` (a JSON object) added."""
    return body[:-1] + b',"extensions":' + extensions + b"}"


def _span(span: TimeRange) -> dict[str, str | None]:
    return {
        "f": None if span.since is None else iso(span.since),
        "t": None if span.until is None else iso(span.until),
    }


@dataclass(frozen=True)
class NodeDocuments:
    """What a view of one kind asks its nodes (whole documents, "" for what the kind does not
    serve) and how the entries of a lookup and of a top-N are read; made per kind by
    `gateway.api.kinds`."""

    lookup: str = ""
    top: str = ""
    windows: str = ""
    history: str = ""
    history_newest: str = ""
    scan: str = ""
    totals: str = ""
    read_row: Callable[[Any], Row | Event] | None = None
    read_ranked: Callable[[Any], Ranked] | None = None
    scan_columns: ScanColumns | None = None


class ViewQueries:
    """The node documents of one view and the readers of their answers."""

    def __init__(self, view: View, documents: NodeDocuments) -> None:
        self.view = view
        self.documents = documents
        self._heads = {
            name: _head(document) if document else None
            for name, document in (
                ("lookup", documents.lookup),
                ("top", documents.top),
                ("windows", documents.windows),
                ("history", documents.history),
                ("history_newest", documents.history_newest),
                ("scan", documents.scan),
                ("totals", documents.totals),
            )
        }

    # -- bodies ---------------------------------------------------------------------------

    def lookup_body(self, keys: Sequence[str]) -> bytes:
        type_name, key_field = self.view.type_name, self.view.key_field
        representations = [{"__typename": type_name, key_field: key} for key in keys]
        return _body(self._heads["lookup"], self.view, "multi-key lookup", {"r": representations})

    def top_body(
        self,
        limit: int,
        partitions: Sequence[int],
        window: datetime | None = None,
        by: str | None = None,
    ) -> bytes:
        variables: dict[str, Any] = {"l": limit, "p": list(partitions)}
        if window is not None:
            variables["w"] = {"start": iso(window)}
        if by is not None:
            variables["b"] = by
        return _body(self._heads["top"], self.view, "top-N", variables)

    def windows_body(self, key: str, span: TimeRange) -> bytes:
        return _body(self._heads["windows"], self.view, "windows", {"k": key, **_span(span)})

    def history_body(
        self, key: str, span: TimeRange, first: int, after: str | None, newest_first: bool = False
    ) -> bytes:
        variables = {"k": key, **_span(span), "n": first, "a": after}
        head = self._heads["history_newest" if newest_first else "history"]
        return _body(head, self.view, "history", variables)

    def scan_body(
        self,
        starts: Mapping[int, bytes | None],
        first: int,
        backward: bool,
        scan_filter: ScanFilter,
        order: str = KEY_ORDER,
    ) -> bytes:
        slices = [
            {"partition": p, "after": None if at is None else at.hex()} for p, at in starts.items()
        ]
        variables: dict[str, Any] = {
            "s": slices,
            "n": first,
            "b": backward,
            "x": scan_filter.prefix,
            "f": scan_filter.since,
            "t": scan_filter.until,
        }
        by = ranked_by(order)
        if by is not None:
            variables["o"], variables["y"] = "RESULT", by
        elif order != KEY_ORDER:
            variables["o"] = order.upper()
        if scan_filter.timed:
            for name, ms in (("sf", scan_filter.since_ms), ("st", scan_filter.until_ms)):
                variables[name] = None if ms is None else iso_ms(ms)
        return _body(self._heads["scan"], self.view, "scan", variables)

    def totals_body(self, partitions: Sequence[int], span: TimeRange | None) -> bytes:
        variables: dict[str, Any] = {"p": list(partitions)}
        if span is not None:
            variables.update(_span(span))
        return _body(self._heads["totals"], self.view, "totals", variables)

    # -- readers --------------------------------------------------------------------------

    def read_lookup(self, data: Any, asked: int) -> list[Row | Event | None]:
        """One row or None per key asked, in the order asked."""
        read = _reader(self.documents.read_row, self.view, "multi-key lookup")
        if not isinstance(data, list) or len(data) != asked:
            raise ValueError(f"expected a list of {asked} entries")
        return [None if item is None else read(item) for item in data]

    def read_top(self, data: Any) -> list[Ranked]:
        read = _reader(self.documents.read_ranked, self.view, "top-N")
        return [read(item) for item in _list(data)]

    def read_windows(self, data: Any) -> list[WindowCount]:
        return [window_row(self.view, item) for item in _list(data)]

    def read_slices(self, data: Any) -> dict[int, ScanSlice]:
        """Each partition's slice: its rows' positions and columns."""
        columns = self.documents.scan_columns
        if columns is None:
            raise ValueError(f"view {self.view.name} ({self.view.kind.value}) has no scan")
        slices = {}
        for item in _list(data):
            piece = _object(item)
            partition = piece.get("p")
            if not isinstance(partition, int) or isinstance(partition, bool):
                raise ValueError("a slice names no partition")
            slices[partition] = columns.read(piece.get("r"))
        return slices

    def read_totals(self, data: Any) -> list[PartialTotal]:
        """Each partition's total (per window, for windowed views)."""
        found = []
        for item in _list(data):
            doc = _object(item)
            results = "r" in doc  # an aggregate view's: keys and results, no count
            partition, keys, count = doc.get("p"), doc.get("k"), 0 if results else doc.get("c")
            if not isinstance(partition, int) or isinstance(partition, bool):
                raise ValueError("a total names no partition")
            if not all(isinstance(n, int | float) and n >= 0 for n in (keys, count)):
                raise ValueError(f"a total has no keys or count: {doc!r}")
            windowed = "s" in doc
            start = _time(doc, "s") if windowed else None
            end = _time(doc, "e") if windowed else None
            totals = tuple(_result_total(r) for r in _list(doc["r"])) if results else ()
            found.append(PartialTotal(partition, int(keys), int(count), start, end, totals))  # type: ignore[arg-type]
        return found

    def read_page(self, data: Any) -> Page:
        doc = _object(data)
        info = _object(doc.get("pageInfo"))
        more, end = info.get("hasNextPage"), info.get("endCursor")
        if not isinstance(more, bool) or not (end is None or isinstance(end, str)):
            raise ValueError("pageInfo needs hasNextPage (boolean) and endCursor (string or null)")
        edges = []
        for item in _list(doc.get("edges")):
            edge = _object(item)
            cursor = edge.get("cursor")
            if not isinstance(cursor, str):
                raise ValueError("an edge has no cursor")
            edges.append(Edge(cursor, read_event(self.view, edge.get("node"))))
        return Page(edges, more, end)


def _reader(read: Callable[[Any], R] | None, view: View, what: str) -> Callable[[Any], R]:
    if read is None:
        raise ValueError(f"view {view.name} ({view.kind.value}) has no {what}")
    return read


# -- the documents' parts, which each kind puts together (gateway.api.kinds) --------------------


def lookup_document(view: View, selection: str) -> str:
    """A batch lookup by federation `_entities` of the view's type."""
    return (
        f"query($r:[_Any!]!){{r:_entities(representations:$r)"
        f"{{...on {view.type_name}{selection}}}}}"
    )


def top_document(view: View, selection: str, *, windowed: bool) -> str:
    """The view's top-N of some partitions (of one window when `windowed`; by the result
    `$b`, when given, of a windowed aggregate view)."""
    variables = "$l:Int!,$w:WindowInput!,$p:[Int!]" if windowed else "$l:Int!,$p:[Int!]"
    window = ",window:$w" if windowed else ""
    if windowed and view.ranked_fields:
        variables, window = variables + ",$b:String", window + ",by:$b"
    return f"query({variables}){{r:{view.top_field}(limit:$l{window},partitions:$p){selection}}}"


def ranked_top_document(view: View, selection: str) -> str:
    """The view's top-N of some partitions by one numeric field `$b` (aggregate views)."""
    return (
        f"query($l:Int!,$b:String!,$p:[Int!]){{r:{view.top_field}"
        f"(limit:$l,by:$b,partitions:$p){selection}}}"
    )


def windows_document(view: View) -> str:
    """A key's windows in a time range."""
    return (
        f"query($k:String!,$f:DateTime,$t:DateTime){{r:{view.point_field}"
        f"({view.key_field}:$k,from:$f,to:$t){window_selection(view)}}}"
    )


def history_document(view: View, *, newest_first: bool = False) -> str:
    """One page of a key's events in a time range, oldest first, or newest first: only that
    document names `newestFirst`, so a node older than it still serves the others."""
    order = ",newestFirst:true" if newest_first else ""
    return (
        f"query($k:String!,$f:DateTime,$t:DateTime,$n:Int!,$a:String)"
        f"{{r:{view.point_field}({view.key_field}:$k,from:$f,to:$t,first:$n,after:$a{order})"
        f"{{edges{{cursor node{event_selection(view)}}}"
        f"pageInfo{{hasNextPage endCursor}}}}}}"
    )


def scan_document(
    view: View, *, ordered: bool = False, timed: bool = False, ranked: bool = False
) -> str:
    """The next slice of each of some partitions, each from its own position (in the order
    `$o`, KEY unless given, when `ordered`: count and windowed views; within the window
    starts `$sf` to `$st` when `timed`: windowed views; by the result `$y` with order
    RESULT when `ranked`: aggregate views)."""
    ordering = ordered or timed or ranked
    order_variable, order = (",$o:ScanOrder=KEY", ",order:$o") if ordering else ("", "")
    if timed:
        order_variable += ",$sf:DateTime,$st:DateTime"
        order += ",startFrom:$sf,startTo:$st"
    if ranked:
        order_variable += ",$y:String"
        order += ",by:$y"
    return (
        f"query($s:[SliceInput!]!,$n:Int!,$b:Boolean!,$x:String!,$f:String,$t:String"
        f"{order_variable}){{r:{view.scan_field}(slices:$s,first:$n,backward:$b,prefix:$x,"
        f"from:$f,to:$t{order}){{p:partition r:rows}}}}"
    )


def aggregate_totals_document(view: View) -> str:
    """Each asked partition's keys and numeric results' totals of an aggregate view."""
    return (
        f"query($p:[Int!]!){{r:{view.totals_field}(partitions:$p)"
        "{p:partition k:keys r:results{n:name s:sum l:min h:max}}}"
    )


def totals_document(view: View, *, windowed: bool) -> str:
    """Each asked partition's total of the view (per window in a time range when `windowed`)."""
    if windowed:
        return (
            f"query($p:[Int!]!,$f:DateTime,$t:DateTime){{r:{view.totals_field}(partitions:$p,"
            "from:$f,to:$t){p:partition s:start e:end k:keys c:count}}"
        )
    return (
        f"query($p:[Int!]!){{r:{view.totals_field}(partitions:$p){{p:partition k:keys c:count}}}}"
    )


@dataclass(frozen=True)
class ScanColumns:
    """The columns of a kind's packed scan rows after the positions `a` (node.subgraph.fields.scan
    SCAN_ROWS): their names, the Python types each column's values may have, which of them
    are ms since the epoch, and `build`, which makes a row of one value per column."""

    names: tuple[str, ...]
    types: tuple[frozenset[type], ...]
    build: Callable[..., Scanned]
    times: frozenset[str] = frozenset()

    def read(self, packed: Any) -> ScanSlice:
        """One slice's packed rows, every value checked; its rows are built when asked."""
        doc = _object(packed)
        if doc.keys() != {"a", *self.names}:
            raise ValueError(f"packed rows need the columns a, {', '.join(self.names)}")
        positions = _positions(doc["a"])
        columns = []
        for name, allowed in zip(self.names, self.types, strict=True):
            column = doc[name]
            if not isinstance(column, list) or len(column) != len(positions):
                raise ValueError(f"column {name} is no list of one value per position")
            found = set(map(type, column))
            if not found <= allowed:
                kinds = ", ".join(sorted(t.__name__ for t in found - allowed))
                raise ValueError(f"column {name} holds values of type {kinds}")
            if (
                name in self.times
                and column
                and (min(column) < _MS_RANGE[0] or max(column) > _MS_RANGE[1])
            ):
                raise ValueError(f"column {name} holds a time outside years 1 to 9999")
            columns.append(column)
        return ScanSlice(positions, columns, self.build)


def _positions(column: Any) -> list[bytes]:
    """The key tails of a column of positions (lowercase hex)."""
    if not isinstance(column, list) or not set(map(type, column)) <= _STR:
        raise ValueError("positions must be a list of strings")
    try:
        tails = list(map(bytes.fromhex, column))
    except ValueError as exc:
        raise ValueError(f"a position is no hex: {exc}") from exc
    if 2 * sum(map(len, tails)) != sum(map(len, column)):  # fromhex skips spaces
        raise ValueError("a position holds other characters than hex digits")
    return tails


def count_columns() -> ScanColumns:
    """The columns of a count view's scan rows: key and count."""
    return ScanColumns(("k", "c"), (_STR, _INT), Row)


def window_columns(view: View) -> ScanColumns:
    """The columns of a windowed view's scan rows: key, window start and end, count, then
    its results (windowed aggregate views)."""

    def build(key: str, start: int, end: int, count: int, *values: Any) -> WindowCount:
        return WindowCount(key, from_ms(start), from_ms(end), count, _values(view, values))

    values = [f"v{index}" for index in range(len(view.row_fields))]
    types = [_column_types(f.type) for f in view.row_fields]
    return ScanColumns(
        ("k", "s", "e", "c", *values), (_STR, _INT, _INT, _INT, *types), build, frozenset("se")
    )


def event_columns(view: View) -> ScanColumns:
    """The columns of an event view's scan rows: key, event time, then its value fields."""
    names = tuple(f.name for f in view.row_fields)

    def build(key: str, event_ms: int, *values: Any) -> Event:
        return Event(key, from_ms(event_ms), _values(view, values))

    values = [f"v{index}" for index in range(len(names))]
    types = [_column_types(f.type) for f in view.row_fields]
    return ScanColumns(("k", "t", *values), (_STR, _INT, *types), build, frozenset("t"))


def count_selection(view: View) -> str:
    return f"{{k:{view.key_field} c:count}}"


def window_selection(view: View) -> str:
    values = [f"v{i}:{f.name}{_selection(f.type)}" for i, f in enumerate(view.row_fields)]
    return "{" + " ".join([f"k:{view.key_field} s:start e:end c:count", *values]) + "}"


def _column_types(value_type: ValueType) -> frozenset[type]:
    """The JSON types a node writes values of `value_type` with (or null)."""
    if isinstance(value_type, FieldType):
        found = _SCALAR_COLUMNS.get(value_type, str)
        return frozenset({*(found if isinstance(found, tuple) else (found,)), _NONE})
    if isinstance(value_type, ListOf):
        return frozenset({list, _NONE})
    return frozenset({dict if isinstance(value_type, RecordOf) else str, _NONE})


def _values(view: View, values: Sequence[Any]) -> dict[str, Any]:
    """The value fields of a node's event, as GraphQL shows them; ValueError naming a
    field whose value is none of its type."""
    shown = {}
    for spec, value in zip(view.row_fields, values, strict=True):
        shown[spec.name] = field_value(spec.type, value)
        if value is not None and shown[spec.name] is None:
            raise ValueError(f"{spec.name} is no {type_text(spec.type)}: {value!r}")
    return shown


def _selection(value_type: ValueType) -> str:
    """The selection set a field of `value_type` needs: all of a record's fields."""
    if isinstance(value_type, ListOf):
        return _selection(value_type.item)
    if isinstance(value_type, RecordOf):
        return "{" + " ".join(f.name + _selection(f.type) for f in value_type.fields) + "}"
    return ""


def event_selection(view: View) -> str:
    values = [f"v{i}:{f.name}{_selection(f.type)}" for i, f in enumerate(view.row_fields)]
    return "{" + " ".join([f"k:{view.key_field}", "t:eventTime", *values]) + "}"


def read_event(view: View, item: Any) -> Event:
    """An entry of `event_selection(view)`."""
    doc = _object(item)
    values = [doc.get(f"v{index}") for index in range(len(view.row_fields))]
    return Event(_key(doc), _time(doc, "t"), _values(view, values))


def _list(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise ValueError("expected a list")
    return data


def _object(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ValueError(f"expected an object, got {item!r}")
    return item


def _key(doc: dict[str, Any]) -> str:
    key = doc.get("k")
    if not isinstance(key, str):
        raise ValueError(f"no key in {doc!r}")
    return key


def _count(doc: dict[str, Any]) -> int:
    count = doc.get("c")
    if not isinstance(count, int) or isinstance(count, bool):
        raise ValueError(f"no count in {doc!r}")
    return count


def _time(doc: dict[str, Any], alias: str) -> datetime:
    text = doc.get(alias)
    if not isinstance(text, str):
        raise ValueError(f"no DateTime in {doc!r}")
    return parse_utc(text)


def count_row(item: Any) -> Row:
    """An entry of `count_selection`."""
    doc = _object(item)
    return Row(_key(doc), _count(doc))


def window_row(view: View, item: Any) -> WindowCount:
    """An entry of `window_selection(view)`."""
    doc = _object(item)
    values = [doc.get(f"v{index}") for index in range(len(view.row_fields))]
    return WindowCount(
        _key(doc), _time(doc, "s"), _time(doc, "e"), _count(doc), _values(view, values)
    )


def _result_total(item: Any) -> ResultTotal:
    doc = _object(item)
    name, values = doc.get("n"), [doc.get(k) for k in ("s", "l", "h")]
    if not isinstance(name, str) or not all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values
    ):
        raise ValueError(f"a result total is not a name and numbers: {doc!r}")
    total, least, greatest = (None if v is None else float(v) for v in values)
    return ResultTotal(name, total, least, greatest)
