"""Federation's `_entities`: the entities of a supergraph's representations, batched like
lookups.

A router sends `{"__typename": "WordCount", "word": "kafka"}` per entity. The keys of one
view's type go through the request's loader of that view, so every key of a request
reaches its owning node in one call per node. A representation that names no entity type
or lacks its key fails alone (BAD_USER_INPUT), as does one of a view the principal may
not read (FORBIDDEN); an unknown key is null; a partition that
cannot be read is one PARTITION_UNAVAILABLE error, its entities null.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import strawberry

from gateway.api.fields.common import Entity, authorize_view
from gateway.api.fields.keys import representation_key
from gateway.api.request import KeyResult, RequestContext
from gateway.model.errors import BadRepresentationError, GatewayError
from gateway.reads.protocol import ReadOptions
from schema import KeyType, RecordKey, View

__all__ = ["parse_representation", "record_missing", "resolve_entities"]

_Wanted = dict[str, list[tuple[int, str]]]  # type name -> (representation index, key)


def parse_representation(
    entities: Mapping[str, Entity], index: int, representation: Any
) -> tuple[str, str]:
    """(type name, key) of one representation, or BadRepresentationError saying what is wrong."""
    if not isinstance(representation, Mapping):
        raise BadRepresentationError(index, "a representation is an object with __typename")
    name = representation.get("__typename")
    entity = entities.get(name) if isinstance(name, str) else None
    if entity is None or not isinstance(name, str):
        known = ", ".join(sorted(entities)) or "none"
        raise BadRepresentationError(index, f"no entity type {name!r} (entity types: {known})")
    view = entity.view
    key = representation_key(view, representation)
    if key is None:
        raise BadRepresentationError(index, f"{name} needs {_wanted(view)}", view.name)
    return name, key


def _wanted(view: View) -> str:
    """What a representation of `view`'s entity must hold: `a long 'account'`."""
    key_type = view.key_type
    if isinstance(key_type, RecordKey):
        return "the key fields " + ", ".join(f"{f.type.value} {f.name!r}" for f in key_type.fields)
    kind = "non-empty string" if key_type is KeyType.STRING else key_type.value
    return f"a {kind} {view.key_field!r}"


async def resolve_entities(
    entities: Mapping[str, Entity], info: strawberry.Info, representations: Sequence[Any]
) -> list[Any]:
    """One object, None (unknown key or partition unavailable) or error per representation."""
    context: RequestContext = info.context
    context.planner.check_representations(len(representations))
    results: list[Any] = [None] * len(representations)
    wanted: _Wanted = {}
    for index, representation in enumerate(representations):
        try:
            name, key = parse_representation(entities, index, representation)
            authorize_view(context, entities[name].view)
            # a key no node could answer fails its own representation, not the batch
            context.planner.check_keys(entities[name].view, [key], counted=False)
        except GatewayError as exc:
            results[index] = exc
            continue
        wanted.setdefault(name, []).append((index, key))
    options = ReadOptions(caller=context.principal.subject)
    loaded = await asyncio.gather(
        *(
            context.loader(entities[name].view, options).load_many([key for _, key in items])
            for name, items in wanted.items()
        )
    )
    path = info.path.as_list()
    for (name, items), found in zip(wanted.items(), loaded, strict=True):
        indexes = [index for index, _ in items]
        record_missing(context, path, indexes, found)
        convert = entities[name].convert
        for index, result in zip(indexes, found, strict=True):
            results[index] = None if result.row is None else convert(result.row)
    return results


def record_missing(
    context: RequestContext,
    path: Sequence[str | int],
    indexes: Sequence[int],
    found: Sequence[KeyResult],
) -> None:
    """One PARTITION_UNAVAILABLE per partition, at the first of its representations."""
    failed: dict[int, list[tuple[int, KeyResult]]] = {}
    for index, result in zip(indexes, found, strict=True):
        if result.error is not None:
            failed.setdefault(result.partition, []).append((index, result))
    for partition, entries in sorted(failed.items()):
        first_index, first = entries[0]
        keys = list(dict.fromkeys(result.key for _, result in entries))
        assert first.error is not None
        context.add_missing([*path, first_index], partition, first.error, keys)
