"""The GraphQL names a catalogue puts in the gateway's and the nodes' schemas, and the checks
that none of them clashes.

A view makes types named from its `type_name` (`WordCount`, `WordCountConnection`,
`WordCountUpdate`, ...: `ViewNames.types`), shows the records and enums of its value
fields, and defines root fields (`wordCount`, `allWordCounts`, ...). The schemas define
types and fields of their own whatever the catalogue (`RESERVED_TYPE_NAMES`,
`RESERVED_QUERY_FIELDS`). GraphQL, and strawberry with it, takes two types of one name for
one, so a clash would make a broken schema or stop the gateway at start; the checks refuse
it when the catalogue is loaded instead, naming the views and what to rename:

- `check_view_names`, for one view (`View.__post_init__`): no name of statefed's own, no
  key named like an argument of its lookups, no field named like one statefed adds to a
  type, no record or enum named like a type the view makes;
- `check_catalogue`, across the views (`load_catalogue`): each type name made once, records
  and enums of one name defined alike (then they are one type), each root field once, and
  the fields of each type distinct.

tests/schema/test_names.py builds both schemas and checks that they hold these names and no
others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from schema.aggregates import EVENT_TIME, Aggregate
from schema.fieldtypes import EnumOf, FieldType, ListOf, RecordOf, ValueField, ValueType
from schema.keytypes import KeyType
from schema.recordkeys import RecordKey
from schema.windows import WindowSpec

__all__ = [
    "RESERVED_QUERY_FIELDS",
    "RESERVED_TYPE_NAMES",
    "TypeName",
    "ViewNames",
    "check_catalogue",
    "check_view_names",
    "view_names",
]

# the types both schemas define whatever the catalogue: GraphQL's and statefed's scalars
# (a value field's type), statefed's own types and Apollo Federation's
RESERVED_TYPE_NAMES: frozenset[str] = frozenset(
    {
        "ID",  # GraphQL's own, which a schema defines once it uses it
        *(field_type.value for field_type in FieldType),  # String, Int, Long, ..., Date
        "JSON", "PageInfo", "Query", "ScanOrder", "WindowInput",  # both schemas
        "Cluster", "ClusterNode", "ClusterPartition", "ClusterView", "Freshness",  # gateway
        "Mutation", "NodeState", "Produced", "ResultTotals", "Role", "Subscription",
        "Totals", "ViewKind", "WindowScanOrder", "WindowTotals",
        "PartitionAggregateTotal", "PartitionTotal", "PartitionWindowTotal",  # node
        "ResultTotal", "SliceInput",
        "_Any", "_Entity", "_FieldSet", "_Service", "link__Import", "link__Purpose",
    }
)  # fmt: skip
# the gateway's root Query fields of its own (the node's are federation's two)
RESERVED_QUERY_FIELDS: frozenset[str] = frozenset({"cluster", "_entities", "_service"})

# what the lookups of a key take besides it: every view's (its key's subscriptions take
# `after`), a windowed view's range, a history view's pages and `<point>AsOf`'s `at`
_LOOKUP_ARGUMENTS = ("maxLag", "atLeast", "after")
_WINDOW_ARGUMENTS = ("from", "to")
_PAGE_ARGUMENTS = ("from", "to", "first", "after", "newestFirst", "at")
# the fields statefed puts in a view's types besides the key's and the values'
_WINDOW_FIELDS = ("start", "end", "count")
_UPDATE_FIELDS = ("deleted", "offset", "token", "freshness")


class View(Protocol):
    """What of a view (`schema.views.View`, which runs these checks) its names come from."""

    @property
    def name(self) -> str: ...
    @property
    def type_name(self) -> str: ...
    @property
    def key_field(self) -> str: ...
    @property
    def key_type(self) -> KeyType | RecordKey: ...
    @property
    def point_field(self) -> str: ...
    @property
    def many_field(self) -> str: ...
    @property
    def top_field(self) -> str: ...
    @property
    def window(self) -> WindowSpec | None: ...
    @property
    def aggregates(self) -> tuple[Aggregate, ...]: ...
    @property
    def key_names(self) -> tuple[str, ...]: ...
    @property
    def row_fields(self) -> tuple[ValueField, ...]: ...
    @property
    def ranked_fields(self) -> tuple[str, ...]: ...
    @property
    def scan_field(self) -> str: ...
    @property
    def as_of_field(self) -> str: ...
    @property
    def totals_field(self) -> str: ...
    @property
    def graphql_names(self) -> ViewNames: ...


class TypeName(NamedTuple):
    """A GraphQL type a view makes: `name`, what in the view names it (`origin`), the
    fields the view declares (its key's, its values or results) and those statefed adds."""

    name: str
    origin: str
    declared: tuple[str, ...] = ()
    added: tuple[str, ...] = ()


@dataclass(frozen=True)
class ViewNames:
    """The GraphQL names one view puts in the gateway's and the node's schemas: the types it
    makes, the records and enums its rows show (nested ones too), its root Query fields
    with what names each (its Subscription fields and the node's are among them), and the
    arguments its key's lookups take besides the key."""

    types: tuple[TypeName, ...]
    value_types: tuple[EnumOf | RecordOf, ...]
    query_fields: tuple[tuple[str, str], ...]
    key_arguments: tuple[str, ...]


def view_names(view: View, *, many: bool, top: bool, counted: bool, pages: bool) -> ViewNames:
    """The names `view` gives the schemas; its kind has a multi-key lookup (`many`), a
    top-N and totals (`top`), a count in its type (`counted`) or pages of a key's events
    (`pages`)."""
    fields = [(view.point_field, "point_field")]
    if many:
        fields.append((view.many_field, "many_field"))
    if top:
        fields.append((view.top_field, "top_field"))
    fields.append((view.scan_field, "scan field (all + many_field, or point_field)"))
    if top:
        fields.append((view.totals_field, "totals field (type_name + Totals)"))
    if pages:
        fields.append((view.as_of_field, "point_field + AsOf"))
    arguments = _LOOKUP_ARGUMENTS + (_WINDOW_ARGUMENTS if view.window else ())
    arguments += _PAGE_ARGUMENTS if pages else ()
    return ViewNames(
        tuple(_types(view, top=top, counted=counted)),
        tuple(_value_types(view.row_fields)),
        tuple(fields),
        tuple(dict.fromkeys(arguments)),
    )


def _types(view: View, *, top: bool, counted: bool) -> Iterator[TypeName]:
    """The types the gateway (`gateway.api.fields`) and the node (`node.subgraph.fields`)
    make for `view`."""
    declared, added = _own_fields(view, counted)
    name = view.type_name
    # the node's shows a record key as one field, named key_field: both schemas' fields here
    node_key = () if view.key_field in view.key_names else (view.key_field,)
    yield TypeName(name, "its type_name", (*node_key, *declared), added)
    yield _made(name, "Connection", "its scan's pages", (), ("edges", "pageInfo"))
    yield _made(name, "Edge", "its scan's rows", (), ("cursor", "node"))
    yield _made(name, "Slice", "the node's part of its scan", (), ("partition", "rows"))
    yield _made(name, "Update", "its subscriptions' updates", declared, added + _UPDATE_FIELDS)
    if top:
        yield _made(name, "Top", "its top-N subscription", (), ("rows", "token", "freshness"))
    if view.ranked_fields:
        yield _made(name, "Ranking", "the results its top-N ranks by", view.ranked_fields, ())
    if view.aggregates and view.window is None:
        yield _made(name, "Totals", "its totals", view.ranked_fields, ("keys",))
    if isinstance(view.key_type, RecordKey):
        yield _made(name, "Key", "its record key's input", view.key_names, ())


def _own_fields(view: View, counted: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields of the view's own type the view declares, and those statefed adds: its
    key's, then a window's and its results, its count, or its values (or results) and the
    newest event time."""
    values = tuple(f.name for f in view.row_fields)
    if view.window is not None:
        return (*view.key_names, *values), _WINDOW_FIELDS
    if counted:
        return view.key_names, ("count",)
    return (*view.key_names, *values), (EVENT_TIME,)


def _made(
    type_name: str, suffix: str, role: str, declared: tuple[str, ...], added: tuple[str, ...]
) -> TypeName:
    origin = f"type_name {type_name!r} + {suffix!r}: {role}"
    return TypeName(f"{type_name}{suffix}", origin, declared, added)


def _value_types(fields: Iterable[ValueField]) -> Iterator[EnumOf | RecordOf]:
    """The records and enums of `fields`, nested ones too, each time one is named."""
    for field in fields:
        yield from _named_in(field.type)


def _named_in(value_type: ValueType) -> Iterator[EnumOf | RecordOf]:
    if isinstance(value_type, ListOf):
        yield from _named_in(value_type.item)
    elif isinstance(value_type, EnumOf):
        yield value_type
    elif isinstance(value_type, RecordOf):
        yield value_type
        yield from _value_types(value_type.fields)


def _what(value_type: EnumOf | RecordOf) -> str:
    return "enum" if isinstance(value_type, EnumOf) else "record"


def _a(value_type: EnumOf | RecordOf) -> str:
    return "an enum" if isinstance(value_type, EnumOf) else "a record"


def check_view_names(view: View) -> None:
    """ValueError naming `view` and what to rename if one of its names is statefed's own,
    or clashes with another name the view makes."""
    names = view.graphql_names
    _check_reserved_types(view.name, names)
    _check_own_value_types(view.name, names)
    _check_added_fields(view, names)
    if view.key_field in names.key_arguments:
        raise ValueError(
            f"view {view.name}: key_field {view.key_field!r} names the key's argument of "
            f"its lookups, which also take {', '.join(names.key_arguments)}: rename "
            f"key_field (e.g. {view.key_field + 'Key'!r})"
        )
    _check_query_fields(view.name, names)


def _check_reserved_types(view: str, names: ViewNames) -> None:
    for made in names.types:
        if made.name in RESERVED_TYPE_NAMES:
            raise ValueError(
                f"view {view}: type {made.name} ({made.origin}) is a type statefed's "
                f"schemas define themselves: choose another type_name"
            )
    for value_type in names.value_types:
        if value_type.name in RESERVED_TYPE_NAMES:
            what = _what(value_type)
            raise ValueError(
                f"view {view}: {what} {value_type.name} of its value fields is named like a "
                f"type statefed's schemas define themselves: rename the {what}"
            )


def _check_own_value_types(view: str, names: ViewNames) -> None:
    made = {t.name: t for t in names.types}
    seen: dict[str, EnumOf | RecordOf] = {}
    for value_type in names.value_types:
        what, name = _what(value_type), value_type.name
        if name in made:
            raise ValueError(
                f"view {view}: {what} {name} of its value fields is named like type {name} "
                f"the view makes ({made[name].origin}): rename the {what}"
            )
        if seen.setdefault(name, value_type) != value_type:
            raise ValueError(
                f"view {view}: its value fields show {_a(seen[name])} {name} and "
                f"{_a(value_type)} {name} of different definitions, and GraphQL shows one type per "
                f"name: give them the same definition (then they are one type) or different "
                f"names"
            )


def _check_added_fields(view: View, names: ViewNames) -> None:
    for made in names.types:
        clashes = [name for name in made.declared if name in made.added]
        if clashes:
            what = _declared_as(view, clashes[0])[0]
            raise ValueError(
                f"view {view.name}: {what} {clashes[0]!r} would be a field of type "
                f"{made.name} twice, as statefed puts {', '.join(made.added)} in it: "
                f"rename the {what}"
            )


def _declared_as(view: View, field: str) -> list[str]:
    """What in `view` declares `field`: a key field (or key_field, which a record key's
    type shows in the node), an aggregate or a value field."""
    found = []
    if field in view.key_names:
        found.append("key field")
    elif field == view.key_field:
        found.append("key_field")
    if field in {f.name for f in view.row_fields}:
        found.append("aggregate" if view.aggregates else "value field")
    return found


def _check_query_fields(view: str, names: ViewNames) -> None:
    seen: dict[str, str] = {}
    for field, origin in names.query_fields:
        if field in RESERVED_QUERY_FIELDS:
            raise ValueError(
                f"view {view}: {origin} {field!r} is a field the gateway defines itself "
                f"({', '.join(sorted(RESERVED_QUERY_FIELDS))}): rename it"
            )
        if field in seen:
            raise ValueError(
                f"view {view}: field {field!r} would be defined twice, as its "
                f"{seen[field]} and as its {origin}: rename one of them"
            )
        seen[field] = origin


def check_catalogue(views: Sequence[View]) -> None:
    """ValueError naming the views and what to rename if two names the schemas need distinct
    are not: the fields of one of a view's types, types (records and enums of one
    definition are one type), or root fields."""
    for view in views:
        _check_declared_fields(view)
    _check_types_across(views)
    _check_fields_across(views)


def _check_declared_fields(view: View) -> None:
    """Refuse a field the view declares twice in one of its types: a value field (or
    aggregate) named like a key field, or two value fields of one name."""
    for made in view.graphql_names.types:
        twice = [name for name in made.declared if made.declared.count(name) > 1]
        if twice:
            found = _declared_as(view, twice[0])
            what = " and ".join(found) if len(found) > 1 else f"{found[0]}s"
            raise ValueError(
                f"view {view.name}: type {made.name} would have two fields named "
                f"{twice[0]!r} ({what}): rename one of them"
            )


def _check_types_across(views: Sequence[View]) -> None:
    seen: dict[str, tuple[str, TypeName | EnumOf | RecordOf]] = {}
    for view in views:
        names = view.graphql_names
        for named in (*names.types, *names.value_types):
            first = seen.setdefault(named.name, (view.name, named))
            if first[0] != view.name and _clash(first[1], named):
                raise ValueError(_types_clash(named.name, first, (view.name, named)))


def _clash(a: TypeName | EnumOf | RecordOf, b: TypeName | EnumOf | RecordOf) -> bool:
    """Whether two views' types of one name clash: a record or an enum is shared by the
    views that define it alike, a type made from a type_name by none."""
    return isinstance(a, TypeName) or isinstance(b, TypeName) or a != b


def _types_clash(
    name: str,
    first: tuple[str, TypeName | EnumOf | RecordOf],
    second: tuple[str, TypeName | EnumOf | RecordOf],
) -> str:
    (view_a, a), (view_b, b) = first, second
    if not isinstance(a, TypeName) and not isinstance(b, TypeName):
        return (
            f"views {view_a} and {view_b} show {_a(a)} {name} and {_a(b)} {name} "
            f"of different definitions, and GraphQL shows one type per name: give them the "
            f"same definition (a record's fields, types and sources, an enum's symbols: then "
            f"they are one type) or different names"
        )
    return (
        f"views {view_a} and {view_b} both make GraphQL type {name} ({view_a}: "
        f"{_origin(a)}; {view_b}: {_origin(b)}), and GraphQL takes them for one type: "
        f"{_fix(view_a, a)}, or {_fix(view_b, b)}"
    )


def _origin(named: TypeName | EnumOf | RecordOf) -> str:
    if isinstance(named, TypeName):
        return named.origin
    return f"{_a(named)} of its value fields"


def _fix(view: str, named: TypeName | EnumOf | RecordOf) -> str:
    what = "type_name" if isinstance(named, TypeName) else _what(named)
    return f"rename the {what} of view {view}"


def _check_fields_across(views: Sequence[View]) -> None:
    seen: dict[str, tuple[str, str]] = {}
    for view in views:
        for field, origin in view.graphql_names.query_fields:
            if field in seen:
                other, other_origin = seen[field]
                raise ValueError(
                    f"views {other} and {view.name} both define field {field!r} ({other}: "
                    f"{other_origin}; {view.name}: {origin}): rename one of them"
                )
            seen[field] = (view.name, origin)
