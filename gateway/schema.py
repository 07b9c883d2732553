"""The public GraphQL schema, generated from the view catalogue.

Each view kind has one builder (`gateway.fields`) that turns a catalogue entry into its
types and query fields; adding a view of an existing kind needs no code here. `cluster`
shows membership, routing and the pipeline's reports. Parsed and validated documents are
cached.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import ParserCache, ValidationCache
from strawberry.types.execution import ExecutionContext

from gateway.fields import BUILDERS, cluster_field
from gateway.responses import is_server_fault
from schema import CATALOGUE, View

__all__ = ["build_schema", "print_sdl"]

log = logging.getLogger(__name__)

_CACHE_SIZE = 1024  # distinct documents whose parse and validation are kept


class _Schema(strawberry.Schema):
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
    for view in views:
        builder = BUILDERS.get(view.kind)
        if builder is None:
            raise ValueError(f"view {view.name}: kind {view.kind.value} has no gateway builder")
        for name, field in builder(view).items():
            if name in fields or name == "cluster":
                raise ValueError(f"view {view.name}: field {name} is defined twice")
            fields[name] = field
    fields["cluster"] = cluster_field(views)
    query = strawberry.type(type("Query", (), fields))
    return _Schema(
        query=query,
        extensions=[
            lambda: ParserCache(maxsize=_CACHE_SIZE),
            lambda: ValidationCache(maxsize=_CACHE_SIZE),
        ],
    )


def print_sdl(catalogue: Iterable[View] = CATALOGUE) -> str:
    """The SDL of the schema for `catalogue`, as committed in schema/gateway.graphql."""
    return build_schema(catalogue).as_str() + "\n"
