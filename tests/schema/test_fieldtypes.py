"""Value field types: what each stored or wire value shows as, that showing is stable across
the node-to-gateway hop, and the naming rule for names from a schema."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema import (
    EnumOf,
    FieldType,
    ListOf,
    RecordOf,
    ValueField,
    ValueType,
    field_value,
    graphql_name,
    graphql_type_name,
    wire_value,
)

STATUS = EnumOf("Status", ("OPEN", "PAID"))
POINT = RecordOf("Point", (ValueField("x", FieldType.INT), ValueField("label")))
SHOWN: list[tuple[ValueType, Any, Any]] = [
    (FieldType.STRING, "text", "text"),
    (FieldType.STRING, 5, None),
    (FieldType.INT, 2**31 - 1, 2**31 - 1),
    (FieldType.INT, 2**31, None),
    (FieldType.INT, True, None),
    (FieldType.INT, "5", None),
    (FieldType.LONG, 2**63 - 1, 2**63 - 1),
    (FieldType.LONG, "-9223372036854775808", -(2**63)),  # as a node writes it
    (FieldType.LONG, 2**63, None),
    (FieldType.LONG, "12a", None),
    (FieldType.FLOAT, 2, 2.0),
    (FieldType.FLOAT, 1.5, 1.5),
    (FieldType.FLOAT, "1.5", None),
    (FieldType.BOOLEAN, False, False),
    (FieldType.BOOLEAN, 0, None),
    (FieldType.DECIMAL, "12.50", Decimal("12.50")),
    (FieldType.DECIMAL, 3, Decimal(3)),
    (FieldType.DECIMAL, "NaN", None),
    (FieldType.DECIMAL, "twelve", None),
    (FieldType.TIMESTAMP, 1_767_225_600_123, datetime(2026, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)),
    (
        FieldType.TIMESTAMP,
        "2026-01-01T01:00:00.123+01:00",
        datetime(2026, 1, 1, 0, 0, 0, 123000, tzinfo=UTC),
    ),
    (FieldType.TIMESTAMP, "2026-01-01T00:00:00", None),  # no zone: no instant
    (FieldType.TIMESTAMP, 10**20, None),
    (FieldType.TIMESTAMP, "0001-01-01T00:00:00+01:00", None),  # before year 1 in UTC
    (FieldType.FLOAT, 10**400, None),  # beyond a double
    (FieldType.DATE, "2026-11-28", date(2026, 11, 28)),
    (FieldType.DATE, "28.11.2026", None),
    (STATUS, "PAID", "PAID"),
    (STATUS, "LOST", None),
    (ListOf(FieldType.INT), [1, None, "x"], [1, None, None]),
    (ListOf(FieldType.INT), "1,2", None),
    (POINT, {"x": 1, "label": "a", "other": 2}, {"x": 1, "label": "a"}),
    (POINT, {"x": "1"}, {"x": None, "label": None}),
    (POINT, [1], None),
    (ListOf(POINT), [{"x": 2}], [{"x": 2, "label": None}]),
]


@pytest.mark.parametrize(("value_type", "value", "shown"), SHOWN)
def test_a_value_shows_as_its_type_says_or_as_null(
    value_type: ValueType, value: Any, shown: Any
) -> None:
    assert field_value(value_type, value) == shown
    assert field_value(value_type, None) is None


_TYPES: list[ValueType] = [
    FieldType.STRING,
    FieldType.INT,
    FieldType.LONG,
    FieldType.FLOAT,
    FieldType.BOOLEAN,
]
_TYPES += [FieldType.DECIMAL, FieldType.TIMESTAMP, FieldType.DATE, STATUS]
_STORED = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["PAID", "2026-11-28", "12.50", "1.5e3", "2026-01-01T00:00:00Z"]),
)


@given(
    value_type=st.sampled_from([*_TYPES, ListOf(FieldType.LONG), ListOf(STATUS), POINT]),
    stored=st.one_of(
        _STORED,
        st.lists(_STORED, max_size=3),
        st.fixed_dictionaries({"x": _STORED, "label": _STORED}),
    ),
)
def test_what_a_node_writes_shows_at_the_gateway_as_it_did_at_the_node(
    value_type: ValueType, stored: Any
) -> None:
    shown = field_value(value_type, stored)
    assert field_value(value_type, wire_value(value_type, shown)) == shown


@pytest.mark.parametrize(
    ("source", "field", "type_name"),
    [
        ("order_id", "orderId", "OrderId"),
        ("first-name", "firstName", "FirstName"),
        ("_ts", "ts", "Ts"),
        ("OrderID", "orderID", "OrderID"),
        ("2fa", "f2fa", "T2fa"),
        ("geo.lat", "geoLat", "GeoLat"),
        ("x__y", "xY", "XY"),
    ],
)
def test_names_from_a_schema_become_graphql_names_by_the_documented_rule(
    source: str, field: str, type_name: str
) -> None:
    assert (graphql_name(source), graphql_type_name(source)) == (field, type_name)
    ValueField(graphql_name(source), source=source)  # a valid field


def test_a_field_named_as_graphql_cannot_be_says_what_to_name_it() -> None:
    with pytest.raises(ValueError, match="name it 'orderId' and give 'order_id' as its source"):
        ValueField("order_id")
    with pytest.raises(ValueError, match="no letter or digit"):
        graphql_name("__")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: EnumOf("Status", ()), "distinct symbols"),
        (lambda: EnumOf("Status", ("A", "A")), "distinct symbols"),
        (lambda: EnumOf("Status", ("true",)), "not true, false or null"),
        (lambda: EnumOf("Status", ("mro",)), "not mro or _x_"),
        (lambda: EnumOf("Status", ("_x_",)), "not mro or _x_"),
        (lambda: EnumOf("status", ("A",)), "no GraphQL type name"),
        (lambda: RecordOf("Point", ()), "fields of distinct names"),
        (lambda: RecordOf("Point", (ValueField("x"), ValueField("x"))), "distinct names"),
    ],
)
def test_an_enum_or_record_graphql_cannot_show_is_refused(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()
