"""LATEST views in the gateway: lookups by `_entities` of the newest event per key."""

from __future__ import annotations

import functools

from gateway.config import GatewayConfig
from gateway.documents import (
    NodeDocuments,
    event_columns,
    event_selection,
    lookup_document,
    read_event,
    scan_document,
)
from gateway.fields.common import EVENT_TIME
from gateway.fields.latest import latest_fields
from gateway.kinds.kind import GatewayKind, scan_example
from gateway.prices import Price, keys_price, scan_price
from schema import View

__all__ = ["LATEST"]


def _documents(view: View) -> NodeDocuments:
    return NodeDocuments(
        lookup=lookup_document(view, event_selection(view)),
        read_row=functools.partial(read_event, view),
        scan=scan_document(view),
        scan_columns=event_columns(view),
    )


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    return {view.many_field: keys_price(view, config), view.scan_field: scan_price(view, config)}


def _example(view: View) -> str:
    values = [field.name for field in view.value_fields]
    return scan_example(view, [view.key_field, *values, EVENT_TIME])


LATEST = GatewayKind(latest_fields, _documents, _prices, _example)
