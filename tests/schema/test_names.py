"""The GraphQL names of a catalogue (schema.names): the names the built schemas hold are the
reserved ones and those the views make, and every clash is refused when the catalogue is
loaded, naming the views and what to rename."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest
import strawberry
from graphql import GraphQLEnumType, GraphQLError, GraphQLInputObjectType, GraphQLObjectType

from gateway.api.fields.ranked import ranking_name
from gateway.api.schema import build_schema
from node.subgraph.schema import build_subgraph
from schema import (
    CATALOGUE,
    WORD_COUNTS,
    Aggregate,
    AggregateFunction,
    CatalogueError,
    EnumOf,
    FieldType,
    KeyField,
    KeyType,
    ListOf,
    RecordKey,
    RecordOf,
    ValueField,
    View,
    ViewKind,
    WindowSpec,
    load_catalogue,
)
from schema.names import RESERVED_QUERY_FIELDS, RESERVED_TYPE_NAMES, check_catalogue
from tests.schema.usercatalogue import WorkingDirectory
from tooling.cli import main

WINDOW = WindowSpec(size_ms=60_000, grace_ms=0, retention_ms=600_000)
STATUS = EnumOf("Status", ("OPEN", "PAID"))
GEO = RecordOf("Geo", (ValueField("lat", FieldType.FLOAT),))
ADDRESS = RecordOf("Address", (ValueField("city"), ValueField("geo", GEO)))
# a value field of every type, so the schemas hold every scalar a catalogue can make
VALUES = (
    *(ValueField(t.name.lower(), t) for t in FieldType),
    ValueField("status", STATUS),
    ValueField("address", ADDRESS),
    ValueField("stops", ListOf(ADDRESS)),
)
RECORD_KEY = RecordKey((KeyField("shop"), KeyField("seq", KeyType.LONG)))
AMOUNT = (ValueField("amount", FieldType.INT),)
TOTALS = (
    Aggregate("orders", AggregateFunction.COUNT),
    Aggregate("revenue", AggregateFunction.SUM, "amount"),
)


def view(name: str, kind: ViewKind = ViewKind.COUNT, **names: object) -> View:
    """A view `name` of `kind` whose GraphQL names all start with its name: `names`
    overrides them, or gives what its kind needs besides (window, aggregates, values)."""
    type_name = "".join(part.capitalize() for part in name.split("_"))
    field = type_name[0].lower() + type_name[1:]
    shapes: dict[ViewKind, dict[str, object]] = {
        ViewKind.COUNT: {"many_field": f"{field}Many", "top_field": f"{field}Top"},
        ViewKind.WINDOWED_COUNT: {"top_field": f"{field}Top", "window": WINDOW},
        ViewKind.LATEST: {"many_field": f"{field}Many"},
        ViewKind.HISTORY: {},
        ViewKind.AGGREGATE: {
            "many_field": f"{field}Many",
            "top_field": f"{field}Top",
            "value_fields": AMOUNT,
            "aggregates": TOTALS,
        },
        ViewKind.WINDOWED_AGGREGATE: {
            "top_field": f"{field}Top",
            "window": WINDOW,
            "value_fields": AMOUNT,
            "aggregates": TOTALS,
        },
    }
    declared: dict[str, object] = {
        "name": name,
        "topic": "t",
        "kind": kind,
        "key_field": "k",
        "type_name": type_name,
        "point_field": field,
        **shapes[kind],
        **names,
    }
    return View(**declared)  # type: ignore[arg-type]


def every_kind() -> tuple[View, ...]:
    """A view of each kind, with a scalar key and with a record key; events show a value
    field of every type."""
    views = []
    for kind in ViewKind:
        values = {"value_fields": VALUES} if kind in (ViewKind.LATEST, ViewKind.HISTORY) else {}
        views.append(view(kind.value, kind, **values))
        views.append(view(f"{kind.value}_by_record", kind, key_type=RECORD_KEY, **values))
    return tuple(views)


EVERY_KIND = every_kind()


def type_names(schema: strawberry.Schema) -> set[str]:
    return {name for name in schema._schema.type_map if not name.startswith("__")}


def fields_of(schema: strawberry.Schema, name: str) -> set[str] | None:
    """The fields of type `name` (an enum's values), or None where the schema lacks it."""
    found = schema._schema.type_map.get(name)
    if isinstance(found, GraphQLEnumType):
        return set(found.values)
    if isinstance(found, GraphQLObjectType | GraphQLInputObjectType):
        return set(found.fields)
    return None


def made_names(catalogue: Iterable[View]) -> set[str]:
    """The names of the types and the records and enums the views make."""
    names = set()
    for each in catalogue:
        names |= {made.name for made in each.graphql_names.types}
        names |= {value_type.name for value_type in each.graphql_names.value_types}
    return names


@pytest.mark.parametrize("catalogue", [CATALOGUE, EVERY_KIND], ids=["demo", "every kind"])
def test_the_built_schemas_hold_the_reserved_names_and_those_the_views_make(
    catalogue: tuple[View, ...],
) -> None:
    check_catalogue(catalogue)
    schemas = (build_schema(catalogue), build_subgraph(catalogue))
    held = type_names(schemas[0]) | type_names(schemas[1])
    made = made_names(catalogue)
    assert held - RESERVED_TYPE_NAMES - made == set()  # nothing the checks do not know of
    assert made - held == set()  # nothing they refuse needlessly
    for each in catalogue:
        for made_type in each.graphql_names.types:
            expected = {*made_type.declared, *made_type.added}
            if made_type.name.endswith("Ranking"):
                expected = {ranking_name(name) for name in made_type.declared}
            # the fields of both schemas' types of the name (a record key is one field of
            # the node's, its fields the gateway's)
            found = [fields_of(schema, made_type.name) or set() for schema in schemas]
            assert found[0] | found[1] == expected, made_type.name


def test_the_reserved_names_are_the_ones_the_schemas_define_themselves() -> None:
    """Exactly: a name no schema defines would be refused for nothing (GraphQL's `ID`
    aside, which a schema would define as soon as it used it)."""
    schemas = (build_schema(EVERY_KIND), build_subgraph(EVERY_KIND))
    own = (type_names(schemas[0]) | type_names(schemas[1])) - made_names(EVERY_KIND)
    assert own | {"ID"} == RESERVED_TYPE_NAMES


def test_the_root_fields_and_the_arguments_of_the_key_are_the_ones_the_schemas_have() -> None:
    gateway, node = build_schema(EVERY_KIND), build_subgraph(EVERY_KIND)
    roots = {
        "gateway query": gateway._schema.query_type,
        "subscription": gateway._schema.subscription_type,
        "node query": node._schema.query_type,
    }
    query = set(gateway._schema.query_type.fields)  # type: ignore[union-attr]
    assert query & RESERVED_QUERY_FIELDS == RESERVED_QUERY_FIELDS
    declared = {f for v in EVERY_KIND for f, _ in v.graphql_names.query_fields}
    assert query - RESERVED_QUERY_FIELDS == declared
    for each in EVERY_KIND:  # what the fields of the view that take its key take besides
        own, keys = dict(each.graphql_names.query_fields), {each.key_field, each.keys_arg}
        arguments: set[str] = set()
        for root in roots.values():
            assert root is not None
            for name, field in root.fields.items():
                if name in own and keys & set(field.args):
                    arguments |= set(field.args) - keys
        assert arguments == set(each.graphql_names.key_arguments), each.name
    node_fields = set(roots["node query"].fields) - RESERVED_QUERY_FIELDS  # type: ignore[union-attr]
    assert node_fields <= declared
    assert set(roots["subscription"].fields) <= declared  # type: ignore[union-attr]


def test_the_docs_name_the_types_statefed_defines_and_those_a_view_makes() -> None:
    """docs/views.md's GraphQL names: its list of statefed's own types is the reserved one
    (federation's, which no type_name can take, aside), its table the types views make."""
    page = (Path(__file__).parents[2] / "docs" / "views.md").read_text(encoding="utf-8")
    section = page[page.index("### GraphQL names") :]
    listed = section[section.index("whatever the catalogue:") : section.index("(`schema.names")]
    own = {name for name in RESERVED_TYPE_NAMES if name[0].isupper()}
    assert set(re.findall(r"`(\w+)`", listed)) == own
    table = section[section.index("| type |") : section.index("and shows the records")]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    suffixes = {name[1:] for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    made = {m.name[len(v.type_name) :] for v in EVERY_KIND for m in v.graphql_names.types}
    assert suffixes == made


def named(name: str, kind: ViewKind = ViewKind.COUNT, **names: object) -> Callable[[], object]:
    return lambda: view(name, kind, **names)


def latest(*values: ValueField, **names: object) -> Callable[[], object]:
    return named("events", ViewKind.LATEST, value_fields=values, **names)


def results(*aggregates: Aggregate, windowed: bool = False) -> Callable[[], object]:
    kind = ViewKind.WINDOWED_AGGREGATE if windowed else ViewKind.AGGREGATE
    return named("orders", kind, aggregates=(*TOTALS, *aggregates))


def case(name: str, declare: Callable[[], object], says: str) -> object:
    return pytest.param(declare, says, id=name)


PAGE_INFO = RecordOf("PageInfo", (ValueField("x"),))
# one view's names: refused when it is declared
REFUSED_VIEWS = [
    case(
        "type PageInfo",
        named("a", type_name="PageInfo"),
        "view a: type PageInfo (its type_name) is a type statefed's schemas define "
        "themselves: choose another type_name",
    ),
    case("type DateTime", named("a", type_name="DateTime"), "type DateTime (its type_name)"),
    case("type Cluster", named("a", type_name="Cluster"), "type Cluster (its type_name)"),
    case("type Freshness", named("a", type_name="Freshness"), "type Freshness (its type"),
    case("type Totals", named("a", type_name="Totals"), "type Totals (its type_name)"),
    case("type Long", named("a", type_name="Long"), "type Long (its type_name)"),
    case(
        "made WindowTotals",
        named("a", ViewKind.AGGREGATE, type_name="Window", value_fields=AMOUNT, aggregates=TOTALS),
        "view a: type WindowTotals (type_name 'Window' + 'Totals': its totals) is a type "
        "statefed's schemas define themselves: choose another type_name",
    ),
    case(
        "enum Role",
        latest(ValueField("r", EnumOf("Role", ("ACTIVE",)))),
        "view events: enum Role of its value fields is named like a type statefed's schemas "
        "define themselves: rename the enum",
    ),
    case(
        "enum Cluster",
        latest(ValueField("c", EnumOf("Cluster", ("A",)))),
        "enum Cluster of its value fields is named like a type statefed's",
    ),
    case(
        "record Freshness",
        latest(ValueField("f", RecordOf("Freshness", (ValueField("x"),)))),
        "record Freshness of its value fields is named like a type statefed's",
    ),
    case(
        "nested record PageInfo",
        latest(ValueField("xs", ListOf(RecordOf("A", (ValueField("p", PAGE_INFO),))))),
        "record PageInfo of its value fields is named like a type statefed's",
    ),
    case(
        "record named like its update type",
        latest(ValueField("x", RecordOf("EventsUpdate", (ValueField("c"),)))),
        "view events: record EventsUpdate of its value fields is named like type EventsUpdate "
        "the view makes (type_name 'Events' + 'Update': its subscriptions' updates): rename "
        "the record",
    ),
    case(
        "enum named like its type",
        latest(ValueField("x", EnumOf("Events", ("A",)))),
        "enum Events of its value fields is named like type Events the view makes (its type_name)",
    ),
    case(
        "two records of one name",
        latest(
            ValueField("x", RecordOf("A", (ValueField("c"),))),
            ValueField("y", RecordOf("A", (ValueField("d"),))),
        ),
        "view events: its value fields show a record A and a record A of different definitions",
    ),
    case(
        "key maxLag",
        named("a", key_field="maxLag"),
        "view a: key_field 'maxLag' names the key's argument of its lookups, which also take "
        "maxLag, atLeast, after: rename key_field (e.g. 'maxLagKey')",
    ),
    case("key atLeast", named("a", key_field="atLeast"), "key_field 'atLeast' names the key"),
    case(
        "key after",
        named("a", ViewKind.LATEST, key_field="after"),
        "key_field 'after' names the key's argument",
    ),
    case(
        "windowed key from",
        named("a", ViewKind.WINDOWED_COUNT, key_field="from"),
        "view a: key_field 'from' names the key's argument of its lookups, which also take "
        "maxLag, atLeast, after, from, to:",
    ),
    case(
        "windowed key to",
        named(
            "a", ViewKind.WINDOWED_AGGREGATE, key_field="to", value_fields=AMOUNT, aggregates=TOTALS
        ),
        "key_field 'to' names the key's argument",
    ),
    case(
        "history key first",
        named("a", ViewKind.HISTORY, key_field="first"),
        "key_field 'first' names the key's argument",
    ),
    case(
        "history key at",
        named("a", ViewKind.HISTORY, key_field="at"),
        "key_field 'at' names the key's argument",
    ),
    case(
        "value deleted",
        latest(ValueField("deleted")),
        "view events: value field 'deleted' would be a field of type EventsUpdate twice, as "
        "statefed puts eventTime, deleted, offset, token, freshness in it: rename the value "
        "field",
    ),
    case(
        "value offset of history",
        named("h", ViewKind.HISTORY, value_fields=(ValueField("offset"),)),
        "value field 'offset' would be a field of type HUpdate twice",
    ),
    case(
        "value eventTime",
        latest(ValueField("eventTime")),
        "value field 'eventTime' would be a field of type Events twice, as statefed puts "
        "eventTime in it",
    ),
    case(
        "aggregate token",
        results(Aggregate("token", AggregateFunction.COUNT)),
        "view orders: aggregate 'token' would be a field of type OrdersUpdate twice",
    ),
    case(
        "aggregate freshness in windows",
        results(Aggregate("freshness", AggregateFunction.COUNT), windowed=True),
        "aggregate 'freshness' would be a field of type OrdersUpdate twice, as statefed puts "
        "start, end, count, deleted, offset, token, freshness in it",
    ),
    case(
        "aggregate keys",
        results(Aggregate("keys", AggregateFunction.COUNT)),
        "aggregate 'keys' would be a field of type OrdersTotals twice, as statefed puts keys",
    ),
    case(
        "count key count",
        named("a", key_field="count"),
        "view a: key field 'count' would be a field of type A twice, as statefed puts count in "
        "it: rename the key field",
    ),
    case(
        "record key count",
        named("a", key_type=RecordKey((KeyField("count"), KeyField("b", KeyType.INT)))),
        "key field 'count' would be a field of type A twice",
    ),
    case(
        "key_field count of a record key",
        named("a", key_field="count", key_type=RECORD_KEY),
        "view a: key_field 'count' would be a field of type A twice, as statefed puts count "
        "in it: rename the key_field",
    ),
    case(
        "windowed key start",
        named("a", ViewKind.WINDOWED_COUNT, key_field="start"),
        "key field 'start' would be a field of type A twice, as statefed puts start, end, "
        "count in it",
    ),
    case(
        "point cluster",
        named("a", point_field="cluster"),
        "view a: point_field 'cluster' is a field the gateway defines itself (_entities, "
        "_service, cluster): rename it",
    ),
    case(
        "point is many",
        named("a", many_field="a"),
        "view a: field 'a' would be defined twice, as its point_field and as its many_field: "
        "rename one of them",
    ),
    case(
        "point is scan",
        named("a", point_field="allAMany"),
        "field 'allAMany' would be defined twice, as its point_field and as its scan field",
    ),
]


@pytest.mark.parametrize(("declare", "says"), REFUSED_VIEWS)
def test_a_view_whose_names_clash_with_statefeds_is_refused_when_declared(
    declare: Callable[[], object], says: str
) -> None:
    with pytest.raises(ValueError) as refused:
        declare()
    assert says in str(refused.value)


def test_a_key_field_starting_with_two_underscores_is_refused() -> None:
    with pytest.raises(ValueError, match="key field '__x' starts with '__', which GraphQL keeps"):
        KeyField("__x")


def shows(name: str, value_type: EnumOf | RecordOf) -> View:
    latest_view = latest(ValueField("x", value_type))()
    assert isinstance(latest_view, View)
    return dataclasses.replace(
        latest_view,
        name=name,
        type_name=name.capitalize(),
        point_field=name,
        many_field=f"{name}Many",
    )


ADDR = RecordOf("Addr", (ValueField("c"),))
# names of several views: refused when the catalogue is loaded
REFUSED_CATALOGUES = [
    case(
        "Word and WordTop",
        lambda: (view("a", type_name="Word"), view("b", type_name="WordTop")),
        "views a and b both make GraphQL type WordTop (a: type_name 'Word' + 'Top': its top-N "
        "subscription; b: its type_name), and GraphQL takes them for one type: rename the "
        "type_name of view a, or rename the type_name of view b",
    ),
    case(
        "Word and WordConnection",
        lambda: (view("a", type_name="Word"), view("b", type_name="WordConnection")),
        "views a and b both make GraphQL type WordConnection",
    ),
    case(
        "one type_name",
        lambda: (view("a", type_name="T"), view("b", type_name="T")),
        "views a and b both make GraphQL type T (a: its type_name; b: its type_name)",
    ),
    case(
        "records of one name",
        lambda: (shows("a", ADDR), shows("b", RecordOf("Addr", (ValueField("d"),)))),
        "views a and b show a record Addr and a record Addr of different definitions, and "
        "GraphQL shows one type per name: give them the same definition (a record's fields, "
        "types and sources, an enum's symbols: then they are one type) or different names",
    ),
    case(
        "records of other sources",
        lambda: (shows("a", ADDR), shows("b", RecordOf("Addr", (ValueField("c", source="city"),)))),
        "show a record Addr and a record Addr of different definitions",
    ),
    case(
        "enum and record",
        lambda: (shows("a", EnumOf("Addr", ("X",))), shows("b", ADDR)),
        "views a and b show an enum Addr and a record Addr",
    ),
    case(
        "record named like a type",
        lambda: (view("a", type_name="Addr"), shows("b", ADDR)),
        "views a and b both make GraphQL type Addr (a: its type_name; b: a record of its value "
        "fields), and GraphQL takes them for one type: rename the type_name of view a, or "
        "rename the record of view b",
    ),
    case(
        "one field",
        lambda: (view("a"), view("b", point_field="a")),
        "views a and b both define field 'a' (a: point_field; b: point_field): rename one of them",
    ),
    case(
        "scan and point",
        lambda: (view("a"), view("b", point_field="allAMany")),
        "views a and b both define field 'allAMany' (a: scan field (all + many_field, or "
        "point_field); b: point_field)",
    ),
    case(
        "value named like the key",
        lambda: (latest(ValueField("k"))(),),
        "view events: type Events would have two fields named 'k' (key field and value "
        "field): rename one of them",
    ),
    case(
        "two values of one name",
        lambda: (latest(ValueField("v"), ValueField("v", FieldType.INT))(),),
        "view events: type Events would have two fields named 'v' (value fields): rename one",
    ),
    case(
        "value named like key_field",
        lambda: (latest(ValueField("k"), key_type=RECORD_KEY)(),),
        "view events: type Events would have two fields named 'k' (key_field and value field)",
    ),
]


@pytest.mark.parametrize(("declare", "says"), REFUSED_CATALOGUES)
def test_views_whose_names_clash_are_refused_with_the_catalogue(
    declare: Callable[[], Sequence[View]], says: str
) -> None:
    catalogue = declare()
    with pytest.raises(ValueError) as refused:
        check_catalogue(catalogue)
    assert says in str(refused.value)


def test_records_and_enums_of_one_definition_are_shared() -> None:
    catalogue = (shows("a", ADDR), shows("b", ADDR), shows("c", STATUS), shows("d", STATUS))
    check_catalogue(catalogue)
    sdl = build_schema(catalogue).as_str()
    assert sdl.count("type Addr ") == 1 and sdl.count("enum Status ") == 1


def test_a_record_key_may_be_named_like_one_of_its_fields() -> None:
    """The node shows a record key as one field named key_field, the gateway its fields:
    `shop` is a field of each type once."""
    catalogue = (view("a", key_field="shop", key_type=RECORD_KEY),)
    check_catalogue(catalogue)
    build_schema(catalogue)
    build_subgraph(catalogue)


CLASHING = """
from schema import View, ViewKind

CATALOGUE = [
    View("words", "words", ViewKind.COUNT, "word", "Word", "word", "words", "topWords"),
    View("tops", "words", ViewKind.COUNT, "word", "WordTop", "top", "tops", "topTops"),
]
"""


def test_loading_a_catalogue_whose_views_clash_names_them(workdir: WorkingDirectory) -> None:
    workdir.write("clashing", CLASHING)
    with pytest.raises(CatalogueError) as refused:
        load_catalogue("clashing")
    assert refused.value.problem.startswith("views words and tops both make GraphQL type WordTop")


def test_statefed_schema_names_a_clash_in_one_line(
    workdir: WorkingDirectory, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir.write("clashing", CLASHING)
    with pytest.raises(SystemExit) as refused:
        main(["schema", "--catalogue", "clashing"])
    said = str(refused.value.code)
    assert said.startswith("statefed schema: --catalogue 'clashing': views words and tops both")
    assert "\n" not in said and capsys.readouterr().out == ""


def test_statefed_schema_says_any_failure_to_build_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the checks do not know of, strawberry or graphql-core may still refuse, with an
    exception of their own and a text of several lines."""

    def fails(catalogue: object) -> str:
        raise GraphQLError("Invalid Schema. Errors:\n\n❌ something\n\n❌ else")

    monkeypatch.delenv("STATEFED_CATALOGUE", raising=False)
    monkeypatch.setattr("gateway.api.schema.print_sdl", fails)
    with pytest.raises(SystemExit) as refused:
        main(["schema"])
    assert refused.value.code == (
        "statefed schema: the schema of this catalogue cannot be built: "
        "GraphQLError: Invalid Schema. Errors: ❌ something ❌ else"
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"topic": ""}, "topic '' is no Kafka topic name"),
        ({"topic": "my orders"}, "topic 'my orders' is no Kafka topic name"),
        ({"topic": ".."}, "topic '..' is no Kafka topic name"),
        ({"topic": "t" * 250}, "is no Kafka topic name: 1 to 249 of the letters"),
        ({"name": "v" * 231}, "too long for its changelog topic"),
    ],
)
def test_a_topic_kafka_would_refuse_is_refused_when_the_view_is_declared(
    change: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        dataclasses.replace(WORD_COUNTS, **change)  # type: ignore[arg-type]
    longest = dataclasses.replace(WORD_COUNTS, name="v" * 230, topic="t" * 249)
    assert len(longest.changelog_topic) == 249
