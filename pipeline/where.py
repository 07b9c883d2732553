"""A view's `where`: the Spark SQL predicate that picks the events a view holds.

The predicate sees the view's value fields by their GraphQL names, as the pipeline stores
them (`schema.fieldtypes`): Int and Long as bigint, Float as double, Boolean, String and
an enum's symbol as string, a Decimal and a Date as their text, a DateTime as ms since the
epoch. A field missing from the event, or of another type, is null, for which SQL's
comparisons are null: the event is not held (`amount > 10` drops it; say
`amount IS NULL OR amount > 10` to keep it). A tombstone a view deletes by is always kept.

The predicate is analysed when the view's query is built, so one that does not parse, names
something that is no value field, or is no boolean fails the pipeline's start, naming the
view. So does one for which Spark casts text to another type than bytes, by CAST or
implicitly (`product > 5` on a String casts `product` to bigint, as do `product + 1` and
`abs(product)`), or parses text with a format (`to_timestamp(product, 'yyyy')`, `to_date`,
`unix_timestamp`): in ANSI mode the first event whose text does not cast or parse fails the
query (CAST_INVALID_INPUT), at every replay. They are read from Spark's analysed predicate;
only those that cannot fail pass: `try_cast`, a constant that casts (`quantity > '5'`), and
a Date field to a date, whose text `pipeline.records` wrote from a date. A Decimal's and an
enum's text is the producer's, unchecked, so it is refused as a String's is. A division
(`/`, `div`, `%`, `pmod`) by anything but a constant other than zero or `nullif(x, 0)` is
refused alike: in ANSI mode the first event whose divisor is 0 fails the query
(DIVIDE_BY_ZERO, REMAINDER_BY_ZERO); `try_divide` and `try_mod` pass, and nothing inside a
`try_` function's TryEval is refused. Other failures of ANSI arithmetic (an overflow of a
Long, a cast of a number to a narrower one) are left to Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

from py4j.protocol import Py4JJavaError
from pyspark import SparkContext
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.errors import PipelineError
from schema import FieldType, View

__all__ = ["where_applied"]

log = logging.getLogger(__name__)

_EVENT = "_event"  # never a value field's name: those start with a lowercase letter
# a function Spark runs as another expression (to_date as a cast): its `replacement()`
_REPLACEABLE = "org.apache.spark.sql.catalyst.expressions.RuntimeReplaceable"

_JavaObject = Any  # a py4j proxy of a Catalyst plan or expression
_Found = TypeVar("_Found")
# Catalyst's parses of text as a time with a format, failing in ANSI mode where it cannot
_TIME_PARSES = frozenset({"GetTimestamp", "ToUnixTimestamp", "UnixTimestamp"})
# Catalyst's divisions, failing in ANSI mode where the divisor is zero (DIVIDE_BY_ZERO)
_DIVISIONS = frozenset({"Divide", "IntegralDivide", "Remainder", "Pmod"})
_FAILS = object()  # a constant that does not evaluate
# numbers whose value other than 0 is no 0 as a double
_EXACT_IN_DOUBLE = frozenset(
    {"ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DecimalType"}
)


class _Cast(NamedTuple):
    """A cast Spark would run at every event: what it casts (SQL), from which type, to which."""

    text: str
    source: str
    target: str


def where_applied(events: DataFrame, view: View) -> DataFrame:
    """The keyed `events` (`pipeline.records.keyed_events`) for which `view.where` holds;
    all of them when it is None. PipelineError naming the view and the fix when the
    predicate cannot be evaluated over the view's value fields, or casts text that may not
    cast."""
    if view.where is None:
        return events
    fields = [F.col("fields").getField(f.name).alias(f.name) for f in view.value_fields]
    columns = events.columns
    try:
        predicate = F.expr(view.where)
        if "deleted" in columns:
            predicate = F.col(f"{_EVENT}.deleted") | predicate
        held = events.select(F.struct(*columns).alias(_EVENT), *fields).where(predicate)
    except AnalysisException as exc:  # a ParseException too: it is one
        names = ", ".join(f.name for f in view.value_fields) or "none"
        raise PipelineError(
            f"view {view.name}: where {view.where!r} cannot be evaluated: "
            f"{_first_line(exc)}. It may use the view's value fields by their GraphQL names "
            f"(declared: {names}) and must be a boolean: fix the view's where or its "
            f"value_fields"
        ) from exc
    casts = _checked(view, "casts", lambda: _failing_casts(held, view))
    if casts:
        raise PipelineError(_cast_refusal(view, casts))
    divisions = _checked(view, "divisions", lambda: _failing_divisions(held))
    if divisions:
        raise PipelineError(_division_refusal(view, divisions))
    return held.select(f"{_EVENT}.*")


def _checked(view: View, what: str, check: Callable[[], list[_Found]]) -> list[_Found]:
    """What `check` finds; nothing, with a warning, for a plan it cannot read (Spark then
    judges the where alone)."""
    try:
        return check()
    except Py4JJavaError as exc:
        log.warning("view %s: the where's %s could not be checked: %s", view.name, what, exc)
        return []


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _failing_casts(held: DataFrame, view: View) -> list[_Cast]:
    """The distinct casts and parses of text in `held`'s analysed where that can fail at an
    event."""
    dates = {f.name for f in view.value_fields if f.type is FieldType.DATE}
    found = (
        _Cast(operand.sql(), operand.dataType().simpleString(), parse.dataType().simpleString())
        for parse, operand in _text_parses(*_predicate(held))
        if _may_fail(parse, operand, dates)
    )
    return list(dict.fromkeys(found))


def _failing_divisions(held: DataFrame) -> list[str]:
    """The distinct divisions (SQL) in `held`'s analysed where that can divide by zero."""
    found = (str(d.sql()) for d in _divisions(*_predicate(held)))
    return list(dict.fromkeys(found))


