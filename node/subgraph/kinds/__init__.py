"""What each view kind is in a node's subgraph: its fields and the lookup the gateway sends.
`KINDS` is the one table the subgraph and the fast lookups look kinds up in; how a kind is
stored is in `node.storage.kinds`."""

from __future__ import annotations

from node.errors import NodeError
from node.subgraph.fields import count_fields, history_fields, latest_fields, windowed_fields
from node.subgraph.fields.events import EVENT_TIME_FIELD
from node.subgraph.kinds.kind import Selection, ServedKind
from schema import View, ViewKind

__all__ = ["KINDS", "Selection", "ServedKind", "kind_of"]


def _count_lookup(view: View) -> Selection:
    return (("k", view.key_field), ("c", "count"))


def _latest_lookup(view: View) -> Selection:
    values = tuple((f"v{i}", f.name) for i, f in enumerate(view.row_fields))
    return (("k", view.key_field), ("t", EVENT_TIME_FIELD), *values)


KINDS: dict[ViewKind, ServedKind] = {
    ViewKind.COUNT: ServedKind(count_fields, _count_lookup),
    ViewKind.WINDOWED_COUNT: ServedKind(windowed_fields),
    ViewKind.LATEST: ServedKind(latest_fields, _latest_lookup),
    ViewKind.HISTORY: ServedKind(history_fields),
    ViewKind.AGGREGATE: ServedKind(latest_fields, _latest_lookup),
    ViewKind.WINDOWED_AGGREGATE: ServedKind(windowed_fields),
}


def kind_of(view: View) -> ServedKind:
    """What `view`'s kind is in the subgraph, or an error naming the view if it is not served."""
    try:
        return KINDS[view.kind]
    except KeyError:
        raise NodeError(f"view {view.name}: kind {view.kind.value} is not served yet") from None
