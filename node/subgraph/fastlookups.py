"""Lookups answered without executing GraphQL: the one document per entity view that the
gateway sends for a batch of keys,

```graphql
query($r:[_Any!]!){r:_entities(representations:$r){...on WordCount{k:word c:count}}}
```

(latest views select `k:<key field> t:eventTime v0:<value field> ...`), is recognized once
per cached document by its printed shape, which must equal the one built here from the
node's own entity views, and answered by the entity's reader (the one `_entities` calls,
or its `rows`, the same reads without an instance of the type per key: the same
`extensions.freshness`) with each leaf coerced by its own GraphQL scalar: the `data`
execution would give, byte for byte.

Anything unusual is not answered here (`Lookup.answer` gives None) and the endpoint executes
the document as usual, so its answer stays what it is: variables that are not a list of
representations of the fragment's type with string keys, any error of a read (an empty key,
too many keys, a partition not held), a value a scalar refuses or a null where the schema
says non-null. NOT_CAUGHT_UP, NOT_OWNER of `readCurrent`, and the query limits are settled
before a lookup runs, as for any document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    OperationDefinitionNode,
    Undefined,
    is_leaf_type,
    parse,
    print_ast,
)

from node.subgraph.fields import Entity, ReadContext
from node.subgraph.kinds import Selection, kind_of
from runtime.plainfields import plain_attribute
from schema import View

__all__ = ["FastLookups", "Lookup"]

_ALIAS = "r"  # the response key of the batch, as the gateway names it
_VARIABLE = "r"


@dataclass(frozen=True, slots=True)
class _Leaf:
    """One selected field: its response key, the entity's attribute and its scalar."""

    alias: str
    attribute: str
    coerce: Callable[[Any], Any]
    nullable: bool


@dataclass(frozen=True, slots=True)
class Lookup:
    """How one recognized lookup document is answered: the entity type it reads, by which
    key field, with which reader, and the leaves it selects."""

    type_name: str
    key_field: str
    read: Callable[[ReadContext, list[str]], list[Any]]
    leaves: tuple[_Leaf, ...]

    def answer(self, variables: Mapping[str, Any] | None, context: ReadContext) -> Any:
        """The `data` of the document for `variables`, reading through `context`; None when
        anything is unusual (the caller then executes the document; what was read here
        stays in `context.freshness`, for the caller to clear)."""
        keys = self._keys(variables)
        if keys is None:
            return None
        try:
            rows = self.read(context, keys)
        except Exception:  # its error is execution's to report
            return None
        entries: list[dict[str, Any] | None] = []
        for row in rows:
            if row is None:
                entries.append(None)
                continue
            entry = self._entry(row)
            if entry is None:
                return None
            entries.append(entry)
        return {_ALIAS: entries}

    def _keys(self, variables: Mapping[str, Any] | None) -> list[str] | None:
        """The keys of the representations, or None unless each is `{"__typename": <this
        type>, <key field>: <string>}` (extra members are ignored, as `_entities` does)."""
        representations = None if variables is None else variables.get(_VARIABLE)
        if type(representations) is not list:
            return None
        keys = []
        for representation in representations:
            if type(representation) is not dict:
                return None
            key = representation.get(self.key_field)
            if representation.get("__typename") != self.type_name or type(key) is not str:
                return None
            keys.append(key)
        return keys

    def _entry(self, row: Any) -> dict[str, Any] | None:
        """The selected leaves of one entity, or None when one does not coerce."""
        entry: dict[str, Any] = {}
        for leaf in self.leaves:
            value = getattr(row, leaf.attribute)
            if value is None:
                if not leaf.nullable:
                    return None
                entry[leaf.alias] = None
                continue
            try:
                value = leaf.coerce(value)
            except Exception:  # execution's error to report
                return None
            if value is None or value is Undefined:
                return None
            entry[leaf.alias] = value
        return entry


class FastLookups:
    """The lookup documents of every entity view of `schema` (the subgraph's GraphQL
    schema), by printed shape; `entities` are the subgraph's, by type name."""

    def __init__(self, schema: GraphQLSchema, entities: Mapping[str, Entity]) -> None:
        self._lookups: dict[str, Lookup] = {}
        for type_name, entity in entities.items():
            selection = kind_of(entity.view).lookup(entity.view)
            graphql_type = schema.get_type(type_name)
            if selection is None or not isinstance(graphql_type, GraphQLObjectType):
                continue
            lookup = _lookup(entity, graphql_type, selection)
            if lookup is not None:
                self._lookups[print_ast(parse(_document(entity.view, selection)))] = lookup

    def recognize(self, document: DocumentNode) -> Lookup | None:
        """The lookup `document` is, or None for any other document (printed only when it
        is one operation of one `_entities` field: a long document costs no printing)."""
        definitions = document.definitions
        if len(definitions) != 1 or not isinstance(definitions[0], OperationDefinitionNode):
            return None
        selections = definitions[0].selection_set.selections
        if len(selections) != 1 or not isinstance(selections[0], FieldNode):
            return None
        if selections[0].name.value != "_entities":
            return None
        return self._lookups.get(print_ast(document))


def _document(view: View, selection: Selection) -> str:
    fields = " ".join(f"{alias}:{name}" for alias, name in selection)
    return (
        f"query(${_VARIABLE}:[_Any!]!){{{_ALIAS}:_entities(representations:${_VARIABLE})"
        f"{{...on {view.type_name}{{{fields}}}}}}}"
    )


def _lookup(entity: Entity, graphql_type: GraphQLObjectType, selection: Selection) -> Lookup | None:
    """The lookup of `entity`, or None when a selected field is not a plain leaf read from
    an attribute (`plain_attribute`; else execution answers)."""
    leaves = []
    for alias, name in selection:
        field = graphql_type.fields.get(name)
        if field is None:
            return None
        python_name = plain_attribute(field)
        nullable = not isinstance(field.type, GraphQLNonNull)
        leaf_type = field.type if nullable else field.type.of_type  # type: ignore[attr-defined]
        if python_name is None or not is_leaf_type(leaf_type):
            return None
        leaves.append(_Leaf(alias, python_name, leaf_type.coerce_output_value, nullable))
    view = entity.view
    read = entity.read if entity.rows is None else entity.rows
    return Lookup(view.type_name, view.key_field, read, tuple(leaves))
