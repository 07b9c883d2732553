"""Response writers compiled from a document's selections: what graphql-core's execution
makes of a value, written by a few prepared functions instead of an execution per value.

A writer is compiled once per document and operation (kept with the validated document, as
the fast path's plan is) for a selection it can prove it writes as execution would:

- fields without arguments, fragment spreads and inline fragments on the selected object
  type itself or an interface or union it belongs to (without directives on the fragments'
  definitions), collected as graphql-core collects them (`gateway.execute.selections`),
  `@skip` and `@include` as the plan's outcome decided them (none for a subscription's);
- a response key given twice only by leaf fields (validation has made them the same field);
- each field read by strawberry's resolver of a plain attribute, `__typename` by its type;
- scalars and enums serialized by their own types, lists, nullable and non-null wrappers,
  object types without an `is_type_of` check.

Anything else (a value of an abstract type, a field with a resolver of its own, an
argument, a directive not decided): no writer, the operation is executed. A value the
writer is in doubt about (a null where the type forbids it, an exception, a value that does
not serialize, a list that is not one) raises `Doubt`, and the caller executes instead:
execution then makes the errors and partial data of that value, the writer never has to.

`event_writer` compiles a subscription operation's writer: each event of the source stream
(the root field's resolver gives the event itself) becomes its response without graphql-core
collecting and completing fields for every event; an event in doubt is executed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from graphql import (
    ExecutionResult,
    Executor,
    FieldNode,
    FragmentDefinitionNode,
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    Undefined,
    execute_subscription_event,
    is_leaf_type,
)
from graphql.pyutils import AwaitableOrValue
from strawberry.schema.schema_converter import GraphQLCoreConverter

from gateway.execute.selections import (
    NO_MEMBERS,
    NOTHING_DECIDED,
    Decided,
    Fragments,
    Members,
    collect,
    members_of,
    response_key,
)

__all__ = [
    "TYPENAME",
    "Complete",
    "Doubt",
    "EventCounts",
    "EventWriter",
    "complete",
    "event_writer",
    "reads_attribute",
]

TYPENAME = "__typename"

Complete = Callable[[Any], Any]  # a value -> what execution makes of it (or raises Doubt)


class Doubt(Exception):
    """The writer cannot prove its answer equal to execution's: execution answers."""


def complete(
    output: Any,
    selection: SelectionSetNode | None,
    fragments: Fragments,
    decided: Decided = NOTHING_DECIDED,
    members: Members = NO_MEMBERS,
) -> Complete | None:
    """The writer of a value of type `output` with `selection` (None for a leaf), what
    `decided` leaves out left out, fragments on the interfaces and unions of `members`
    spread, or None when it cannot be compiled."""
    if isinstance(output, GraphQLNonNull):
        inner = _nullable(output.of_type, selection, fragments, decided, members)
        if inner is None:
            return None
        return _non_null(inner)
    inner = _nullable(output, selection, fragments, decided, members)
    return None if inner is None else _or_null(inner)


def _non_null(inner: Complete) -> Complete:
    def write(value: Any) -> Any:
        if value is None or value is Undefined or isinstance(value, Exception):
            raise Doubt
        return inner(value)

    return write


def _or_null(inner: Complete) -> Complete:
    def write(value: Any) -> Any:
        if value is None or value is Undefined:
            return None
        if isinstance(value, Exception):
            raise Doubt
        return inner(value)

    return write


def _nullable(
    output: Any,
    selection: SelectionSetNode | None,
    fragments: Fragments,
    decided: Decided,
    members: Members,
) -> Complete | None:
    if isinstance(output, GraphQLList):
        item = complete(output.of_type, selection, fragments, decided, members)
        return None if item is None else _list(item)
    if is_leaf_type(output):
        return _leaf(output.coerce_output_value) if selection is None else None
    if isinstance(output, GraphQLObjectType) and output.is_type_of is None and selection:
        fields = _fields(output, selection, fragments, decided, members)
        return None if fields is None else _object(fields)
    return None


