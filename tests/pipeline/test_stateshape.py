"""A view's checkpoint keeps the shape of the state it was written for: a view whose
aggregates, groups or windows changed is not resumed from it (Spark keeps state by
position: it would refuse the state, or carry on from another aggregate's results)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pipeline.errors import PipelineConfigError
from pipeline.stateshape import SHAPE_FILE, check_state_shape
from schema import Aggregate, AggregateFunction, FieldType, ValueField, View, WindowSpec
from tests.orders import CUSTOMER_ORDERS, HOURLY_BASKETS

F = AggregateFunction


def committed(checkpoint: Path) -> Path:
    """`checkpoint` as a query that committed its first micro-batch leaves it."""
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "0").write_text("v1\n")
    return checkpoint


def test_a_view_resumes_the_checkpoint_written_for_it(tmp_path: Path) -> None:
    check_state_shape(CUSTOMER_ORDERS, tmp_path)  # the first start keeps the shape
    assert (tmp_path / SHAPE_FILE).is_file()
    committed(tmp_path)
    check_state_shape(CUSTOMER_ORDERS, tmp_path)  # the same view resumes
    where = dataclasses.replace(CUSTOMER_ORDERS, where="amount > 5")  # no other state
    check_state_shape(where, tmp_path)


def _swapped(view: View) -> View:
    first, second, *rest = view.aggregates
    return dataclasses.replace(view, aggregates=(second, first, *rest))


@pytest.mark.parametrize(
    ("view", "changed", "change"),
    [
        (
            CUSTOMER_ORDERS,
            dataclasses.replace(
                CUSTOMER_ORDERS,
                aggregates=(*CUSTOMER_ORDERS.aggregates, Aggregate("dearest", F.MAX, "amount")),
            ),
            '"avg of amount (a double)", "count_distinct of product (a text)", '
            '"min of product (a text)", "max of amount (a double)"]',
        ),
        # the same shape of state in both places: Spark itself would resume it silently
        (
            CUSTOMER_ORDERS,
            _swapped(CUSTOMER_ORDERS),
            'aggregates was ["count of the events", "count of amount (a double)", ',
        ),
        (
            CUSTOMER_ORDERS,
            dataclasses.replace(
                CUSTOMER_ORDERS,
                value_fields=(
                    ValueField("amount", FieldType.INT),
                    *CUSTOMER_ORDERS.value_fields[1:],
                ),
            ),
            'now ["count of the events", "count of amount (an integer)", '
            '"sum of amount (an integer)"',
        ),
        (
            HOURLY_BASKETS,
            dataclasses.replace(
                HOURLY_BASKETS,
                window=WindowSpec(size_ms=3_600_000, grace_ms=3_600_000, retention_ms=10**10),
            ),
            'window was "size_ms=3600000 slide_ms=900000 gap_ms=None", now '
            '"size_ms=3600000 slide_ms=None gap_ms=None"',
        ),
    ],
)
def test_a_view_whose_state_changed_is_not_resumed_naming_what_changed(
    tmp_path: Path, view: View, changed: View, change: str
) -> None:
    check_state_shape(view, committed(tmp_path))
    with pytest.raises(PipelineConfigError) as refused:
        check_state_shape(changed, tmp_path)
    message = str(refused.value)
    assert message.startswith(f"view {view.name}: its checkpoint {tmp_path} keeps state for")
    assert change in message
    assert re.search(r"delete the checkpoint directory \(the view is computed anew", message)
    check_state_shape(view, tmp_path)  # the definition restored resumes


def _renamed(view: View) -> View:
    first, *rest = view.aggregates
    return dataclasses.replace(view, aggregates=(dataclasses.replace(first, name="count"), *rest))


@pytest.mark.parametrize(
    "changed",
    [
        _renamed(CUSTOMER_ORDERS),  # a result's name is no part of the state
        dataclasses.replace(  # Int and Long are stored alike
            CUSTOMER_ORDERS,
            value_fields=tuple(
                ValueField(f.name, FieldType.LONG) if f.name == "quantity" else f
                for f in CUSTOMER_ORDERS.value_fields
            ),
        ),
        dataclasses.replace(  # the grace delays the watermark; the windows stay
            HOURLY_BASKETS,
            window=dataclasses.replace(HOURLY_BASKETS.window, grace_ms=7_200_000),  # type: ignore[type-var]
        ),
    ],
    ids=["a result renamed", "Int to Long", "another grace"],
)
def test_a_change_that_keeps_the_state_resumes(tmp_path: Path, changed: View) -> None:
    view = HOURLY_BASKETS if changed.name == HOURLY_BASKETS.name else CUSTOMER_ORDERS
    check_state_shape(view, committed(tmp_path))
    check_state_shape(changed, tmp_path)


def test_a_checkpoint_without_commits_or_without_a_shape_takes_the_views(tmp_path: Path) -> None:
    check_state_shape(CUSTOMER_ORDERS, tmp_path)
    swapped = _swapped(CUSTOMER_ORDERS)
    check_state_shape(swapped, tmp_path)  # nothing committed yet: no state to keep
    (tmp_path / SHAPE_FILE).unlink()  # a checkpoint an earlier statefed wrote
    check_state_shape(CUSTOMER_ORDERS, committed(tmp_path))
    with pytest.raises(PipelineConfigError, match="keeps state for another definition"):
        check_state_shape(swapped, tmp_path)
