"""`@skip` and `@include` decided per request, so that a plan is derived once per outcome of
a document's conditions (gateway.execute.fastpath), not once per request.

`conditional_nodes` finds, once per operation, every field and fragment of its selections
(and of the fragments it spreads) that carries a directive; `decide` tells, for one
request's variables, whether each is included, as graphql-core's `should_include_node`
does: left out by `@skip(if: true)` or `@include(if: false)`. Where that is not plain (a
directive other than those two, an `if` that is no boolean literal or a variable given a
boolean or defaulting to one) it gives None, and the document is executed, graphql-core
reporting what it makes of it.
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

__all__ = ["MAX_CONDITIONS", "conditional_nodes", "decide"]

MAX_CONDITIONS = 16  # nodes with directives per operation decided per request
_CONDITIONS = ("skip", "include")

_Node = FieldNode | InlineFragmentNode | FragmentSpreadNode


def conditional_nodes(
    operation: OperationDefinitionNode, fragments: Fragments
) -> tuple[_Node, ...] | None:
    """The selection nodes of `operation` (its fragments' included) that carry
    directives, in document order; None when there are more than MAX_CONDITIONS or a
    directive is neither `@skip` nor `@include`."""
    found: list[_Node] = []
    _walk(operation.selection_set.selections, fragments, set(), found)
    plain = all(d.name.value in _CONDITIONS for node in found for d in node.directives or ())
    return tuple(found) if plain and len(found) <= MAX_CONDITIONS else None


def _walk(
    selections: Iterable[object], fragments: Fragments, seen: set[str], found: list[_Node]
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
    nodes: Sequence[_Node],
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
        included = True
        for directive in node.directives or ():
            value = _if(directive, given, defaults)
            if value is None:
                return None
            included &= value if directive.name.value == "include" else not value
        outcomes.append(included)
    return tuple(outcomes)


def _if(
    directive: DirectiveNode, given: Mapping[str, object], defaults: Mapping[str, object]
) -> bool | None:
    argument = next((a for a in directive.arguments or () if a.name.value == "if"), None)
    value: object = None if argument is None else argument.value
    if isinstance(value, VariableNode):
        name = value.name.value
        value = given[name] if name in given else defaults.get(name)
        if isinstance(value, bool):
            return value
    return value.value if isinstance(value, BooleanValueNode) else None
