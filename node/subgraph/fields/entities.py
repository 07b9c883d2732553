"""Federation's `_entities` on the node: the rows of a batch of representations.

The gateway asks the owner of a batch of keys for `_entities` with one representation
`{"__typename", <key field>}` per key. The keys of one view are read as the multi-key
field reads them: each partition once, in input order, null for an unknown key, and one
NOT_OWNER naming every foreign partition when a key is not held here.
"""

# No `from __future__ import annotations`: strawberry reads the annotations of resolvers.

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import strawberry
from strawberry.federation.schema_directives import Key
from strawberry.types.field import StrawberryField

from node.errors import BadRepresentationError
from node.subgraph.fields.context import ReadContext, context_of
from schema import View

__all__ = ["Entity", "ViewFields", "entity_key", "resolve_entities"]


@dataclass(frozen=True)
class Entity:
    """A view's type as a federation entity: `read` gives an instance (or None) per key;
    `rows`, when given, reads the same rows as stored, objects whose attributes are the
    type's fields (node.subgraph.fastlookups answers from them, with no instance built per key)."""

    view: View
    read: Callable[[ReadContext, list[str]], list[Any]]
    rows: Callable[[ReadContext, list[str]], list[Any]] | None = None


@dataclass(frozen=True)
class ViewFields:
    """What a kind's builder makes of a view: its Query fields, and its entity if it has one."""

    fields: dict[str, StrawberryField]
    entity: Entity | None = None


def entity_key(view: View) -> Key:
    """`@key(fields: "<key field>")`: an entity of the view is found by its key alone."""
    return Key(fields=view.key_field)  # type: ignore[arg-type]


def _keys_by_type(
    entities: Mapping[str, Entity], representations: Sequence[Any]
) -> dict[str, list[tuple[int, str]]]:
    """(index, key) of the representations, by type name; BAD_USER_INPUT for a bad one."""
    wanted: dict[str, list[tuple[int, str]]] = {}
    for index, representation in enumerate(representations):
        name = representation.get("__typename") if isinstance(representation, dict) else None
        entity = entities.get(name) if isinstance(name, str) else None
        if entity is None or not isinstance(name, str):
            known = ", ".join(sorted(entities))
            raise BadRepresentationError(index, f"no entity type {name!r} (known: {known})")
        key = representation.get(entity.view.key_field)
        if not isinstance(key, str):
            raise BadRepresentationError(index, f"{name} needs {entity.view.key_field!r}")
        wanted.setdefault(name, []).append((index, key))
    return wanted


def resolve_entities(
    entities: Mapping[str, Entity], info: strawberry.Info, representations: Sequence[Any]
) -> list[Any]:
    """The entity or None for each representation, in order."""
    context = context_of(info)
    results: list[Any] = [None] * len(representations)
    for name, items in _keys_by_type(entities, representations).items():
        rows = entities[name].read(context, [key for _, key in items])
        for (index, _), row in zip(items, rows, strict=True):
            results[index] = row
    return results
