"""COUNT views in the gateway: lookups by `_entities` and a top-N, both of count rows."""

from __future__ import annotations

from gateway.config import GatewayConfig
from gateway.documents import (
    NodeDocuments,
    count_columns,
    count_row,
    count_selection,
    lookup_document,
    scan_document,
    top_document,
    totals_document,
)
from gateway.fields.count import count_fields
from gateway.kinds.kind import GatewayKind
from gateway.prices import Price, keys_price, scan_price, top_price
from schema import View

__all__ = ["COUNT"]


def _documents(view: View) -> NodeDocuments:
    selection = count_selection(view)
    return NodeDocuments(
        lookup=lookup_document(view, selection),
        top=top_document(view, selection, windowed=False),
        read_row=count_row,
        read_ranked=count_row,
        scan=scan_document(view, ordered=True),
        totals=totals_document(view, windowed=False),
        scan_columns=count_columns(),
    )


def _prices(view: View, config: GatewayConfig) -> dict[str, Price]:
    return {
        view.many_field: keys_price(view, config),
        view.top_field: top_price(view, config),
        view.scan_field: scan_price(view, config),
        view.totals_field: Price(view, fanout=True),  # one read per partition
    }


def _example(view: View) -> str:
    return f"{{\n  {view.top_field}(limit: 10) {{\n    {view.key_field}\n    count\n  }}\n}}\n"


COUNT = GatewayKind(count_fields, _documents, _prices, _example)
