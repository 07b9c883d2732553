"""LATEST views in the gateway: lookups by `_entities` of the newest event per key."""

from __future__ import annotations

from gateway.api.fields.common import EVENT_TIME
from gateway.api.fields.keys import key_names
from gateway.api.fields.latest import latest_fields
from gateway.api.kinds.kind import GatewayKind, scan_example
from gateway.config import GatewayConfig
from gateway.model.prices import Price, keys_price, scan_price
from schema import View

__all__ = ["LATEST"]


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    return {view.many_field: keys_price(view, config), view.scan_field: scan_price(view, config)}


def _example(view: View) -> str:
    values = [field.name for field in view.row_fields]
    return scan_example(view, [*key_names(view), *values, EVENT_TIME])


LATEST = GatewayKind(latest_fields, _prices, _example)
