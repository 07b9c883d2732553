"""GraphQL documents parsed and validated once per query text (a bounded LRU), and the
operation a request runs picked as GraphQL's GetOperation picks it.

Parsing reads at most `max_tokens` tokens (a longer document is refused as a parse failure,
and the refusal is cached like any document); validation runs only when a server asks for
it (`DocumentCache.validate`), after its query limits, and once per document. Validation is
~90% of a small request's GraphQL cost: a text seen before costs a dict lookup. Texts
longer than `max_cached_bytes` are prepared per request, which bounds what the cache holds
(their parsing stops at `max_tokens` anyway).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    DocumentNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    validate,
)

from runtime.graphql_http.limits import parse_limited
from runtime.graphql_http.request import RequestError

__all__ = ["DocumentCache", "Prepared"]

CACHE_SIZE = 1024  # distinct query texts kept parsed and validated
MAX_CACHED_BYTES = 64 * 1024
MAX_TOKENS = 5000  # GraphiQL's introspection query has ~190


@dataclass(slots=True)
class Prepared:
    """One query text: its document and operations, or its syntax error; its validation
    errors once validated; and `memo`, where a server keeps what it derives once per
    document (the measures of its query limits)."""

    document: DocumentNode | None
    errors: list[GraphQLError]
    operations: tuple[OperationDefinitionNode, ...] = ()
    memo: dict[Any, Any] = field(default_factory=dict)
    validated: bool = False

    def operation(self, requested: str | None) -> OperationDefinitionNode:
        """The operation named `requested`, or the only one when no name is given;
        RequestError (400) when there is no such operation or the choice is ambiguous."""
        operations = self.operations
        if requested is None:
            if len(operations) == 1:
                return operations[0]
            if not operations:
                raise RequestError("the document has no operation to run")
            names = ", ".join(o.name.value if o.name else "(anonymous)" for o in operations)
            raise RequestError(
                f"the document has {len(operations)} operations ({names}): name the one "
                "to run in `operationName`"
            )
        for operation in operations:
            if operation.name is not None and operation.name.value == requested:
                return operation
        raise RequestError(f"the document has no operation named {requested!r}")


class DocumentCache:
    """Prepares query texts against `schema`, each distinct text once; documents over
    `max_tokens` tokens are refused with an error naming `tokens_variable`."""

    def __init__(
        self,
        schema: GraphQLSchema,
        size: int = CACHE_SIZE,
        max_cached_bytes: int = MAX_CACHED_BYTES,
        max_tokens: int = MAX_TOKENS,
        tokens_variable: str = "max_tokens",
    ) -> None:
        self._schema = schema
        self._max_cached_bytes = max_cached_bytes
        self._max_tokens = max_tokens
        self._tokens_variable = tokens_variable
        self._cached = functools.lru_cache(maxsize=size)(self._prepare)

    def cache_info(self) -> functools._CacheInfo:
        """Hits and misses of the cache."""
        return self._cached.cache_info()

    def prepare(self, query: str) -> Prepared:
        """The parsed `query` (not validated yet), from the cache when the text was seen
        before."""
        if len(query) > self._max_cached_bytes:
            return self._prepare(query)
        return self._cached(query)

    def validate(self, prepared: Prepared) -> list[GraphQLError]:
        """The validation errors of a parsed document, found once per document."""
        if not prepared.validated:
            assert prepared.document is not None
            prepared.errors = validate(self._schema, prepared.document)
            prepared.validated = True
        return prepared.errors

    def _prepare(self, query: str) -> Prepared:
        try:
            document = parse_limited(query, self._max_tokens, self._tokens_variable)
        except GraphQLError as error:
            return Prepared(None, [error], validated=True)
        operations = tuple(
            d for d in document.definitions if isinstance(d, OperationDefinitionNode)
        )
        return Prepared(document, [], operations)
