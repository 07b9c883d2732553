"""The compiled writer of subscription events (`gateway.execute.writer`) against graphql-core's
execution of the same event: for hypothesis-generated subscription documents over every
subscription field of the gateway's schema (every view kind: aliases, repeated leaves,
`__typename`, inline and named fragments) and generated events, the writer answers exactly
what execution answers. An event it can prove (every value of its type) is written, not
executed; one it is in doubt about (a null where the type forbids it, a value that does not
serialize, an exception) is executed, so its errors are execution's own."""

from __future__ import annotations

import datetime
import itertools
from types import SimpleNamespace
from typing import Any

import orjson
from graphql import (
    ExecutionResult,
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    OperationDefinitionNode,
    execute_subscription_event,
    is_required_argument,
    is_required_input_field,
    parse,
    validate,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strawberry.schema.schema_converter import GraphQLCoreConverter

from gateway.api.schema import build_schema
from gateway.execute.writer import EventWriter, event_writer
from gateway.model.errors import GatewayError
from schema import CATALOGUE

STRAWBERRY = build_schema(CATALOGUE)
SCHEMA = STRAWBERRY._schema
_ROOT = SCHEMA.subscription_type
assert _ROOT is not None
SUBSCRIPTION: GraphQLObjectType = _ROOT
FIELDS = sorted(SUBSCRIPTION.fields)
BACKREF = GraphQLCoreConverter.DEFINITION_BACKREF


# -- documents --------------------------------------------------------------------------


class Document:
    """A subscription document being drawn: its fragments, and whether an object field was
    selected twice under one response key (merging sub-selections is left to execution)."""

    def __init__(self) -> None:
        self.fragments: list[str] = []
        self.merged_objects = False
        self._names = itertools.count()

    def fragment_name(self) -> str:
        return f"F{next(self._names)}"


def _named(output: Any) -> Any:
    while isinstance(output, GraphQLNonNull | GraphQLList):
        output = output.of_type
    return output


def selection(draw: st.DrawFn, object_type: GraphQLObjectType, doc: Document, depth: int) -> str:
    """A selection set on `object_type`: some of its fields (objects selected in turn),
    aliased or not, some leaves twice, some in fragments."""
    names = [*sorted(object_type.fields), "__typename"]
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    parts = []
    for name in chosen:
        part = _field(draw, object_type, name, doc, depth)
        wrap = draw(st.sampled_from(["plain", "plain", "inline", "typed inline", "named"]))
        if wrap == "inline":
            part = f"... {{ {part} }}"
        elif wrap == "typed inline":
            part = f"... on {object_type.name} {{ {part} }}"
        elif wrap == "named":
            fragment = doc.fragment_name()
            doc.fragments.append(f"fragment {fragment} on {object_type.name} {{ {part} }}")
            part = f"...{fragment}"
        parts.append(part)
        if draw(st.integers(0, 4)) == 0:  # the same response key again
            parts.append(part if wrap != "named" else _field(draw, object_type, name, doc, depth))
            if name != "__typename" and isinstance(
                _named(object_type.fields[name].type), GraphQLObjectType
            ):
                doc.merged_objects = True
    return " ".join(parts)


def _field(
    draw: st.DrawFn, object_type: GraphQLObjectType, name: str, doc: Document, depth: int
) -> str:
    alias = f"a_{name.strip('_')}: " if draw(st.booleans()) else ""
    if name == "__typename":
        return alias + name
    inner = _named(object_type.fields[name].type)
    if isinstance(inner, GraphQLObjectType):
        return f"{alias}{name} {{ {selection(draw, inner, doc, depth + 1)} }}"
    return alias + name


def _literal(output: Any) -> str:
    """A literal of an input type, for a required argument."""
    if isinstance(output, GraphQLNonNull):
        return _literal(output.of_type)
    if isinstance(output, GraphQLList):
        return f"[{_literal(output.of_type)}]"
    if isinstance(output, GraphQLInputObjectType):
        required = [
            f"{name}: {_literal(field.type)}"
            for name, field in output.fields.items()
            if is_required_input_field(field)
        ]
        return "{" + ", ".join(required) + "}"
    if isinstance(output, GraphQLEnumType):
        return next(iter(output.values))
    return {"Int": "1", "DateTime": '"2026-01-01T00:00:00Z"'}.get(output.name, '"k"')


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, str, Document]:
    """A subscription document of one generated field: (root field name, text, document)."""
    name = draw(st.sampled_from(FIELDS))
    field = SUBSCRIPTION.fields[name]
    doc = Document()
    args = [
        f"{arg}: {_literal(argument.type)}"
        for arg, argument in field.args.items()
        if is_required_argument(argument)
    ]
    alias = "pushed: " if draw(st.booleans()) else ""
    object_type = _named(field.type)
    body = selection(draw, object_type, doc, 0)
    arguments = f"({', '.join(args)})" if args else ""
    text = f"subscription {{ {alias}{name}{arguments} {{ {body} }} }}"
    return name, " ".join([text, *doc.fragments]), doc


