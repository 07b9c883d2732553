"""What a view kind provides in a node's subgraph."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from node.subgraph.fields import ViewFields
from schema import View

__all__ = ["Selection", "ServedKind", "no_lookup"]

# (alias, field) pairs the gateway's lookup of a view selects, in its order
Selection = tuple[tuple[str, str], ...]


def no_lookup(view: View) -> Selection | None:
    return None


@dataclass(frozen=True)
class ServedKind:
    """A kind in the subgraph: `fields` builds the view's subgraph fields; `lookup`, for
    kinds the gateway looks up by key, what its lookup selects (`node.subgraph.fastlookups`
    answers those without executing them)."""

    fields: Callable[[View], ViewFields]
    lookup: Callable[[View], Selection | None] = no_lookup
