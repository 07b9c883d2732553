"""The labels of an executed operation in the gateway's metrics: its type and root field."""

from __future__ import annotations

from graphql import FieldNode, GraphQLSchema, OperationDefinitionNode

__all__ = ["OperationLabels"]

_OTHER = "other"


class OperationLabels:
    """(operation type, root field) of operations of `schema`: a root field name the schema
    does not have is `other`, several root fields are `multiple`, so the label set stays
    bounded by the schema whatever clients send."""

    def __init__(self, schema: GraphQLSchema) -> None:
        types = (schema.query_type, schema.mutation_type, schema.subscription_type)
        self._root_fields = frozenset(name for t in types if t is not None for name in t.fields)

    def __call__(self, operation: OperationDefinitionNode) -> tuple[str, str]:
        selections = operation.selection_set.selections
        kind = operation.operation.value
        if len(selections) != 1:
            return kind, "multiple"
        (only,) = selections
        if isinstance(only, FieldNode) and only.name.value in self._root_fields:
            return kind, only.name.value
        return kind, _OTHER
