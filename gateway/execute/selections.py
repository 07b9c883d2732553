"""The fields a selection set asks of one object type, its fragments spread in place: what
the fast path (gateway.execute.fastpath) plans from, when collecting them needs none of
graphql-core's merging.

graphql-core collects a selection set's fields (`collect_fields`) by walking it in order,
spreading named and inline fragments whose type condition the object's type meets and
merging every field of one response key into one. `fields_of` walks alike but only where
the outcome is plain: a fragment's type condition, when it has one, must name the object
type itself (not an interface or union it belongs to), nothing may carry a directive, and
each response key must come once. Anything else is None, and the document is executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from graphql import (
    DefinitionNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    NamedTypeNode,
)

from gateway.execute.writer import response_key

__all__ = ["Fragments", "fields_of", "fragment_of", "fragments_of"]

Fragments = Mapping[str, FragmentDefinitionNode]


def fragments_of(definitions: Iterable[DefinitionNode]) -> Fragments:
    """The named fragments a document defines, by name."""
    return {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}


def fields_of(
    selections: Iterable[object], fragments: Fragments, type_name: str
) -> list[FieldNode] | None:
    """The fields `selections` ask of an object of type `type_name`, in the order
    graphql-core collects them, fragments spread; None unless every fragment is on that
    very type (or has no type condition), nothing has a directive and every response key
    comes once."""
    fields: list[FieldNode] = []
    if not _collect(selections, fragments, type_name, fields):
        return None
    keys = {response_key(field) for field in fields}
    return fields if len(keys) == len(fields) else None


def fragment_of(
    selection: object, fragments: Fragments
) -> InlineFragmentNode | FragmentDefinitionNode | None:
    """The fragment `selection` is, or spreads without a directive; else None."""
    if isinstance(selection, InlineFragmentNode):
        return selection
    if isinstance(selection, FragmentSpreadNode) and not selection.directives:
        return fragments.get(selection.name.value)
    return None


def _collect(
    selections: Iterable[object], fragments: Fragments, type_name: str, into: list[FieldNode]
) -> bool:
    for selection in selections:
        if isinstance(selection, FieldNode):
            if selection.directives:
                return False
            into.append(selection)
            continue
        inner = fragment_of(selection, fragments)
        if inner is None:
            return False
        condition: NamedTypeNode | None = inner.type_condition
        if inner.directives or (condition is not None and condition.name.value != type_name):
            return False
        if not _collect(inner.selection_set.selections, fragments, type_name, into):
            return False
    return True
