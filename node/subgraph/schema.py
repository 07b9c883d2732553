"""The node's GraphQL subgraph, generated from the view catalogue: an Apollo Federation v2
subgraph whose count and latest types are entities keyed by the view's key field, so the
gateway fetches a batch of keys with `_entities`.

Each view kind has one builder (its `node.subgraph.kinds` entry) that turns a catalogue entry into
GraphQL fields, so a new view of an existing kind needs no resolver code. The
fields read only partitions this node holds: anything else is a `NotOwnerError`, and
every partition read is recorded in the request's `ReadContext` for
`extensions.freshness`. Shared by every view: the `DateTime` scalar (ISO-8601, UTC),
`input WindowInput { start: DateTime! }` and `type PageInfo`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import strawberry
import strawberry.federation
from graphql import GraphQLError
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache
from strawberry.federation.schema import FederationAny
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext
from strawberry.types.field import StrawberryField
from strawberry.utils.logging import StrawberryLogger

from node.errors import NodeError, QueryError
from node.subgraph.fields import Entity, ReadContext, resolve_entities
from node.subgraph.fields.common import MAX_KEYS, MAX_TOP_LIMIT
from node.subgraph.fields.history import MAX_PAGE_SIZE
from node.subgraph.kinds import kind_of
from runtime.valuetypes import SCALAR_MAP
from schema import CATALOGUE, View

__all__ = [
    "MAX_KEYS",
    "MAX_PAGE_SIZE",
    "MAX_TOP_LIMIT",
    "ReadContext",
    "build_subgraph",
    "entities_of",
    "print_sdl",
]

# distinct query texts kept parsed and validated; the gateway sends a handful of
# documents with variables, GraphiQL users a few more
_DOCUMENT_CACHE_SIZE = 1024
_RESERVED = {"_entities", "_service"}  # federation's fields


class _MarkExecuted(SchemaExtension):
    """Tells the error formatter that parse and validation passed (`ReadContext.executed`)."""

    def on_execute(self):  # type: ignore[no-untyped-def]
        context = self.execution_context.context
        if isinstance(context, ReadContext):
            context.executed = True
        yield


class _SubgraphSchema(strawberry.federation.Schema):
    """Logs only failures of fields; refused requests (QueryError), invalid documents and
    variables (no path) are the caller's business, and logging each would flood the log."""

    def __init__(self, entities: Mapping[str, Entity], **kwargs: Any) -> None:
        self._entities = dict(entities)  # by type name; read by the federation base class
        super().__init__(**kwargs)

    @property
    def entities(self) -> Mapping[str, Entity]:
        """The entity types of the views, by type name, with their readers."""
        return self._entities

    def entities_resolver(
        self, info: strawberry.Info, representations: list[FederationAny]
    ) -> list[FederationAny]:
        # replaces strawberry's per-representation resolve_reference: each view's keys are
        # read like the multi-key field (each partition once, one NOT_OWNER)
        return resolve_entities(self._entities, info, representations)

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        for error in errors:
            if error.path is not None and not isinstance(error.original_error, QueryError):
                StrawberryLogger.error(error, execution_context)


def build_subgraph(catalogue: Iterable[View] = CATALOGUE) -> strawberry.Schema:
    """The strawberry schema of the node subgraph for every view of `catalogue`."""
    fields: dict[str, StrawberryField] = {}
    entities: dict[str, Entity] = {}
    for view in catalogue:
        built = kind_of(view).fields(view)
        for name, view_field in built.fields.items():
            if name in fields or name in _RESERVED:
                raise NodeError(f"view {view.name}: field {name} is defined by two views")
            fields[name] = view_field
        if built.entity is not None:
            entities[view.type_name] = built.entity
    query = strawberry.type(type("Query", (), fields))
    return _SubgraphSchema(
        entities,
        query=query,
        extensions=[
            lambda: ParserCache(maxsize=_DOCUMENT_CACHE_SIZE),
            lambda: ValidationCache(maxsize=_DOCUMENT_CACHE_SIZE),
            _MarkExecuted,
        ],
        config=StrawberryConfig(scalar_map=dict(SCALAR_MAP)),
    )


def entities_of(schema: strawberry.Schema) -> Mapping[str, Entity]:
    """The entities of a subgraph `build_subgraph` made, by type name (none for any other
    schema)."""
    return schema.entities if isinstance(schema, _SubgraphSchema) else {}


def print_sdl(catalogue: Iterable[View] = CATALOGUE) -> str:
    """The SDL of the subgraph for `catalogue`, as committed in schema/node.graphql."""
    return build_subgraph(catalogue).as_str() + "\n"
