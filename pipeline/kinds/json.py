"""Changelog values written by Spark itself (Real-Time Mode's Kafka sink): the JSON objects
of `schema.changelog`, field for field, built with `to_json`.

Null fields are written as `null`, as the pipeline's own writer does (`to_json` would
drop them), and a row without value fields has `"fields": {}`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["count_value", "event_value"]

_OPTIONS = {"ignoreNullFields": "false"}


def count_value(key: Column, count: Column, last_event_ms: Column) -> Column:
    """A count row's JSON (`schema.encode_count`)."""
    row = F.struct(key.alias("key"), count.alias("count"), last_event_ms.alias("last_event_ms"))
    return F.to_json(row, _OPTIONS)


def event_value(source_partition: Column, source_offset: Column) -> Column:
    """An event row's JSON (`schema.encode_event`) of a row with columns `key`, `event_ms`
    and `fields`, at the given source position."""
    row = F.struct(
        F.col("key"),
        F.col("event_ms"),
        source_partition.cast("int").alias("source_partition"),
        source_offset.cast("long").alias("source_offset"),
        F.col("fields"),
    )
    # `fields` is the last member: a null one ends the text, and is written as `{}`
    return F.regexp_replace(F.to_json(row, _OPTIONS), '"fields":null}$', '"fields":{}}')
