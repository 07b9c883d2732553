"""Breaking changes between two printed schemas (SDL): what `statefed schema --breaking`
reports for a catalogue of your own, and the suite checks for the built-in one against
schema/baseline/."""

from __future__ import annotations

from graphql import (
    DangerousChangeType,
    GraphQLSchema,
    ObjectTypeDefinitionNode,
    StringValueNode,
    build_ast_schema,
    find_breaking_changes,
    find_dangerous_changes,
    parse,
)

__all__ = ["breaking_changes", "schema_of"]


def schema_of(sdl: str) -> GraphQLSchema:
    """A graphql-core schema from printed SDL; federation's directives (`@link`, `@key`, ...)
    are printed without definitions, so they are taken as they are."""
    return build_ast_schema(parse(sdl), assume_valid_sdl=True)


def _entity_keys(sdl: str) -> dict[str, list[str]]:
    """The `@key(fields:)` of every object type, by type name."""
    keys: dict[str, list[str]] = {}
    for definition in parse(sdl).definitions:
        if isinstance(definition, ObjectTypeDefinitionNode):
            for directive in definition.directives or ():
                if directive.name.value == "key":
                    for argument in directive.arguments or ():
                        if argument.name.value == "fields" and isinstance(
                            argument.value, StringValueNode
                        ):
                            keys.setdefault(definition.name.value, []).append(argument.value.value)
    return keys


def breaking_changes(name: str, before: str, after: str) -> list[str]:
    """The breaking changes from SDL `before` to `after`, one line each:
    `<name>: <TYPE>: <description>`. Besides graphql-core's, a changed argument default
    and a changed or removed entity key (which a supergraph's query plans depend on) are
    breaking; additions never are."""
    old, new = schema_of(before), schema_of(after)
    changes = [
        f"{name}: {change.type.name}: {change.description}"
        for change in find_breaking_changes(old, new)
    ]
    # a default changed under a client that leaves the argument out changes its answers
    # (an aggregate view's `by` default is its first numeric result: reordered, a top-N
    # ranks by another one); graphql-core calls it dangerous, not breaking
    changes += [
        f"{name}: {change.type.name}: {change.description}"
        for change in find_dangerous_changes(old, new)
        if change.type is DangerousChangeType.ARG_DEFAULT_VALUE_CHANGE
    ]
    now = _entity_keys(after)
    for type_name, keys in sorted(_entity_keys(before).items()):
        for key in keys:
            if key not in now.get(type_name, []):
                changes.append(
                    f'{name}: ENTITY_KEY_REMOVED: {type_name} @key(fields: "{key}") was removed.'
                )
    return changes
