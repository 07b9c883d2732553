"""AGGREGATE views in the gateway: lookups by `_entities` of a key's aggregates, and the
top-N by any numeric result; served by the latest views' fields (`gateway.api.fields.latest`)."""

from __future__ import annotations

from gateway.api.fields.keys import key_names
from gateway.api.fields.latest import latest_fields
from gateway.api.fields.ranked import ranking_name
from gateway.api.kinds.kind import GatewayKind
from gateway.config import GatewayConfig
from gateway.model.prices import Price, keys_price, scan_price, top_price
from schema import View

__all__ = ["AGGREGATE"]


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    return {
        view.many_field: keys_price(view, config),
        view.top_field: top_price(view, config),
        view.scan_field: scan_price(view, config),
        view.totals_field: Price(view, fanout=True),  # one read per partition
    }


def _example(view: View) -> str:
    by = view.ranked_fields[-1]
    selected = "".join(
        f"    {name}\n" for name in (*key_names(view), *(f.name for f in view.row_fields))
    )
    return f"{{\n  {view.top_field}(limit: 10, by: {ranking_name(by)}) {{\n{selected}  }}\n}}\n"


AGGREGATE = GatewayKind(latest_fields, _prices, _example)
