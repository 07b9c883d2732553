"""The fields a selection set asks of one object type, its fragments spread in place: what
the fast path plans from (gateway.execute.plans) and the response writers
(gateway.execute.writer) are compiled from, where collecting them needs no more of
graphql-core's merging than keeping a leaf asked twice once.

graphql-core collects a selection set's fields (`collect_fields`) by walking it in order,
spreading named and inline fragments whose type condition the object's type meets (a named
fragment once), leaving out what `@skip` or `@include` exclude, and merging every field of
one response key into one. `collect` walks alike but only where the outcome is plain: a
fragment's type condition, when it has one, must name the object type itself (not an
interface or union it belongs to), a node with directives must be one the request's
conditions decided (gateway.execute.conditions), and a response key given twice must be
given by leaves only (validation has made them the same field). Anything else is None, and
the document is executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from graphql import (
    DefinitionNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
)

__all__ = [
    "NOTHING_DECIDED",
    "Decided",
    "Fragments",
    "collect",
    "fragment_of",
    "fragments_of",
    "included",
    "response_key",
]

Fragments = Mapping[str, FragmentDefinitionNode]
Decided = Mapping[int, bool]  # id of a selection node with directives -> whether included
NOTHING_DECIDED: Decided = {}


def fragments_of(definitions: Iterable[DefinitionNode]) -> Fragments:
    """The named fragments a document defines, by name."""
    return {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}


def response_key(node: FieldNode) -> str:
    """The key of a field's value in the response: its alias, else its name."""
    return node.name.value if node.alias is None else node.alias.value


def collect(
    selections: Iterable[object],
    fragments: Fragments,
    type_name: str,
    decided: Decided = NOTHING_DECIDED,
) -> list[FieldNode] | None:
    """The fields `selections` ask of an object of type `type_name`, one per response key
    in the order graphql-core collects them, fragments spread, what `decided` leaves out
    left out; None unless every fragment is on that very type (or has no type condition),
    every node with directives is `decided` and only leaves share a response key."""
    into: dict[str, FieldNode] = {}
    if not _collect(selections, fragments, type_name, decided, into, set()):
        return None
    return list(into.values())


def fragment_of(
    selection: object, fragments: Fragments
) -> InlineFragmentNode | FragmentDefinitionNode | None:
    """The fragment `selection` is or spreads; None for anything else, or a spread of a
    fragment unknown or whose definition carries a directive."""
    if isinstance(selection, InlineFragmentNode):
        return selection
    if isinstance(selection, FragmentSpreadNode):
        fragment = fragments.get(selection.name.value)
        return None if fragment is None or fragment.directives else fragment
    return None


def included(selection: object, decided: Decided) -> bool | None:
    """Whether `selection` is included: yes without directives, else as `decided` (None
    when it is not)."""
    if not getattr(selection, "directives", None):
        return True
    return decided.get(id(selection))


def _collect(
    selections: Iterable[object],
    fragments: Fragments,
    type_name: str,
    decided: Decided,
    into: dict[str, FieldNode],
    spread: set[str],
) -> bool:
    for selection in selections:
        chosen = included(selection, decided)
        if chosen is None:
            return False
        if not chosen:
            continue
        if isinstance(selection, FieldNode):
            key = response_key(selection)
            if key in into and (selection.selection_set or into[key].selection_set):
                return False  # merging sub-selections is execution's
            into.setdefault(key, selection)
            continue
        if isinstance(selection, FragmentSpreadNode):
            if selection.name.value in spread:
                continue  # spread once, as graphql-core does
            spread.add(selection.name.value)
        inner = fragment_of(selection, fragments)
        if inner is None:
            return False
        condition = inner.type_condition
        if condition is not None and condition.name.value != type_name:
            return False
        selections_of = inner.selection_set.selections
        if not _collect(selections_of, fragments, type_name, decided, into, spread):
            return False
    return True
