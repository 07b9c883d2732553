"""The aggregates of an `aggregate` view: what each computes over a key's events, which value
fields it takes, and the GraphQL type of its result.

```python
Aggregate("orders", AggregateFunction.COUNT)                  # events of the key
Aggregate("revenue", AggregateFunction.SUM, of="amount")      # Int, Long or Float fields
Aggregate("basket", AggregateFunction.AVG, of="amount")       # a Float
Aggregate("products", AggregateFunction.COUNT_DISTINCT, of="product")  # exact
```

`of` names one of the view's `value_fields` by its GraphQL name. As in SQL, an event whose
field is missing, null or of the wrong type (which reads as null, `schema.fieldtypes`) is
skipped by every aggregate of that field, and still counted by COUNT without `of`; a sum,
minimum, maximum or average no event gave a value to is null, a count of them 0.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from schema.fieldtypes import EnumOf, FieldType, ValueField, ValueType, type_text

__all__ = [
    "EVENT_TIME",
    "RANKED_TYPES",
    "Aggregate",
    "AggregateFunction",
    "aggregate_fields",
    "check_aggregates",
]

# the field of every aggregate row that holds its newest event time (as a latest view's)
EVENT_TIME = "eventTime"

_FIELD = re.compile(r"^[a-z][A-Za-z0-9]*$")
_NUMBERS = (FieldType.INT, FieldType.LONG, FieldType.FLOAT)
# the result types an aggregate view's top-N ranks keys by
RANKED_TYPES = _NUMBERS
# what MIN and MAX compare as stored (schema.fieldtypes): numbers, ms since the epoch, ISO
# dates and text all order as their values do; a decimal's text does not
_ORDERED = (*_NUMBERS, FieldType.TIMESTAMP, FieldType.DATE, FieldType.STRING)
# what COUNT_DISTINCT tells apart as stored: not a decimal's text (1.0 and 1.00 are one)
_DISTINCT = tuple(t for t in FieldType if t is not FieldType.DECIMAL)


class AggregateFunction(enum.Enum):
    """What an `Aggregate` computes over the events of a key."""

    COUNT = "count"  # events; with `of`, the events where the field has a value
    SUM = "sum"  # of Int and Long fields a Long, of a Float field a Float
    MIN = "min"  # of the field's type
    MAX = "max"  # of the field's type
    AVG = "avg"  # a Float
    COUNT_DISTINCT = "count_distinct"  # the distinct values of the field: exact


# the scalar types each function takes, and whether it takes enums
_TAKES: dict[AggregateFunction, tuple[tuple[FieldType, ...], bool]] = {
    AggregateFunction.COUNT: (tuple(FieldType), True),
    AggregateFunction.SUM: (_NUMBERS, False),
    AggregateFunction.MIN: (_ORDERED, False),
    AggregateFunction.MAX: (_ORDERED, False),
    AggregateFunction.AVG: (_NUMBERS, False),
    AggregateFunction.COUNT_DISTINCT: (_DISTINCT, True),
}


@dataclass(frozen=True)
class Aggregate:
    """One result of an aggregate view: `name` is its GraphQL field, `function` what it
    computes, `of` the value field it computes it over (None only for COUNT: the events)."""

    name: str
    function: AggregateFunction
    of: str | None = None

    def __post_init__(self) -> None:
        if not _FIELD.match(self.name):
            raise ValueError(
                f"aggregate {self.name!r} is no GraphQL field name: a letter a-z, then letters "
                f"and digits (e.g. 'revenue', 'avgBasket')"
            )
        if self.of is None and self.function is not AggregateFunction.COUNT:
            raise ValueError(
                f"aggregate {self.name}: {self.function.value} needs the value field it is "
                f"computed over: give it as of=..."
            )

    def result_type(self, of_type: ValueType | None) -> FieldType:
        """The GraphQL type of the result, over a field of `of_type` (None: no field)."""
        function = self.function
        if function in (AggregateFunction.COUNT, AggregateFunction.COUNT_DISTINCT):
            return FieldType.INT
        if function is AggregateFunction.AVG:
            return FieldType.FLOAT
        assert isinstance(of_type, FieldType)  # check_aggregates refused the others
        if function is AggregateFunction.SUM and of_type is FieldType.INT:
            return FieldType.LONG
        return of_type


def check_aggregates(
    view: str,
    taken: tuple[str, ...],
    aggregates: tuple[Aggregate, ...],
    fields: tuple[ValueField, ...],
) -> None:
    """ValueError naming `view` and the aggregate unless each names a value field of a type
    its function takes, and the names of the results are distinct from each other and from
    the other fields of the view's type, `taken` (its key's, `eventTime` or a window's)."""
    if not aggregates:
        raise ValueError(f"view {view}: an aggregate view needs aggregates=(Aggregate(...), ...)")
    names = [a.name for a in aggregates]
    clashes = sorted({n for n in names if names.count(n) > 1 or n in taken})
    if clashes:
        raise ValueError(
            f"view {view}: aggregate names must be distinct and differ from the type's other "
            f"fields ({', '.join(taken)}): rename {', '.join(clashes)}"
        )
    types = {f.name: f.type for f in fields}
    for aggregate in aggregates:
        if aggregate.of is None:
            continue
        if aggregate.of not in types:
            raise ValueError(
                f"view {view}: aggregate {aggregate.name} is of {aggregate.of!r}, which is no "
                f"value field of the view: add ValueField({aggregate.of!r}, ...) to its "
                f"value_fields (known: {', '.join(types) or 'none'})"
            )
        _check_type(view, aggregate, types[aggregate.of])


def _check_type(view: str, aggregate: Aggregate, of_type: ValueType) -> None:
    scalars, enums = _TAKES[aggregate.function]
    if of_type in scalars or (enums and isinstance(of_type, EnumOf)):
        return
    if len(scalars) == len(FieldType):
        allowed = "a scalar or an enum"
    elif len(scalars) == len(FieldType) - 1:
        (left_out,) = set(FieldType) - set(scalars)
        allowed = (
            f"a scalar but {left_out.value}, or an enum (a {left_out.value} is stored as its "
            f"text, unchecked: 1.0 and 1.00 would be two; declare the field a String to "
            f"count its texts)"
        )
    else:
        allowed = ", ".join(t.value for t in scalars)
    raise ValueError(
        f"view {view}: aggregate {aggregate.name} takes the {aggregate.function.value} of "
        f"{aggregate.of}, a {type_text(of_type)}; {aggregate.function.value} takes {allowed}"
    )


def aggregate_fields(
    aggregates: tuple[Aggregate, ...], fields: tuple[ValueField, ...]
) -> tuple[ValueField, ...]:
    """The fields of an aggregate row: one per aggregate, of its result type."""
    types = {f.name: f.type for f in fields}
    return tuple(
        ValueField(a.name, a.result_type(None if a.of is None else types[a.of])) for a in aggregates
    )
