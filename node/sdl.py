"""`python -m node.sdl`: print the node subgraph's SDL, or write or check a file of it.

`make schema` regenerates the committed `schema/node.graphql` with `--write`; `--check`
fails when the file differs from what the catalogue generates.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from node.subgraph import print_sdl
from schema import CATALOGUE, DEMO_DOMAIN, WORD_COUNTS, View

__all__ = ["main"]

_CATALOGUES: dict[str, tuple[View, ...]] = {
    "default": CATALOGUE,
    "full": (WORD_COUNTS, *DEMO_DOMAIN),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m node.sdl", description=__doc__)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", type=Path, metavar="PATH", help="write the SDL to PATH")
    action.add_argument("--check", type=Path, metavar="PATH", help="exit 1 if PATH differs")
    parser.add_argument(
        "--catalogue",
        choices=sorted(_CATALOGUES),
        default="default",
        help="default: schema.CATALOGUE; full: word_counts plus the demo domain",
    )
    args = parser.parse_args(argv)
    sdl = print_sdl(_CATALOGUES[args.catalogue])
    if args.write is not None:
        args.write.write_text(sdl, encoding="utf-8")
    elif args.check is not None:
        if not args.check.is_file() or args.check.read_text(encoding="utf-8") != sdl:
            print(
                f"{args.check} differs from the generated subgraph: run `make schema`",
                file=sys.stderr,
            )
            return 1
    else:
        sys.stdout.write(sdl)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
