"""HISTORY views in the gateway: pages of a key's events from its owner."""

from __future__ import annotations

from gateway.api.fields.common import EVENT_TIME
from gateway.api.fields.history import history_fields
from gateway.api.fields.keys import key_names
from gateway.api.kinds.kind import GatewayKind, scan_example
from gateway.config import GatewayConfig
from gateway.model.inputs import MAX_PAGE_SIZE
from gateway.model.prices import Price, scan_price
from schema import View

__all__ = ["HISTORY"]


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    return {
        view.point_field: Price(view, "first", MAX_PAGE_SIZE),
        view.scan_field: scan_price(view, config),
    }


def _example(view: View) -> str:
    values = [field.name for field in view.row_fields]
    return scan_example(view, [*key_names(view), *values, EVENT_TIME])


HISTORY = GatewayKind(history_fields, _prices, _example)
