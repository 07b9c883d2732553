"""The fields a selection set asks of one object type, its fragments spread in place: what
the fast path (gateway.execute.fastpath) plans from, when collecting them needs none of
graphql-core's merging.

graphql-core collects a selection set's fields (`collect_fields`) by walking it in order,
spreading named and inline fragments whose type condition the object's type meets and
merging every field of one response key into one, leaving out what `@skip` or `@include`
exclude. `fields_of` walks alike but only where the outcome is plain: a fragment's type
condition, when it has one, must name the object type itself (not an interface or union it
belongs to), a node with directives must be one the request's conditions decided
(gateway.execute.conditions), and each response key must come once. Anything else is None,
and the document is executed.
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

__all__ = [
    "NOTHING_DECIDED",
    "Decided",
    "Fragments",
    "fields_of",
    "fragment_of",
    "fragments_of",
    "included",
]

Fragments = Mapping[str, FragmentDefinitionNode]
Decided = Mapping[int, bool]  # id of a selection node with directives -> whether included
NOTHING_DECIDED: Decided = {}


def fragments_of(definitions: Iterable[DefinitionNode]) -> Fragments:
    """The named fragments a document defines, by name."""
    return {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}


def fields_of(
    selections: Iterable[object],
    fragments: Fragments,
    type_name: str,
    decided: Decided = NOTHING_DECIDED,
) -> list[FieldNode] | None:
    """The fields `selections` ask of an object of type `type_name`, in the order
    graphql-core collects them, fragments spread, those `decided` left out left out; None
    unless every fragment is on that very type (or has no type condition), every node with
    directives is `decided` and every response key comes once."""
    fields: list[FieldNode] = []
    if not _collect(selections, fragments, type_name, decided, fields):
        return None
    keys = {response_key(field) for field in fields}
    return fields if len(keys) == len(fields) else None


def fragment_of(
    selection: object, fragments: Fragments
) -> InlineFragmentNode | FragmentDefinitionNode | None:
    """The fragment `selection` is or spreads; else None."""
    if isinstance(selection, InlineFragmentNode):
        return selection
    if isinstance(selection, FragmentSpreadNode):
        return fragments.get(selection.name.value)
    return None


def _collect(
    selections: Iterable[object],
    fragments: Fragments,
    type_name: str,
    decided: Decided,
    into: list[FieldNode],
) -> bool:
    for selection in selections:
        chosen = included(selection, decided)
        if chosen is None:
            return False
        if not chosen:
            continue
        if isinstance(selection, FieldNode):
            into.append(selection)
            continue
        inner = fragment_of(selection, fragments)
        if inner is None:
            return False
        condition: NamedTypeNode | None = inner.type_condition
        if condition is not None and condition.name.value != type_name:
            return False
        if isinstance(inner, FragmentDefinitionNode) and inner.directives:
            return False
        if not _collect(inner.selection_set.selections, fragments, type_name, decided, into):
            return False
    return True


def included(selection: object, decided: Decided) -> bool | None:
    """Whether `selection` is included: yes without directives, else as `decided` (None
    when it is not)."""
    if not getattr(selection, "directives", None):
        return True
    return decided.get(id(selection))
