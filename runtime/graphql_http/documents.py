"""GraphQL documents parsed and validated once per query text (a bounded LRU), and the
operation a request runs picked as GraphQL's GetOperation picks it.

Parsing reads at most `max_tokens` tokens (a longer document is refused as a parse failure,
and the refusal is cached like any document); validation runs only when a server asks for
it (`DocumentCache.validate`), after its query limits, and once per document. Validation is
~90% of a small request's GraphQL cost: a text seen before costs a dict lookup. Texts
longer than `max_cached_bytes` are prepared per request, which bounds what the cache holds
(their parsing stops at `max_tokens` anyway).

With `normalize` on, `prepare_request` first looks for literal argument values
(`runtime.graphql_http.literals`): texts that differ only in those share one plan, the
document with them turned into variables, kept per signature (at most `size` plans), and a
request gets the plan with its literals bound into its variables. What the plan cannot
stand for exactly takes the exact-text path: a text that does not scan, a literal that does
not coerce, a plan that does not validate (its errors are then the text's own).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
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
from runtime.graphql_http.literals import Bound, Plan, Scan, Skeletons
from runtime.graphql_http.request import GraphQLRequest, RequestError

__all__ = ["DocumentCache", "Prepared"]

CACHE_SIZE = 1024  # distinct query texts kept parsed and validated, and as many plans
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
    """Prepares query texts against `schema`, each distinct text once (each plan once, with
    `normalize`); documents over `max_tokens` tokens are refused with an error naming
    `tokens_variable`."""

    def __init__(
        self,
        schema: GraphQLSchema,
        size: int = CACHE_SIZE,
        max_cached_bytes: int = MAX_CACHED_BYTES,
        max_tokens: int = MAX_TOKENS,
        tokens_variable: str = "max_tokens",
        normalize: bool = True,
    ) -> None:
        self._schema = schema
        self._max_cached_bytes = max_cached_bytes
        self._max_tokens = max_tokens
        self._tokens_variable = tokens_variable
        self._cached = functools.lru_cache(maxsize=size)(self._prepare)
        self.normalize = normalize
        self.planned = 0  # requests given a plan, their literals bound
        self._size = size
        self._skeletons = Skeletons(max_tokens, size)
        self._plans: OrderedDict[str, tuple[Plan, Prepared] | None] = OrderedDict()
        # texts that take the exact-text path (those without literals: most repeat). Texts
        # with literals are bound anew each time, not kept: 2,000 distinct texts would churn
        # a cache of containers, and the collector's full passes cost more than binding
        self._exact: dict[str, None] = {}

    def cache_info(self) -> functools._CacheInfo:
        """Hits and misses of the cache."""
        return self._cached.cache_info()

    def prepare(self, query: str) -> Prepared:
        """The parsed `query` (not validated yet), from the cache when the text was seen
        before."""
        if len(query) > self._max_cached_bytes:
            return self._prepare(query)
        return self._cached(query)

    def prepare_request(self, request: GraphQLRequest) -> Prepared:
        """`prepare` of the request's text, or, for a text with literal argument values
        and `normalize` on, their plan, the literals bound into `request.variables` (and
        the request's `literals` set, to locate errors in its text)."""
        query = request.query
        if self.normalize and query not in self._exact and len(query) <= self._max_cached_bytes:
            found = self._bind(query)
            if found is not None and not found[1].errors:  # a plan not found invalid
                bound, prepared = found
                self.planned += 1
                request.variables = bound.variables(request.variables)
                request.literals = bound
                return prepared
            if len(self._exact) >= self._size:
                del self._exact[next(iter(self._exact))]  # the oldest
            self._exact[query] = None
        return self.prepare(query)

    def validate(
        self, prepared: Prepared, request: GraphQLRequest | None = None
    ) -> list[GraphQLError]:
        """The validation errors of a parsed document, found once per document; for a plan
        `prepare_request` gave `request`, the errors of the request's own text, if any."""
        errors = self._validate(prepared)
        if errors and request is not None and request.literals is not None:
            request.literals = None  # a plan is valid exactly when its texts are
            self.planned -= 1
            return self._validate(self.prepare(request.query))
        return errors

    def _validate(self, prepared: Prepared) -> list[GraphQLError]:
        if not prepared.validated:
            assert prepared.document is not None
            prepared.errors = validate(self._schema, prepared.document)
            prepared.validated = True
        return prepared.errors

    def _bind(self, query: str) -> tuple[Bound, Prepared] | None:
        found = self._skeletons.scan(query)
        if found is None:
            return None
        if found.signature in self._plans:
            planned = self._plans[found.signature]
            self._plans.move_to_end(found.signature)
        else:
            planned = self._plan(query, found)
        if planned is None:
            return None
        plan, prepared = planned
        values = plan.bind(found)
        return None if values is None else (Bound(plan, values, query), prepared)

    def _plan(self, query: str, found: Scan) -> tuple[Plan, Prepared] | None:
        """The plan of a new signature, from its first text (None: the exact path)."""
        document = self._prepare(query).document
        plan = None if document is None else Plan.build(self._schema, document, found)
        planned = None
        if plan is not None:
            operations = tuple(
                d for d in plan.document.definitions if isinstance(d, OperationDefinitionNode)
            )
            planned = plan, Prepared(plan.document, [], operations)
        self._plans[found.signature] = planned
        if len(self._plans) > self._size:
            self._plans.popitem(last=False)
        return planned

    def _prepare(self, query: str) -> Prepared:
        try:
            document = parse_limited(query, self._max_tokens, self._tokens_variable)
        except GraphQLError as error:
            return Prepared(None, [error], validated=True)
        operations = tuple(
            d for d in document.definitions if isinstance(d, OperationDefinitionNode)
        )
        return Prepared(document, [], operations)
