"""What each view kind is in the gateway, one module per kind: its public fields, the
documents it sends the nodes and how it reads their rows, the cost of its fields, a first
query for GraphiQL. `KINDS` is the one table the schema, the planner, the query limits and
the app look kinds up in."""

from __future__ import annotations

from gateway.documents import ViewQueries
from gateway.kinds.count import COUNT
from gateway.kinds.history import HISTORY
from gateway.kinds.kind import GatewayKind
from gateway.kinds.latest import LATEST
from gateway.kinds.windowed_count import WINDOWED_COUNT
from schema import View, ViewKind

__all__ = ["KINDS", "GatewayKind", "kind_of", "view_queries"]

KINDS: dict[ViewKind, GatewayKind] = {
    ViewKind.COUNT: COUNT,
    ViewKind.WINDOWED_COUNT: WINDOWED_COUNT,
    ViewKind.LATEST: LATEST,
    ViewKind.HISTORY: HISTORY,
}


def kind_of(view: View) -> GatewayKind:
    """What `view`'s kind is in the gateway, or an error naming the view if it has none."""
    try:
        return KINDS[view.kind]
    except KeyError:
        raise ValueError(
            f"view {view.name}: kind {view.kind.value} is not served by the gateway yet"
        ) from None


def view_queries(view: View) -> ViewQueries:
    """The node documents of `view` and the readers of their answers."""
    return ViewQueries(view, kind_of(view).documents(view))
