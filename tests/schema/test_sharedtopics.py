"""Views of one topic read its records alike: the same key format where they read the
key, the same value format (and subject, under TopicNameStrategy) where they read the
value; else each would dead-letter what the other reads."""

from __future__ import annotations

import dataclasses
import re

import pytest

from schema import CATALOGUE, KeyType, SubjectStrategy, ValueFormat, View
from schema.sharedtopics import check_shared_topics
from tests.orders import CUSTOMER_ORDERS, ORDER_VIEWS

WORDS = CATALOGUE[0]


def test_the_built_in_and_the_orders_catalogues_read_their_topics_alike() -> None:
    check_shared_topics(CATALOGUE)
    check_shared_topics(ORDER_VIEWS)  # grouped views read no record key: theirs differ


def _other(**change: object) -> View:
    """A second view of the orders topic, its names its own."""
    names = {"point_field": "x", "many_field": "xs", "top_field": "topX", "type_name": "Other"}
    return dataclasses.replace(CUSTOMER_ORDERS, name="other_orders", **names, **change)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"key_type": KeyType.LONG},
            "other record keys (key_type KeyType.STRING and KeyType.LONG)",
        ),
        (
            {"value_format": ValueFormat.AVRO},
            "other values (value_format ValueFormat.JSON and ValueFormat.AVRO)",
        ),
    ],
)
def test_views_reading_one_topic_differently_are_refused_naming_both(
    change: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError) as refused:
        check_shared_topics([CUSTOMER_ORDERS, _other(**change)])
    message = str(refused.value)
    assert message.startswith("views customer_orders and other_orders both read topic 'orders'")
    assert problem in message and "declare the same" in message


def test_subjects_differ_only_where_views_name_a_type_each() -> None:
    avro = dataclasses.replace(CUSTOMER_ORDERS, value_format=ValueFormat.AVRO)
    elsewhere = _other(value_format=ValueFormat.AVRO, value_subject="orders-v2")
    with pytest.raises(
        ValueError, match=re.escape("(value_subject 'orders-value' and 'orders-v2')")
    ):
        check_shared_topics([avro, elsewhere])
    typed = [
        dataclasses.replace(
            view, subject_strategy=SubjectStrategy.RECORD_NAME, value_subject=subject
        )
        for view, subject in ((avro, "com.acme.Order"), (elsewhere, "com.acme.Refund"))
    ]
    check_shared_topics(typed)  # a topic of several types: a subject per type


def test_a_view_reading_nothing_of_the_value_takes_any_value_format() -> None:
    counts = dataclasses.replace(
        WORDS, name="order_counts", topic="orders", point_field="orderCount",
        many_field="orderCounts", top_field="topOrderCounts", type_name="OrderCount",
    )  # fmt: skip
    avro = dataclasses.replace(CUSTOMER_ORDERS, value_format=ValueFormat.AVRO)
    check_shared_topics([avro, counts])
    timed = dataclasses.replace(counts, event_time_field="timestamp")
    with pytest.raises(ValueError, match="other values"):
        check_shared_topics([avro, timed])
