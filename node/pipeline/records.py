"""Input records as every view sees them: a UTF-8 entity key and an event time.

A record without a usable key or event time cannot be placed in any view; it goes to
the dead-letter topic with the reason from `reject_reason`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = [
    "REASON_BAD_UTF8",
    "REASON_EMPTY_KEY",
    "REASON_NO_KEY",
    "REASON_NO_TIMESTAMP",
    "keyed_events",
    "reject_reason",
    "rejected_records",
]

REASON_NO_KEY = "null key"
REASON_BAD_UTF8 = "key is not valid UTF-8"
REASON_EMPTY_KEY = "empty key"
REASON_NO_TIMESTAMP = "missing timestamp"


def reject_reason() -> Column:
    """Why a raw Kafka row (key binary, timestamp) is unusable, or null if it is fine."""
    key = F.col("key").cast("string")
    return (
        F.when(F.col("key").isNull(), F.lit(REASON_NO_KEY))
        .when(~F.is_valid_utf8(key), F.lit(REASON_BAD_UTF8))
        # the lookup API rejects an empty key, so such a record could never be read
        .when(F.length(F.col("key")) == 0, F.lit(REASON_EMPTY_KEY))
        .when(F.col("timestamp").isNull(), F.lit(REASON_NO_TIMESTAMP))
    )


def keyed_events(raw: DataFrame) -> DataFrame:
    """The usable rows of a raw Kafka stream: `key` (string), `event_ms`, `value` (binary)."""
    return raw.where(reject_reason().isNull()).select(
        F.col("key").cast("string").alias("key"),
        F.unix_millis(F.col("timestamp")).alias("event_ms"),
        F.col("value"),
    )


def rejected_records(raw: DataFrame) -> DataFrame:
    """The unusable rows of a raw Kafka stream, with their `reason`."""
    return raw.withColumn("reason", reject_reason()).where(F.col("reason").isNotNull())
