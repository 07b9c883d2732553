"""What each view kind is on a node, one module per kind: how its changelog records are
stored, its subgraph fields, whether its rows expire. `KINDS` is the one table the
materializer and the subgraph look kinds up in."""

from __future__ import annotations

from node.errors import NodeError
from node.kinds.count import COUNT
from node.kinds.history import HISTORY
from node.kinds.kind import Applier, NodeKind
from node.kinds.latest import LATEST
from node.kinds.windowed_count import WINDOWED_COUNT
from schema import View, ViewKind

__all__ = ["KINDS", "Applier", "NodeKind", "kind_of"]

KINDS: dict[ViewKind, NodeKind] = {
    ViewKind.COUNT: COUNT,
    ViewKind.WINDOWED_COUNT: WINDOWED_COUNT,
    ViewKind.LATEST: LATEST,
    ViewKind.HISTORY: HISTORY,
}


def kind_of(view: View) -> NodeKind:
    """What `view`'s kind is on a node, or an error naming the view if it is not served."""
    try:
        return KINDS[view.kind]
    except KeyError:
        raise NodeError(f"view {view.name}: kind {view.kind.value} is not served yet") from None