def _list(item: Complete) -> Complete:
    def write(value: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise Doubt  # execution's iterables (and its error for what is not one)
        return [item(each) for each in value]

    return write


def _leaf(coerce: Callable[[Any], Any]) -> Complete:
    def write(value: Any) -> Any:
        coerced = coerce(value)
        if coerced is None or coerced is Undefined:
            raise Doubt
        return coerced

    return write


_Written = tuple[str, Callable[[Any], Any], Complete]  # response key, read, complete


def _object(fields: tuple[_Written, ...]) -> Complete:
    def write(value: Any) -> Any:
        return {key: write_field(read(value)) for key, read, write_field in fields}

    return write


def _fields(
    object_type: GraphQLObjectType,
    selection: SelectionSetNode,
    fragments: Fragments,
    decided: Decided,
    members: Members,
) -> tuple[_Written, ...] | None:
    """The writers of `object_type`'s selected fields, in execution's order."""
    collected = collect(selection.selections, fragments, object_type.name, decided, members)
    if collected is None:
        return None
    written = []
    for node in collected:
        field = _written(object_type, response_key(node), node, fragments, decided, members)
        if field is None:
            return None
        written.append(field)
    return tuple(written)


def _written(
    object_type: GraphQLObjectType,
    key: str,
    node: FieldNode,
    fragments: Fragments,
    decided: Decided,
    members: Members,
) -> _Written | None:
    if node.arguments:
        return None
    name = node.name.value
    if name == TYPENAME:
        type_name = object_type.name
        return key, lambda _value: type_name, _same
    field = object_type.fields.get(name)
    if field is None or not reads_attribute(field):
        return None
    write = complete(field.type, node.selection_set, fragments, decided, members)
    if write is None:
        return None
    resolve = field.resolve
    assert resolve is not None
    return key, lambda value: resolve(value, None), write


def _same(value: Any) -> Any:
    return value


def reads_attribute(field: GraphQLField) -> bool:
    """Whether `field` is read by strawberry's resolver of a plain attribute (it needs no
    resolve info)."""
    return getattr(field.resolve, "_is_default", False) is True


# -- subscriptions ----------------------------------------------------------------------


@dataclass
class EventCounts:
    """Subscription events written by a compiled writer, and those executed instead (in
    doubt, or of an operation without a writer)."""

    written: int = 0
    executed: int = 0


class EventWriter:
    """The response of each event of a subscription operation: `{key: written event}`,
    or graphql-core's execution of the event when the writer is in doubt about it. Called
    with the subscription's executor and each event of its source stream (a per-event
    executor is built only for an event that is executed); counts in `counts` (its own
    unless given)."""

    def __init__(self, key: str, write: Complete, counts: EventCounts | None = None) -> None:
        self._key = key
        self._write = write
        self.counts = EventCounts() if counts is None else counts

    def __call__(self, executor: Executor, event: Any) -> AwaitableOrValue[ExecutionResult]:
        try:
            data = {self._key: self._write(event)}
        except Exception:  # Doubt, or a value a serializer refused: execution says
            self.counts.executed += 1
            return execute_subscription_event(executor.build_per_event_executor(event))
        self.counts.written += 1
        return ExecutionResult(data, None)


def event_writer(
    schema: GraphQLSchema,
    operation: OperationDefinitionNode,
    fragments: Iterable[FragmentDefinitionNode],
    counts: EventCounts | None = None,
) -> EventWriter | None:
    """The writer of `operation`'s events (counting in `counts`), when it is a subscription
    of one strawberry subscription field (whose events are its values) with a selection a
    writer proves."""
    subscription = schema.subscription_type
    if operation.operation is not OperationType.SUBSCRIPTION or operation.directives:
        return None
    selections = operation.selection_set.selections
    if subscription is None or len(selections) != 1:
        return None
    node = selections[0]
    if not isinstance(node, FieldNode) or node.directives or node.name.value == TYPENAME:
        return None
    field = subscription.fields.get(node.name.value)
    if field is None or not _event_is_value(field):
        return None
    by_name = {fragment.name.value: fragment for fragment in fragments}
    write = complete(field.type, node.selection_set, by_name, members=members_of(schema))
    if write is None:
        return None
    return EventWriter(response_key(node), write, counts)


def _event_is_value(field: GraphQLField) -> bool:
    """Whether the subscription field's resolver gives each event as its value, as
    strawberry's subscription fields do (their arguments feed the source stream only)."""
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    return field.subscribe is not None and getattr(definition, "is_subscription", False) is True
