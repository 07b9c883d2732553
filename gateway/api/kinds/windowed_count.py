"""WINDOWED_COUNT and WINDOWED_AGGREGATE views in the gateway: a key's windows from its
owner, and the top-N of one window."""

from __future__ import annotations

from gateway.api.fields.keys import key_names
from gateway.api.fields.windowed import windowed_fields
from gateway.api.kinds.kind import GatewayKind, scan_example
from gateway.config import GatewayConfig
from gateway.model.prices import Price, scan_price, top_price
from schema import View

__all__ = ["WINDOWED_COUNT"]


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    prices = {view.top_field: top_price(view, config), view.scan_field: scan_price(view, config)}
    if view.window is not None:
        kept = view.window.kept_per_key()
        prices[view.point_field] = Price(view, fixed=kept)
        prices[view.totals_field] = Price(view, fixed=kept, fanout=True)
    return prices


def _example(view: View) -> str:
    results = [f.name for f in view.row_fields]
    return scan_example(view, [*key_names(view), "start", "end", "count", *results])


WINDOWED_COUNT = GatewayKind(windowed_fields, _prices, _example)