# -- events -----------------------------------------------------------------------------

_DIRTY = object()  # a value no serializer accepts


def _scalar(draw: st.DrawFn, scalar: GraphQLScalarType) -> Any:
    if scalar.name == "Int":
        return draw(st.integers(-(2**31), 2**31 - 1))
    if scalar.name == "Float":
        return draw(st.floats(allow_nan=False, allow_infinity=False))
    if scalar.name == "Boolean":
        return draw(st.booleans())
    if scalar.name == "DateTime":
        return draw(st.datetimes(timezones=st.just(datetime.UTC)))
    if scalar.name == "JSON":
        return draw(st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
    return draw(st.text(max_size=8))


def value(draw: st.DrawFn, output: Any, clean: bool) -> Any:
    """A value of type `output` (`clean`: every value of the type; else some nulls where
    the type forbids them and values that do not serialize)."""
    if isinstance(output, GraphQLNonNull):
        if not clean and draw(st.integers(0, 9)) == 0:
            return None
        return _present(draw, output.of_type, clean)
    if draw(st.integers(0, 4)) == 0:
        return None
    return _present(draw, output, clean)


def _present(draw: st.DrawFn, output: Any, clean: bool) -> Any:
    if not clean and draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([_DIRTY, "not a value", 2**40, ValueError("boom")]))
    if isinstance(output, GraphQLList):
        return [value(draw, output.of_type, clean) for _ in range(draw(st.integers(0, 3)))]
    if isinstance(output, GraphQLObjectType):
        return SimpleNamespace(
            **{_python_name(f): value(draw, f.type, clean) for f in output.fields.values()}
        )
    if isinstance(output, GraphQLEnumType):
        return draw(st.sampled_from([v.value for v in output.values.values()]))
    assert isinstance(output, GraphQLScalarType)
    return _scalar(draw, output)


def _python_name(field: GraphQLField) -> str:
    return str(field.extensions[BACKREF].python_name)


@st.composite
def events(draw: st.DrawFn, name: str, clean: bool) -> Any:
    field = SUBSCRIPTION.fields[name]
    if not clean and draw(st.integers(0, 9)) == 0:
        return GatewayError("the feed closed")  # as `made` yields it
    return value(draw, GraphQLNonNull(_named(field.type)), clean)


# -- the differential -------------------------------------------------------------------


def _compiled(text: str) -> tuple[Any, EventWriter | None]:
    document = parse(text)
    assert validate(SCHEMA, document) == [], text
    executor = STRAWBERRY.execution_context_class.build(SCHEMA, document)
    assert not isinstance(executor, list), executor
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    fragments = [d for d in document.definitions if d is not operation]
    return executor, event_writer(SCHEMA, operation, fragments)  # type: ignore[arg-type]


def _answers(result: Any) -> bytes:
    """The result as the transports send it (field order included)."""
    assert isinstance(result, ExecutionResult)
    errors = [error.formatted for error in result.errors or ()]
    return orjson.dumps({"data": result.data, "errors": errors})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_written_events_are_what_execution_makes_of_them(data: st.DataObject) -> None:
    name, text, doc = data.draw(documents())
    executor, writer = _compiled(text)
    if writer is None:
        assert doc.merged_objects, f"no writer for {text}"
        return
    for clean in (True, False):
        event = data.draw(events(name, clean))
        expected = _answers(execute_subscription_event(executor.build_per_event_executor(event)))
        written_before = writer.counts.written
        got = _answers(writer(executor, event))
        assert got == expected, text
        if clean:
            assert writer.counts.written == written_before + 1, f"executed a clean event of {text}"


UNPLANNED = {
    "a directive": 'subscription { wordCount(word: "a") { count @include(if: true) } }',
    "an object selected twice": (
        'subscription { wordCount(word: "a") { freshness { node } freshness { lag } } }'
    ),
}


def test_what_the_writer_cannot_prove_is_left_to_execution() -> None:
    for what, text in UNPLANNED.items():
        _, writer = _compiled(text)
        assert writer is None, what


def test_a_root_that_is_not_a_subscription_field_has_no_writer() -> None:
    document = parse("query { __typename }")
    operation = document.definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    assert event_writer(SCHEMA, operation, []) is None
