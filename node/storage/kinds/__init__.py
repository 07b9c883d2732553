"""How each view kind is stored on a node, one module per kind: how its changelog records
are applied, whether its rows expire, how a snapshot reads its current rows. `KINDS` is the
one table the materializer, the standby replay and the change feed look kinds up in; the
subgraph's fields are in `node.subgraph.kinds`, so that this write path imports no GraphQL."""

from __future__ import annotations

from node.errors import NodeError
from node.storage.kinds.aggregate import AGGREGATE
from node.storage.kinds.count import COUNT
from node.storage.kinds.history import HISTORY
from node.storage.kinds.kind import Applier, SnapshotReader, StoredKind
from node.storage.kinds.latest import LATEST
from node.storage.kinds.windowed_count import WINDOWED_COUNT
from schema import View, ViewKind

__all__ = ["KINDS", "Applier", "SnapshotReader", "StoredKind", "kind_of"]

KINDS: dict[ViewKind, StoredKind] = {
    ViewKind.COUNT: COUNT,
    ViewKind.WINDOWED_COUNT: WINDOWED_COUNT,
    ViewKind.LATEST: LATEST,
    ViewKind.HISTORY: HISTORY,
    ViewKind.AGGREGATE: AGGREGATE,
    ViewKind.WINDOWED_AGGREGATE: WINDOWED_COUNT,  # window rows holding their results
}


def kind_of(view: View) -> StoredKind:
    """How `view`'s kind is stored, or an error naming the view if it is not served."""
    try:
        return KINDS[view.kind]
    except KeyError:
        raise NodeError(f"view {view.name}: kind {view.kind.value} is not served yet") from None
