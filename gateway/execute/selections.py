"""The fields a selection set asks of one object type, its fragments spread in place: what
the fast path plans from (gateway.execute.plans) and the response writers
(gateway.execute.writer) are compiled from, where collecting them needs no more of
graphql-core's merging than keeping a leaf asked twice once.

graphql-core collects a selection set's fields (`collect_fields`) by walking it in order,
spreading named and inline fragments whose type condition the object's type meets (a named
fragment once), leaving out what `@skip` or `@include` exclude, and merging every field of
one response key into one. `collect` walks alike but only where the outcome is plain: a
fragment's type condition, when it has one, must name the object type itself or an
interface or union it belongs to (`members`), a node with directives must be one the
request's conditions decided (gateway.execute.conditions), and a response key given twice
must be given by leaves only (validation has made them the same field). Anything else is
None, and the document is executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from graphql import (
    DefinitionNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLSchema,
    InlineFragmentNode,
    is_abstract_type,
)

__all__ = [
    "NOTHING_DECIDED",
    "NO_MEMBERS",
    "Decided",
    "Fragments",
    "Members",
    "collect",
    "fragment_of",
    "fragments_of",
    "included",
    "meets",
    "members_of",
    "response_key",
]

Fragments = Mapping[str, FragmentDefinitionNode]
Decided = Mapping[int, bool]  # id of a selection node with directives -> whether included
NOTHING_DECIDED: Decided = {}
Members = Mapping[str, frozenset[str]]  # an interface's or union's name -> its object types
NO_MEMBERS: Members = {}


def members_of(schema: GraphQLSchema) -> Members:
    """The object types of each interface and union of `schema` (their names), by name."""
    return {
        t.name: frozenset(o.name for o in schema.get_possible_types(t))
        for t in schema.type_map.values()
        if is_abstract_type(t)
    }


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
    members: Members = NO_MEMBERS,
) -> list[FieldNode] | None:
    """The fields `selections` ask of an object of type `type_name`, one per response key
    in the order graphql-core collects them, fragments spread, what `decided` leaves out
    left out; None unless every fragment is on that very type, an interface or union of
    `members` it belongs to, or has no type condition, every node with directives is
    `decided` and only leaves share a response key."""
    into: dict[str, FieldNode] = {}
    if not _collect(selections, fragments, type_name, decided, members, into, set()):
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
    members: Members,
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
        if condition is not None and not meets(type_name, condition.name.value, members):
            return False
        selections_of = inner.selection_set.selections
        if not _collect(selections_of, fragments, type_name, decided, members, into, spread):
            return False
    return True


def meets(type_name: str, condition: str, members: Members) -> bool:
    """Whether an object of type `type_name` meets a fragment's type `condition`."""
    return condition == type_name or type_name in members.get(condition, ())
