"""The public GraphQL schema, generated from the view catalogue: an Apollo Federation v2
subgraph, so a supergraph can compose the gateway as one of its subgraphs.

Each view kind has one builder (its `gateway.api.kinds` entry) that turns a catalogue entry into its
types and query fields; adding a view of an existing kind needs no code here. `cluster`
shows membership, routing and the pipeline's reports. The types of count and latest views
are entities keyed by the view's key field (`_entities`, batched per owning node like
lookups); `_service { sdl }` prints the schema. The one mutation, `produce`, writes an
event and returns its consistency token (read-your-writes). Each kind's builder also adds
its Subscription fields, named like its query fields (`gateway.api.fields.live`). Parsed and
validated documents are cached.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import strawberry
import strawberry.federation
from graphql import GraphQLError, GraphQLObjectType
from strawberry.extensions import ParserCache, ValidationCache
from strawberry.federation.schema import FederationAny
from strawberry.schema.config import StrawberryConfig
from strawberry.types.execution import ExecutionContext

from gateway.api.fields import (
    Entity,
    PageType,
    RowType,
    ScanType,
    TotalsType,
    cluster_field,
    produce_field,
    resolve_entities,
)
from gateway.api.kinds import kind_of
from gateway.api.responses import is_server_fault
from runtime.valuetypes import SCALAR_MAP
from schema import CATALOGUE, View

__all__ = [
    "build_schema",
    "entities_of",
    "page_types_of",
    "print_sdl",
    "row_types_of",
    "scan_types_of",
    "totals_types_of",
]

log = logging.getLogger(__name__)

_CACHE_SIZE = 1024  # distinct documents whose parse and validation are kept
_RESERVED = {"cluster", "_entities", "_service"}


class _Schema(strawberry.federation.Schema):
    def __init__(
        self,
        entities: Mapping[str, Entity],
        row_types: Mapping[str, RowType],
        page_types: Mapping[str, PageType],
        totals_types: Mapping[str, TotalsType],
        scan_types: Mapping[str, ScanType],
        **kwargs: Any,
    ) -> None:
        self._entities = dict(entities)  # by type name; read by the federation base class
        self._row_types = dict(row_types)  # the views' types that are no entity, by name
        self._page_types = dict(page_types)  # history views' fields of a key's events
        self._totals_types = dict(totals_types)  # the views' totals, by totals field
        self._scan_types = dict(scan_types)  # the views' scans, by scan field
        super().__init__(**kwargs)

    async def entities_resolver(  # type: ignore[override]
        self, info: strawberry.Info, representations: list[FederationAny]
    ) -> list[FederationAny]:
        # replaces strawberry's per-representation resolve_reference: keys are batched
        # per view and owning node, and errors name the representation
        return await resolve_entities(self._entities, info, representations)

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # a client's mistake or a partition being unavailable is an answer, not a server fault
        for error in errors:
            if is_server_fault(error):
                log.error("query failed: %s", error, exc_info=error.original_error)


def build_schema(catalogue: Iterable[View] = CATALOGUE) -> strawberry.Schema:
    """The gateway's schema for `catalogue`: per view the fields its kind defines, plus cluster."""
    views = tuple(catalogue)
    fields: dict[str, Any] = {}
    subscriptions: dict[str, Any] = {}
    entities: dict[str, Entity] = {}
    row_types: dict[str, RowType] = {}
    page_types: dict[str, PageType] = {}
    totals_types: dict[str, TotalsType] = {}
    scan_types: dict[str, ScanType] = {}
    for view in views:
        built = kind_of(view).fields(view)
        _add(view, fields, built.fields, _RESERVED)
        _add(view, subscriptions, built.subscriptions, ())
        if built.entity is not None:
            entities[view.type_name] = built.entity
        if built.row_type is not None:
            row_types[view.type_name] = built.row_type
        for page_type in built.page_types:
            page_types[view.as_of_field if page_type.as_of else view.point_field] = page_type
        if built.totals_type is not None:
            totals_types[view.totals_field] = built.totals_type
        if built.scan_type is not None:
            scan_types[view.scan_field] = built.scan_type
    fields["cluster"] = cluster_field(views)
    query = strawberry.type(type("Query", (), fields))
    mutation = strawberry.type(type("Mutation", (), {"produce": produce_field(views)}))
    subscription = None
    if subscriptions:
        subscription = strawberry.type(type("Subscription", (), subscriptions))
    schema = _Schema(
        entities,
        row_types,
        page_types,
        totals_types,
        scan_types,
        query=query,
        mutation=mutation,
        subscription=subscription,
        extensions=[
            lambda: ParserCache(maxsize=_CACHE_SIZE),
            lambda: ValidationCache(maxsize=_CACHE_SIZE),
        ],
        config=StrawberryConfig(scalar_map=dict(SCALAR_MAP)),
    )
    _federation_fields_last(schema._schema.query_type)
    return schema


def _federation_fields_last(query: GraphQLObjectType | None) -> None:
    """`_entities` and `_service`, which are for federation routers, after the views' fields:
    GraphiQL's docs and the printed SDL list fields in this order, and a newcomer reads the
    views first."""
    if query is None:
        return
    fields = query.fields
    for name in ("_entities", "_service"):
        if name in fields:
            fields[name] = fields.pop(name)


def _add(
    view: View, into: dict[str, Any], built: Mapping[str, Any], reserved: Iterable[str]
) -> None:
    for name, field in built.items():
        if name in into or name in reserved:
            raise ValueError(f"view {view.name}: field {name} is defined twice")
        into[name] = field


def entities_of(schema: strawberry.Schema) -> Mapping[str, Entity]:
    """The entities of a schema from `build_schema`, by type name (none for another schema)."""
    entities: Mapping[str, Entity] = getattr(schema, "_entities", {})
    return entities


def row_types_of(schema: strawberry.Schema) -> Mapping[str, RowType]:
    """The views' types that are no entity (windows), of a schema from `build_schema`, by
    type name (none for another schema)."""
    row_types: Mapping[str, RowType] = getattr(schema, "_row_types", {})
    return row_types


def page_types_of(schema: strawberry.Schema) -> Mapping[str, PageType]:
    """What the history views' fields of a key's events make of a page, of a schema from
    `build_schema`, by the name of the field (none for another schema)."""
    page_types: Mapping[str, PageType] = getattr(schema, "_page_types", {})
    return page_types


def totals_types_of(schema: strawberry.Schema) -> Mapping[str, TotalsType]:
    """The views' totals, of a schema from `build_schema`, by the name of their field (none
    for another schema)."""
    totals_types: Mapping[str, TotalsType] = getattr(schema, "_totals_types", {})
    return totals_types


def scan_types_of(schema: strawberry.Schema) -> Mapping[str, ScanType]:
    """The views' scans, of a schema from `build_schema`, by the name of their field (none
    for another schema)."""
    scan_types: Mapping[str, ScanType] = getattr(schema, "_scan_types", {})
    return scan_types


def print_sdl(catalogue: Iterable[View] = CATALOGUE) -> str:
    """The SDL of the schema for `catalogue`, as committed in schema/gateway.graphql."""
    return build_schema(catalogue).as_str() + "\n"
