"""Running the gateway's GraphQL requests: each distinct query text is parsed, validated and
measured for the query limits once (a bounded LRU keyed by the text), then executed with
graphql-core directly against the strawberry schema's GraphQLSchema.

Validation is ~90% of a small request's GraphQL cost, and strawberry's `execute` adds
per-request extension and middleware objects on top: both are off the hot path here. The
results are those of strawberry's `execute` (same errors before and during execution, same
operation selection), so `gateway.responses` turns them into the same bodies.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard, cast

import strawberry
from graphql import (
    DocumentNode,
    GraphQLError,
    OperationDefinitionNode,
    OperationType,
    execute,
    parse,
    validate,
)
from graphql import (
    ExecutionResult as CoreResult,
)
from strawberry.execution import optimized_is_awaitable
from strawberry.schema.exceptions import CannotGetOperationTypeError
from strawberry.types.execution import ExecutionResult, PreExecutionError

from gateway.limits import QueryLimits, Shape
from schema import View

__all__ = ["Documents", "Prepared", "ReadOnlyRequestError", "UnknownOperationError"]

_CACHE_SIZE = 1024  # distinct documents kept parsed, validated and measured
_CACHED_BYTES = 64 * 1024  # longer texts are prepared per request: bounds the cache's memory
_SHAPES_PER_DOCUMENT = 16  # operation names whose shape is kept with a document
_UNMEASURED = object()
# strawberry's faster check of resolver results (a bool function, typed as graphql-core wants)
_IS_AWAITABLE = cast(Callable[[Any], TypeGuard[Awaitable[Any]]], optimized_is_awaitable)


class ReadOnlyRequestError(Exception):
    """A mutation in a request that may only read (a GET)."""

    def __init__(self) -> None:
        super().__init__("mutations are only accepted by POST")


class UnknownOperationError(Exception):
    """The document has no operation of the requested name (or no operation at all)."""

    def __init__(self, operation_name: str | None) -> None:
        # worded as strawberry's CannotGetOperationTypeError was, which clients have seen
        super().__init__(str(CannotGetOperationTypeError(operation_name)))


@dataclass
class Prepared:
    """One query text: its document, or the syntax error; its validation errors; the shapes
    of its operations for the limits (filled on first use)."""

    document: DocumentNode | None
    errors: list[GraphQLError]
    shapes: dict[str | None, Shape | None] = field(default_factory=dict)

    def shape(self, operation: str | None, limits: QueryLimits) -> Shape | None:
        shape = self.shapes.get(operation, _UNMEASURED)
        if shape is _UNMEASURED:
            assert self.document is not None
            shape = limits.analyze(self.document, operation)
            if len(self.shapes) < _SHAPES_PER_DOCUMENT:  # operation names come from clients
                self.shapes[operation] = shape
        return shape  # type: ignore[return-value]

    def operation(self, requested: str | None) -> OperationDefinitionNode:
        """The operation graphql-core is to run, as strawberry picked it: the requested one,
        else the first; UnknownOperationError when no operation answers to it."""
        assert self.document is not None
        operations = [
            d for d in self.document.definitions if isinstance(d, OperationDefinitionNode)
        ]
        if requested is None:
            if not operations:
                raise UnknownOperationError(None)
            return operations[0]
        for candidate in operations:
            if candidate.name is not None and candidate.name.value == requested:
                return candidate
        raise UnknownOperationError(requested)


class Documents:
    """Prepares and runs requests against `schema` under `limits`."""

    def __init__(self, schema: strawberry.Schema, limits: QueryLimits) -> None:
        self._schema = schema
        self._limits = limits
        self._cached = functools.lru_cache(maxsize=_CACHE_SIZE)(self._prepare)

    def cache_info(self) -> functools._CacheInfo:
        """Hits and misses of the document cache."""
        return self._cached.cache_info()

    def prepare(self, query: str) -> Prepared:
        """The parsed and validated document of `query`, from the cache when it was seen."""
        if len(query) > _CACHED_BYTES:
            return self._prepare(query)
        return self._cached(query)

    def _prepare(self, query: str) -> Prepared:
        try:
            document = parse(query)
        except GraphQLError as error:
            return Prepared(None, [error])
        return Prepared(document, validate(self._schema._schema, document))

    async def run(
        self,
        query: str,
        variables: dict[str, Any] | None,
        operation: str | None,
        context: Any,
        partitions: Callable[[View], int],
        mutations: bool = False,
    ) -> ExecutionResult:
        """Parse, check the limits, pick the operation, validate and execute, in strawberry's
        order; raises UnknownOperationError when no operation of the document can run, and
        ReadOnlyRequestError for a mutation unless `mutations`."""
        prepared = self.prepare(query)
        if prepared.document is None:
            return PreExecutionError(data=None, errors=prepared.errors)
        shape = prepared.shape(operation, self._limits)
        refused = self._limits.check_shape(shape, variables, partitions)
        if refused:
            return PreExecutionError(data=None, errors=refused)
        chosen = prepared.operation(operation)
        if chosen.operation is OperationType.MUTATION and not mutations:
            raise ReadOnlyRequestError()
        name = None if chosen.name is None else chosen.name.value
        if prepared.errors:
            return PreExecutionError(data=None, errors=prepared.errors)
        try:
            outcome = execute(
                self._schema._schema,
                prepared.document,
                context_value=context,
                variable_values=variables,
                operation_name=name,
                is_awaitable=_IS_AWAITABLE,
                executor_class=self._schema.execution_context_class,
            )
            result = outcome if isinstance(outcome, CoreResult) else await outcome
        except Exception as exc:  # as strawberry's execute: an answer, not a crash
            error = (
                exc if isinstance(exc, GraphQLError) else GraphQLError(str(exc), original_error=exc)
            )
            self._schema.process_errors([error])
            return PreExecutionError(data=None, errors=[error])
        if result.errors:
            self._schema.process_errors(result.errors)
        return ExecutionResult(data=result.data, errors=result.errors)
