"""`python -m gateway.execute.possibletypes`: the public schema's abstract types and their members,
as Apollo Client's `possibleTypes` option takes them (committed as
`schema/possibleTypes.json`; without it Apollo Client cannot match fragments on `_Entity`).

`make schema` writes the file with `--write`; `--check` fails when it differs from what the
catalogue generates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import orjson
from graphql import GraphQLInterfaceType, GraphQLSchema, GraphQLUnionType

from gateway.api.schema import build_schema
from schema import CATALOGUE, View
from schema.sdlfile import sdl_main

__all__ = ["main", "possible_types", "print_possible_types"]


def possible_types(schema: GraphQLSchema) -> dict[str, list[str]]:
    """Each union and interface of `schema` (introspection's aside) with its object types,
    in name order."""
    return {
        name: sorted(member.name for member in schema.get_possible_types(abstract))
        for name, abstract in sorted(schema.type_map.items())
        if isinstance(abstract, (GraphQLUnionType, GraphQLInterfaceType))
        and not name.startswith("__")
    }


def print_possible_types(catalogue: Iterable[View] = CATALOGUE) -> str:
    """The `possibleTypes` map of the gateway schema for `catalogue`, as JSON."""
    found = possible_types(build_schema(catalogue)._schema)
    return orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return sdl_main(
        "python -m gateway.execute.possibletypes",
        __doc__,
        print_possible_types,
        "possibleTypes map",
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