def _predicate(held: DataFrame) -> tuple[_JavaObject, _JavaObject]:
    """`held`'s analysed where (`_condition`), and the class of the functions Spark runs as
    another expression, which `_walk` follows to what runs."""
    jvm = SparkContext._jvm
    assert jvm is not None  # `held` was analysed in it
    return _condition(held), jvm.java.lang.Class.forName(_REPLACEABLE)


def _condition(held: DataFrame) -> _JavaObject:
    """The analysed condition of `held`'s Filter (beneath the Project Spark adds when the
    where takes a column of the input)."""
    plan = held._jdf.queryExecution().analyzed()
    while plan.getClass().getSimpleName() != "Filter":
        plan = plan.children().apply(0)
    return plan.condition()


def _text_parses(
    condition: _JavaObject, replaceable: _JavaObject
) -> Iterator[tuple[_JavaObject, _JavaObject]]:
    """Each expression in `condition` that reads text as another type and fails where it
    cannot (`_parses_text`), with the text it reads."""
    for expression, kind, shared in _walk(condition, replaceable):
        operand = _parses_text(expression, kind)
        if operand is not None:
            yield expression, _shared(operand, shared)


def _divisions(condition: _JavaObject, replaceable: _JavaObject) -> Iterator[_JavaObject]:
    """Each division in `condition` (/, div, %, pmod) that fails the query where its divisor
    is zero (ANSI mode, not try_divide) and whose divisor is not a constant other than zero."""
    for expression, kind, shared in _walk(condition, replaceable):
        if kind not in _DIVISIONS or expression.evalMode().toString() != "ANSI":
            continue
        if not _never_zero(_shared(expression.right(), shared)):
            yield expression


def _never_zero(divisor: _JavaObject) -> bool:
    """Whether `divisor` cannot be 0: a constant other than zero (null included), or
    nullif(x, 0), also as a double."""
    while _widened(divisor):
        divisor = divisor.child()
    if divisor.getClass().getSimpleName() == "NullIf":
        zero = divisor.right()
        return bool(zero.foldable()) and _is_zero(_constant(zero))
    if not divisor.foldable():
        return False
    value = _constant(divisor)
    return value is not _FAILS and not _is_zero(value)


def _widened(expression: _JavaObject) -> bool:
    """Whether `expression` casts a number to a double, which is 0 only where it is (how
    Spark divides an integer by `/`)."""
    if expression.getClass().getSimpleName() != "Cast":
        return False
    source = _type_name(expression.child().dataType())
    return _type_name(expression.dataType()) == "DoubleType" and source in _EXACT_IN_DOUBLE


def _constant(expression: _JavaObject) -> object:
    """The value of a constant expression, as py4j gives it, or _FAILS if it does not
    evaluate (CAST('x' AS INT))."""
    try:
        return expression.eval(None)
    except (Py4JJavaError, PySparkException):
        return _FAILS


