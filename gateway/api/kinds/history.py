"""HISTORY views in the gateway: pages of a key's events from its owner."""

from __future__ import annotations

from gateway.config import GatewayConfig
from gateway.documents import (
    NodeDocuments,
    event_columns,
    history_document,
    scan_document,
)
from gateway.fields.common import EVENT_TIME
from gateway.fields.history import history_fields
from gateway.inputs import MAX_PAGE_SIZE
from gateway.kinds.kind import GatewayKind, scan_example
from gateway.prices import Price, scan_price
from schema import View

__all__ = ["HISTORY"]


def _documents(view: View) -> NodeDocuments:
    return NodeDocuments(
        history=history_document(view),
        scan=scan_document(view),
        scan_columns=event_columns(view),
    )


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    return {
        view.point_field: Price(view, "first", MAX_PAGE_SIZE),
        view.scan_field: scan_price(view, config),
    }


def _example(view: View) -> str:
    values = [field.name for field in view.value_fields]
    return scan_example(view, [view.key_field, *values, EVENT_TIME])


HISTORY = GatewayKind(history_fields, _documents, _prices, _example)
