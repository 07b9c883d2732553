"""The command line shared by `python -m gateway.execute.sdl`, `python -m node.subgraph.sdl` and
`python -m gateway.execute.possibletypes`: print a schema's SDL (or its possibleTypes map), or write
or check a file of it (`make schema` writes, `--check` exits 1 on a difference)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from schema.views import CATALOGUE, DEMO_DOMAIN, WORD_COUNTS, View

__all__ = ["sdl_main"]

_CATALOGUES: dict[str, tuple[View, ...]] = {
    "default": CATALOGUE,
    "full": (WORD_COUNTS, *DEMO_DOMAIN),
}


def sdl_main(
    prog: str,
    description: str | None,
    print_sdl: Callable[[tuple[View, ...]], str],
    what: str,
    argv: Sequence[str] | None = None,
) -> int:
    """Run the SDL command for one schema; `what` names it in the mismatch message."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", type=Path, metavar="PATH", help=f"write the {what} to PATH")
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
                f"{args.check} differs from the generated {what}: run `make schema`",
                file=sys.stderr,
            )
            return 1
    else:
        sys.stdout.write(sdl)
    return 0
