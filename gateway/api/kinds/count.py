"""COUNT views in the gateway: lookups by `_entities` and a top-N, both of count rows."""

from __future__ import annotations

from gateway.api.fields.count import count_fields
from gateway.api.fields.keys import key_names
from gateway.api.kinds.kind import GatewayKind
from gateway.config import GatewayConfig
from gateway.model.prices import Price, keys_price, scan_price, top_price
from schema import View

__all__ = ["COUNT"]


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    return {
        view.many_field: keys_price(view, config),
        view.top_field: top_price(view, config),
        view.scan_field: scan_price(view, config),
        view.totals_field: Price(view, fanout=True),  # one read per partition
    }


def _example(view: View) -> str:
    keys = "".join(f"    {name}\n" for name in key_names(view))
    return f"{{\n  {view.top_field}(limit: 10) {{\n{keys}    count\n  }}\n}}\n"


COUNT = GatewayKind(count_fields, _prices, _example)