def _is_zero(value: object) -> bool:
    """Whether a constant, as py4j gives it (a Spark Decimal as an object), is 0."""
    return value is not None and value is not _FAILS and float(str(value)) == 0.0


def _walk(
    condition: _JavaObject, replaceable: _JavaObject
) -> Iterator[tuple[_JavaObject, str, dict[int, _JavaObject]]]:
    """Every expression of `condition` as Spark runs it (a function replaced by what it runs
    as: to_date(x) is a cast of x), its class's name, and the common expressions met so far
    (what BETWEEN's references point to). Walked with a stack of its own: a where of a
    thousand ORs is as deep."""
    shared: dict[int, _JavaObject] = {}
    stack = [condition]
    while stack:
        expression = stack.pop()
        kind = str(expression.getClass().getSimpleName())
        if kind == "With":
            shared |= {d.id().id(): d.child() for d in _items(expression.defs())}
        yield expression, kind, shared
        if kind == "TryEval":
            continue  # what fails inside is null (try_divide of text, try_mod)
        if replaceable.isInstance(expression):
            stack.append(expression.replacement())
        else:
            stack.extend(reversed(_items(expression.children())))


def _shared(operand: _JavaObject, shared: dict[int, _JavaObject]) -> _JavaObject:
    """`operand`, or for a reference to a common expression, that expression."""
    while operand.getClass().getSimpleName() == "CommonExpressionRef":
        operand = shared[operand.id().id()]
    return operand


def _items(seq: _JavaObject) -> list[_JavaObject]:
    """The items of a Scala Seq."""
    return [seq.apply(i) for i in range(seq.size())]


def _parses_text(expression: _JavaObject, kind: str) -> _JavaObject | None:
    """The text `expression` reads as another type, failing where it cannot, or None: a
    cast in ANSI mode (not try_cast) of text to anything but text or bytes, or a parse of
    text as a time with a format (to_timestamp, to_date, unix_timestamp) in ANSI mode."""
    if kind == "Cast":
        target = expression.dataType()
        text = _is_text(expression.child().dataType())
        if text and not _is_text(target) and _type_name(target) != "BinaryType":
            return expression.child() if expression.evalMode().toString() == "ANSI" else None
    elif kind in _TIME_PARSES and expression.failOnError():
        return expression.left() if _is_text(expression.left().dataType()) else None
    return None


def _is_text(data_type: _JavaObject) -> bool:
    return _type_name(data_type) == "StringType"  # collated too


def _type_name(data_type: _JavaObject) -> str:
    return str(data_type.getClass().getSimpleName()).rstrip("$")


def _may_fail(parse: _JavaObject, operand: _JavaObject, dates: set[str]) -> bool:
    """Whether `parse` of `operand` can fail at some event: a constant's is tried now; a
    Date field's text cast to a date cannot fail; anything else can."""
    if operand.foldable():
        try:
            parse.eval(None)
        except (Py4JJavaError, PySparkException):
            return True
        return False
    of_date = operand.getClass().getSimpleName() == "AttributeReference" and operand.name() in dates
    is_cast = parse.getClass().getSimpleName() == "Cast"
    return not (is_cast and of_date and parse.dataType().typeName() == "date")


def _cast_refusal(view: View, casts: list[_Cast]) -> str:
    listed = ", ".join(f"{c.text} ({c.source}) to {c.target}" for c in casts)
    first = casts[0]
    return (
        f"view {view.name}: where {view.where!r} makes Spark cast {listed} at every event, "
        f"which fails the query at the first value that does not cast (CAST_INVALID_INPUT), "
        f"at every replay: compare text with a quoted string (a Date with DATE "
        f"'2026-01-31') and a number with a number, write try_cast({first.text} AS "
        f"{first.target.upper()}) (null where it does not cast: the event is left out; "
        f"try_to_timestamp for a parse with a format), or declare the field's type a "
        f"number (FieldType.INT, LONG or FLOAT)"
    )


def _division_refusal(view: View, divisions: list[str]) -> str:
    return (
        f"view {view.name}: where {view.where!r} divides at every event ({', '.join(divisions)})"
        f", which fails the query at the first event whose divisor is 0 (DIVIDE_BY_ZERO, "
        f"REMAINDER_BY_ZERO), at every replay: write try_divide(a, b) or try_mod(a, b) (null "
        f"where b is 0: the event is left out), divide by nullif(b, 0), or multiply instead "
        f"(b > 0 AND a > 10 * b for a / b > 10)"
    )
