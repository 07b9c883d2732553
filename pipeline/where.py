"""A view's `where`: the Spark SQL predicate that picks the events a view holds.

The predicate sees the view's value fields by their GraphQL names, as the pipeline stores
them (`schema.fieldtypes`): Int and Long as bigint, Float as double, Boolean, String and
an enum's symbol as string, a Decimal and a Date as their text, a DateTime as ms since the
epoch. A field missing from the event, or of another type, is null, for which SQL's
comparisons are null: the event is not held (`amount > 10` drops it; say
`amount IS NULL OR amount > 10` to keep it). A tombstone a view deletes by is always kept.

The predicate is analysed when the view's query is built, so one that does not parse, names
something that is no value field, or is no boolean fails the pipeline's start, naming the
view.
"""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.errors import PipelineError
from schema import View

__all__ = ["where_applied"]

_EVENT = "_event"  # never a value field's name: those start with a lowercase letter


def where_applied(events: DataFrame, view: View) -> DataFrame:
    """The keyed `events` (`pipeline.records.keyed_events`) for which `view.where` holds;
    all of them when it is None. PipelineError naming the view and the fix when the
    predicate cannot be evaluated over the view's value fields."""
    if view.where is None:
        return events
    fields = [F.col("fields").getField(f.name).alias(f.name) for f in view.value_fields]
    columns = events.columns
    try:
        predicate = F.expr(view.where)
        if "deleted" in columns:
            predicate = F.col(f"{_EVENT}.deleted") | predicate
        held = events.select(F.struct(*columns).alias(_EVENT), *fields).where(predicate)
        return held.select(f"{_EVENT}.*")
    except AnalysisException as exc:  # a ParseException too: it is one
        names = ", ".join(f.name for f in view.value_fields) or "none"
        raise PipelineError(
            f"view {view.name}: where {view.where!r} cannot be evaluated: "
            f"{_first_line(exc)}. It may use the view's value fields by their GraphQL names "
            f"(declared: {names}) and must be a boolean: fix the view's where or its "
            f"value_fields"
        ) from exc


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
