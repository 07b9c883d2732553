"""`python -m node.subgraph.sdl`: print the node subgraph's SDL, or write or check a file of it.

`make schema` regenerates the committed `schema/node.graphql` with `--write`; `--check`
fails when the file differs from what the catalogue generates.
"""

from __future__ import annotations

from collections.abc import Sequence

from node.subgraph.schema import print_sdl
from schema.sdlfile import sdl_main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    return sdl_main("python -m node.subgraph.sdl", __doc__, print_sdl, "subgraph", argv)


if __name__ == "__main__":
    raise SystemExit(main())
