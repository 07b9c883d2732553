"""What each view kind is in the gateway's API, one module per kind: its public fields, the
cost of its fields, a first query for GraphiQL. `KINDS` is the one table the schema, the
query limits and the app look kinds up in; what a kind asks the nodes is in
`gateway.reads.kinds`."""

from __future__ import annotations

from gateway.api.kinds.aggregate import AGGREGATE
from gateway.api.kinds.count import COUNT
from gateway.api.kinds.history import HISTORY
from gateway.api.kinds.kind import GatewayKind
from gateway.api.kinds.latest import LATEST
from gateway.api.kinds.windowed_count import WINDOWED_COUNT
from schema import View, ViewKind

__all__ = ["KINDS", "GatewayKind", "kind_of"]

KINDS: dict[ViewKind, GatewayKind] = {
    ViewKind.COUNT: COUNT,
    ViewKind.WINDOWED_COUNT: WINDOWED_COUNT,
    ViewKind.LATEST: LATEST,
    ViewKind.HISTORY: HISTORY,
    ViewKind.AGGREGATE: AGGREGATE,
    ViewKind.WINDOWED_AGGREGATE: WINDOWED_COUNT,  # the same fields, with the results
}


def kind_of(view: View) -> GatewayKind:
    """What `view`'s kind is in the gateway, or an error naming the view if it has none."""
    try:
        return KINDS[view.kind]
    except KeyError:
        raise ValueError(
            f"view {view.name}: kind {view.kind.value} is not served by the gateway yet"
        ) from None
