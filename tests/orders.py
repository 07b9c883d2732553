"""The aggregate views of an orders topic the tests run (the pipeline's against the
reference in tests/aggregates.py, the differential cluster's): every aggregate per
customer (the record key), the paid orders only (a `where`), and sales re-keyed by value
fields: per product, and per (status, quantity); and the average basket per customer and
hour, in hopping windows (`HOURLY_BASKETS`). Values are JSON objects with `amount`,
`quantity`, `product`, `status` and the event time in `timestamp`."""

from __future__ import annotations

from typing import Any

from schema import (
    Aggregate,
    AggregateFunction,
    FieldType,
    KeyField,
    KeyType,
    RecordKey,
    ValueField,
    View,
    ViewKind,
    WindowSpec,
)

__all__ = [
    "CUSTOMER_ORDERS",
    "HOURLY_BASKETS",
    "ORDER_VIEWS",
    "PAID_ORDERS",
    "PRODUCT_SALES",
    "STATUS_LINES",
    "paid",
]

F = AggregateFunction

CUSTOMER_ORDERS = View(
    name="customer_orders",
    topic="orders",
    kind=ViewKind.AGGREGATE,
    key_field="customer",
    type_name="CustomerOrders",
    point_field="customerOrders",
    many_field="customerOrdersMany",
    top_field="topCustomers",
    event_time_field="timestamp",
    value_fields=(
        ValueField("amount", FieldType.FLOAT),
        ValueField("quantity", FieldType.INT),
        ValueField("product"),
        ValueField("status"),
    ),
    aggregates=(
        Aggregate("orders", F.COUNT),
        Aggregate("priced", F.COUNT, "amount"),
        Aggregate("revenue", F.SUM, "amount"),
        Aggregate("items", F.SUM, "quantity"),
        Aggregate("smallest", F.MIN, "amount"),
        Aggregate("largest", F.MAX, "quantity"),
        Aggregate("basket", F.AVG, "amount"),
        Aggregate("products", F.COUNT_DISTINCT, "product"),
        Aggregate("firstProduct", F.MIN, "product"),
    ),
)
PAID_ORDERS = View(
    name="paid_orders",
    topic="orders",
    kind=ViewKind.AGGREGATE,
    key_field="customer",
    type_name="PaidOrders",
    point_field="paidOrders",
    many_field="paidOrdersMany",
    top_field="topPaidCustomers",
    event_time_field="timestamp",
    value_fields=CUSTOMER_ORDERS.value_fields,
    aggregates=(Aggregate("orders", F.COUNT), Aggregate("revenue", F.SUM, "amount")),
    where="status = 'PAID' AND amount > 0",
)


def paid(fields: dict[str, Any]) -> bool:
    """PAID_ORDERS' where, in Python."""
    amount = fields["amount"]
    return fields["status"] == "PAID" and amount is not None and amount > 0


PRODUCT_SALES = View(
    name="product_sales",
    topic="orders",
    kind=ViewKind.AGGREGATE,
    key_field="product",
    type_name="ProductSales",
    point_field="productSales",
    many_field="productSalesMany",
    top_field="topProducts",
    event_time_field="timestamp",
    value_fields=CUSTOMER_ORDERS.value_fields,
    aggregates=(
        Aggregate("orders", F.COUNT),
        Aggregate("revenue", F.SUM, "amount"),
        Aggregate("most", F.MAX, "quantity"),
    ),
    group_by=("product",),
)
STATUS_LINES = View(
    name="status_lines",
    topic="orders",
    kind=ViewKind.AGGREGATE,
    key_field="line",
    type_name="StatusLine",
    point_field="statusLine",
    many_field="statusLines",
    top_field="topStatusLines",
    event_time_field="timestamp",
    value_fields=CUSTOMER_ORDERS.value_fields,
    aggregates=(Aggregate("orders", F.COUNT), Aggregate("revenue", F.SUM, "amount")),
    group_by=("status", "quantity"),
    key_type=RecordKey((KeyField("status"), KeyField("quantity", KeyType.INT))),
)

# the average basket per customer and hour, a new hour every 15 minutes: an order is in
# four windows; kept 400 days, since the tests' orders are of 1 January 2026
HOURLY_BASKETS = View(
    name="hourly_baskets",
    topic="orders",
    kind=ViewKind.WINDOWED_AGGREGATE,
    key_field="customer",
    type_name="HourlyBasket",
    point_field="hourlyBaskets",
    top_field="topCustomersPerHour",
    event_time_field="timestamp",
    value_fields=CUSTOMER_ORDERS.value_fields,
    aggregates=(
        Aggregate("basket", F.AVG, "amount"),
        Aggregate("revenue", F.SUM, "amount"),
        Aggregate("products", F.COUNT_DISTINCT, "product"),
    ),
    window=WindowSpec(
        size_ms=3_600_000,
        slide_ms=900_000,
        grace_ms=3_600_000,
        retention_ms=400 * 24 * 3_600_000,
    ),
)

ORDER_VIEWS = (CUSTOMER_ORDERS, PAID_ORDERS, PRODUCT_SALES, STATUS_LINES)
