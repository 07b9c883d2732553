"""Aggregate views as a catalogue declares them: the result types, and every mistake refused
when the view is declared, naming the view, the aggregate or field, and the fix."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from schema import (
    Aggregate,
    AggregateFunction,
    EnumOf,
    FieldType,
    KeyField,
    KeyType,
    ListOf,
    RecordKey,
    ValueField,
    ViewKind,
    WindowSpec,
)
from tests.orders import CUSTOMER_ORDERS, PRODUCT_SALES, STATUS_LINES

F = AggregateFunction


def test_each_result_has_the_type_its_function_gives() -> None:
    types = {f.name: f.type for f in CUSTOMER_ORDERS.row_fields}
    assert types == {
        "orders": FieldType.INT,
        "priced": FieldType.INT,
        "revenue": FieldType.FLOAT,  # a sum of Floats
        "items": FieldType.LONG,  # a sum of Ints
        "smallest": FieldType.FLOAT,
        "largest": FieldType.INT,
        "basket": FieldType.FLOAT,
        "products": FieldType.INT,
        "firstProduct": FieldType.STRING,
    }
    # a top-N ranks by the numeric results only
    assert "firstProduct" not in CUSTOMER_ORDERS.ranked_fields
    assert CUSTOMER_ORDERS.ranked_fields[:3] == ("orders", "priced", "revenue")


REFUSED: list[tuple[dict[str, Any], str]] = [
    (
        {"aggregates": (Aggregate("total", F.SUM, "product"),)},
        "aggregate total takes the sum of product, a String; sum takes Int, Long, Float",
    ),
    (
        {"aggregates": (Aggregate("total", F.AVG, "colour"),)},
        "aggregate total is of 'colour', which is no value field of the view",
    ),
    ({"aggregates": ()}, "an aggregate view needs aggregates="),
    (
        {"aggregates": (Aggregate("customer", F.COUNT), Aggregate("eventTime", F.COUNT))},
        "rename customer, eventTime",
    ),
    (
        {
            "kind": ViewKind.WINDOWED_AGGREGATE,
            "window": WindowSpec(size_ms=60_000, retention_ms=60_000),
            "many_field": "",
            "aggregates": (Aggregate("count", F.COUNT), Aggregate("end", F.MAX, "amount")),
        },
        "other fields (customer, start, end, count): rename count, end",
    ),
    ({"aggregates": (Aggregate("first", F.MIN, "product"),)}, "has none: add one"),
    ({"kind": ViewKind.LATEST}, "aggregates are for aggregate views"),
    ({"where": "  "}, "where must be a predicate"),
    ({"group_by": ("amount",)}, "group field(s) ['amount'] must be String"),
    ({"group_by": ("colour",)}, "must name distinct value fields"),
    ({"group_by": ("product",)}, "set key_field='product'"),
    (
        {"group_by": ("product",), "key_field": "product", "key_type": KeyType.LONG},
        "declare key_type=KeyType.STRING",
    ),
    (
        {"group_by": ("status", "quantity")},
        'declare key_type=RecordKey((KeyField("status"), KeyField("quantity", KeyType.INT)))',
    ),
]


@pytest.mark.parametrize(("change", "says"), REFUSED)
def test_a_mistake_is_refused_naming_the_view_and_the_fix(
    change: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValueError) as refused:
        dataclasses.replace(CUSTOMER_ORDERS, **change)
    assert str(refused.value).startswith("view customer_orders: ")
    assert says in str(refused.value)


def test_an_aggregate_needs_its_field_unless_it_counts_events() -> None:
    with pytest.raises(ValueError, match="aggregate total: sum needs the value field"):
        Aggregate("total", F.SUM)
    with pytest.raises(ValueError, match="is no GraphQL field name"):
        Aggregate("Total", F.COUNT)


def test_distinct_counts_take_any_scalar_but_a_decimal_or_an_enum_but_no_list() -> None:
    fields = (
        ValueField("tier", EnumOf("Tier", ("GOLD", "SILVER"))),
        ValueField("tags", ListOf(FieldType.STRING)),
        ValueField("price", FieldType.DECIMAL),
    )
    tiers = Aggregate("tiers", F.COUNT_DISTINCT, "tier")
    view = dataclasses.replace(CUSTOMER_ORDERS, value_fields=fields, aggregates=(tiers,))
    assert view.row_fields == (ValueField("tiers", FieldType.INT),)
    for other in ("tags", "price"):  # a decimal is its text: 1.0 and 1.00 would be two
        with pytest.raises(
            ValueError,
            match=r"takes a scalar but Decimal, or an enum \(a Decimal .*declare the field a Str",
        ):
            dataclasses.replace(
                view, aggregates=(tiers, Aggregate("others", F.COUNT_DISTINCT, other))
            )
    counted = Aggregate("priced", F.COUNT, "price")  # a count of events with a price
    assert dataclasses.replace(view, aggregates=(counted,)).aggregates == (counted,)


def test_a_view_grouped_by_fields_is_keyed_by_them() -> None:
    assert PRODUCT_SALES.key_type is KeyType.STRING
    assert STATUS_LINES.key_type == RecordKey(
        (KeyField("status"), KeyField("quantity", KeyType.INT))
    )
    assert STATUS_LINES.key_names == ("status", "quantity")
