"""A pure-Python reference of aggregate views, which the pipeline's and the cluster's
answers are compared with: per key, every aggregate of the view over the events `where`
holds for, as SQL computes them (a field missing or of the wrong type is null and skipped).

It reads a raw JSON value's fields as the pipeline does for the types the tests produce:
a Float from a JSON number, an Int from a JSON integer, a String from a JSON string;
anything else is null. `orders` is the hypothesis strategy of the events of the orders
views (`tests.orders`). `windowed_reference` is the same per key and window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from schema import AggregateFunction, FieldType, RecordKey, ValueType, View

__all__ = [
    "PRODUCTS",
    "T0",
    "Event",
    "Expected",
    "orders",
    "reference",
    "same_results",
    "windowed_reference",
]

T0 = 1_767_225_600_000
PRODUCTS = ("p1", "p2", "p3", "Straße", "日本")

_values = st.fixed_dictionaries(
    {},
    optional={
        "amount": st.one_of(
            st.floats(-1e6, 1e6, allow_nan=False), st.integers(-1000, 1000), st.just("n/a")
        ),
        "quantity": st.one_of(st.integers(-50, 50), st.just("two")),
        "product": st.sampled_from(PRODUCTS),
        "status": st.sampled_from(["PAID", "OPEN", "paid"]),
    },
)


def orders(
    customers: list[str], max_size: int = 40, span_ms: int = 10_000
) -> st.SearchStrategy[list[Event]]:
    """Lists of order events of `customers` (few, so that they repeat), event times out of
    order over `span_ms` from T0, fields missing, mistyped or of other case."""
    event = st.builds(
        Event,
        key=st.sampled_from(customers),
        event_ms=st.integers(T0, T0 + span_ms),
        value=_values,
    )
    return st.lists(event, min_size=1, max_size=max_size)


@dataclass(frozen=True)
class Event:
    """One input event: its key text, event time and raw JSON value (without the time)."""

    key: str
    event_ms: int
    value: Mapping[str, Any]


@dataclass(frozen=True)
class Expected:
    """What a key's row must hold: the newest event time, how many events it aggregated
    and each aggregate's result by name."""

    event_ms: int
    events: int
    results: dict[str, Any]


def _read(value_type: ValueType, raw: Any) -> Any:
    if isinstance(raw, bool):
        return None
    if value_type is FieldType.FLOAT:
        return float(raw) if isinstance(raw, int | float) else None
    if value_type in (FieldType.INT, FieldType.LONG):
        return raw if isinstance(raw, int) else None
    return raw if isinstance(raw, str) else None


def _group_key(view: View, fields: dict[str, Any]) -> str | None:
    """The key text of a grouped view's event, or None (a dead letter): a null group
    field, or a lone empty string."""
    values = {name: fields[name] for name in view.group_by}
    if None in values.values():
        return None
    if isinstance(view.key_type, RecordKey):
        return view.key_type.text(values)
    (value,) = values.values()
    return view.key_type.text(value) if value != "" else None


_FUNCTIONS: dict[AggregateFunction, Callable[[list[Any]], Any]] = {
    AggregateFunction.COUNT: len,
    AggregateFunction.SUM: lambda values: sum(values) if values else None,
    AggregateFunction.MIN: lambda values: min(values) if values else None,
    AggregateFunction.MAX: lambda values: max(values) if values else None,
    AggregateFunction.AVG: lambda values: sum(values) / len(values) if values else None,
    AggregateFunction.COUNT_DISTINCT: lambda values: len(set(values)),
}


def reference(
    view: View, events: Iterable[Event], where: Callable[[dict[str, Any]], bool] | None = None
) -> dict[str, Expected]:
    """Each key's expected row in `view` after `events`, by key text (a grouped view's from
    its group fields); `where` is the Python twin of the view's SQL predicate, over the
    fields as read (None: every event)."""
    by_key: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for key, event_ms, fields in _held(view, events, where):
        by_key.setdefault(key, []).append((event_ms, fields))
    return {key: _expected(view, held) for key, held in by_key.items()}


def windowed_reference(
    view: View, events: Iterable[Event], where: Callable[[dict[str, Any]], bool] | None = None
) -> dict[tuple[str, int], Expected]:
    """Each (key, window start)'s expected window of windowed aggregate `view` (tumbling
    or hopping) after `events`, none of them late; `Expected.events` is the window's count."""
    assert view.window is not None
    by_window: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = {}
    for key, event_ms, fields in _held(view, events, where):
        for start in view.window.starts_of(event_ms):
            by_window.setdefault((key, start), []).append((event_ms, fields))
    return {at: _expected(view, held) for at, held in by_window.items()}


def _held(
    view: View, events: Iterable[Event], where: Callable[[dict[str, Any]], bool] | None
) -> Iterable[tuple[str, int, dict[str, Any]]]:
    """(key text, event time, fields as read) of each event the view holds."""
    types = {f.name: f.type for f in view.value_fields}
    for event in events:
        fields = {name: _read(t, event.value.get(name)) for name, t in types.items()}
        key = _group_key(view, fields) if view.group_by else event.key
        if key is not None and (where is None or where(fields)):
            yield key, event.event_ms, fields


def _expected(view: View, held: list[tuple[int, dict[str, Any]]]) -> Expected:
    results = {}
    for aggregate in view.aggregates:
        if aggregate.of is None:
            values: list[Any] = [1 for _ in held]
        else:
            values = [f[aggregate.of] for _, f in held if f[aggregate.of] is not None]
        results[aggregate.name] = _FUNCTIONS[aggregate.function](values)
    return Expected(max(t for t, _ in held), len(held), results)


def same_results(got: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """Whether two rows' results are equal, floats within a relative 1e-9 (Spark adds them
    in another order)."""
    if set(got) != set(expected):
        return False
    for name, want in expected.items():
        have = got[name]
        if isinstance(want, float) and isinstance(have, int | float):
            if not math.isclose(have, want, rel_tol=1e-9, abs_tol=1e-9):
                return False
        elif have != want:
            return False
    return True
