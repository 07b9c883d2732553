"""`@skip` and `@include` decided per request, so that a plan is derived once per outcome of
a document's conditions (gateway.execute.plans), not once per request.

`conditional_nodes` finds, once per operation, every field and fragment of its selections
(and of the fragments it spreads) that carries a directive; `decide` tells, for one
request's variables, whether each is included, as graphql-core's `should_include_node`
does: left out by `@skip(if: true)` (then `@include` is not looked at), else by
`@include(if: false)`. An `if` is decided when it is a boolean literal, or a variable given
a boolean, or a variable left out whose declared default is a boolean literal. Anything
else (another directive, an `if` that is not decided) gives None, and the document is
executed, graphql-core reporting what it makes of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from graphql import (
    BooleanValueNode,
    DirectiveNode,
    FieldNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    VariableNode,
)

from gateway.execute.selections import Fragments

__all__ = ["MAX_CONDITIONS", "Conditional", "conditional_nodes", "decide"]

MAX_CONDITIONS = 16  # nodes with directives per operation decided per request
_CONDITIONS = ("skip", "include")

Conditional = FieldNode | InlineFragmentNode | FragmentSpreadNode  # a node with directives


def conditional_nodes(
    operation: OperationDefinitionNode, fragments: Fragments
) -> tuple[Conditional, ...] | None:
    """The selection nodes of `operation` (its fragments' included) that carry
    directives, in document order; None when there are more than MAX_CONDITIONS or a
    directive is neither `@skip` nor `@include`."""
    found: list[Conditional] = []
    _walk(operation.selection_set.selections, fragments, set(), found)
    plain = all(d.name.value in _CONDITIONS for node in found for d in node.directives or ())
    return tuple(found) if plain and len(found) <= MAX_CONDITIONS else None


def _walk(
    selections: Iterable[object], fragments: Fragments, seen: set[str], found: list[Conditional]
) -> None:
    for selection in selections:
        if not isinstance(selection, FieldNode | InlineFragmentNode | FragmentSpreadNode):
            continue
        if selection.directives:
            found.append(selection)
        if isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = fragments.get(name)
            if name in seen or fragment is None:
                continue
            seen.add(name)
            _walk(fragment.selection_set.selections, fragments, seen, found)
        elif selection.selection_set is not None:
            _walk(selection.selection_set.selections, fragments, seen, found)


def decide(
    nodes: Sequence[Conditional],
    operation: OperationDefinitionNode,
    variables: Mapping[str, object] | None,
) -> tuple[bool, ...] | None:
    """Whether each of `nodes` is included for `variables` (the request's, as sent);
    None when an `if` is no boolean literal, nor a variable given a boolean, nor one left
    out whose declared default is a boolean literal."""
    defaults = {
        d.variable.name.value: d.default_value for d in operation.variable_definitions or ()
    }
    given = variables or {}
    outcomes = []
    for node in nodes:
        included = _included(node, given, defaults)
        if included is None:
            return None
        outcomes.append(included)
    return tuple(outcomes)


def _included(
    node: Conditional, given: Mapping[str, object], defaults: Mapping[str, object]
) -> bool | None:
    """Whether `node` is included, `@skip` looked at first (as graphql-core does)."""
    by_name = {d.name.value: d for d in node.directives or ()}
    skip, include = by_name.get("skip"), by_name.get("include")
    if skip is not None:
        skipped = _if(skip, given, defaults)
        if skipped is None:
            return None
        if skipped:
            return False
    return True if include is None else _if(include, given, defaults)


def _if(
    directive: DirectiveNode, given: Mapping[str, object], defaults: Mapping[str, object]
) -> bool | None:
    argument = next((a for a in directive.arguments or () if a.name.value == "if"), None)
    node = None if argument is None else argument.value
    if isinstance(node, BooleanValueNode):
        return node.value
    if not isinstance(node, VariableNode):
        return None
    name = node.name.value
    if name in given:
        value = given[name]
        return value if isinstance(value, bool) else None
    default = defaults.get(name)
    return default.value if isinstance(default, BooleanValueNode) else None
