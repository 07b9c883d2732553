"""Spark's key text of each key type equals schema.keytypes' and schema.recordkeys' (what the
nodes and the gateway compute), for the serializers' bytes; keys of the wrong size, and
record keys not written as Jackson writes them, are rejected, naming it."""

from __future__ import annotations

import math
import random

import pytest
from pyspark.sql import SparkSession

from pipeline.keys import (
    REASON_BAD_UTF8,
    REASON_NO_KEY,
    REASON_NOT_FINITE,
    key_reason,
    key_text,
    not_record_key,
    wrong_key_size,
)
from schema import KeyField, KeyType, RecordKey

_RNG = random.Random(28)
_INT, _LONG = 2**31, 2**63


def _ints(bound: int) -> list[int | float | str]:
    """The range's ends, around zero, then 200 drawn from it."""
    return [-bound, -1, 0, 1, bound - 1, *(_RNG.randint(-bound, bound - 1) for _ in range(200))]


KEYS: dict[KeyType, list[int | float | str]] = {
    KeyType.STRING: ["a", "é", "日本", "🙂", "x" * 300],
    KeyType.INT: _ints(_INT),
    KeyType.LONG: _ints(_LONG),
    KeyType.DOUBLE: [-1.7976931348623157e308, -1e308, -1.5, -5e-324, -0.0, 0.0, 5e-324, 1.0,
                     1.7976931348623157e308, *(_RNG.uniform(-1e12, 1e12) for _ in range(200))],
}  # fmt: skip


@pytest.mark.parametrize("key_type", list(KeyType), ids=lambda t: t.value)
def test_spark_computes_the_key_text_the_serving_layer_does(
    spark: SparkSession, key_type: KeyType
) -> None:
    keys = KEYS[key_type]
    rows = [(key_type.serialize(k),) for k in keys]
    frame = spark.createDataFrame(rows, "key binary")
    got = frame.select(key_reason(key_type).alias("reason"), key_text(key_type).alias("text"))
    collected = got.collect()
    assert [r["reason"] for r in collected] == [None] * len(keys)
    assert [r["text"] for r in collected] == [key_type.text(k) for k in keys]


@pytest.mark.parametrize("key_type", [KeyType.INT, KeyType.LONG, KeyType.DOUBLE])
def test_a_key_of_the_wrong_size_is_rejected_naming_the_serializer(
    spark: SparkSession, key_type: KeyType
) -> None:
    frame = spark.createDataFrame([(b"abc",), (b"",), (None,)], "key binary")
    reasons = [r[0] for r in frame.select(key_reason(key_type)).collect()]
    assert reasons == [wrong_key_size(key_type)] * 2 + [REASON_NO_KEY]
    assert f"{key_type.value}" in wrong_key_size(key_type)


def test_a_double_key_graphql_cannot_carry_is_rejected(spark: SparkSession) -> None:
    """NaN (Java's, and any other bits) and the infinities: a Float has none of them."""
    keys = [KeyType.DOUBLE.serialize(k) for k in (math.nan, math.inf, -math.inf)]
    keys += [bytes.fromhex("fff8000000000000"), bytes.fromhex("7ff0000000000001")]
    frame = spark.createDataFrame([(k,) for k in keys], "key binary")
    reasons = [r[0] for r in frame.select(key_reason(KeyType.DOUBLE)).collect()]
    assert reasons == [REASON_NOT_FINITE] * len(keys)


RECORD = RecordKey((KeyField("shop"), KeyField("seq", KeyType.LONG), KeyField("lane", KeyType.INT)))
_SHOPS = ["", "a", "a\x00b", 'q" \\ / \n \x01 \x1f é 日本 🙂', "x" * 300]
RECORD_KEYS = [
    {"shop": shop, "seq": seq, "lane": lane}
    for shop in _SHOPS
    for seq in (-(2**63), -1, 0, 2**63 - 1, _RNG.randint(-_LONG, _LONG - 1))
    for lane in (-(2**31), 0, 2**31 - 1)
]


def test_spark_computes_the_key_text_of_a_record_key_the_serving_layer_does(
    spark: SparkSession,
) -> None:
    rows = [(RECORD.serialize(k),) for k in RECORD_KEYS]
    frame = spark.createDataFrame(rows, "key binary")
    got = frame.select(key_reason(RECORD).alias("reason"), key_text(RECORD).alias("text"))
    collected = got.collect()
    assert [r["reason"] for r in collected] == [None] * len(RECORD_KEYS)
    assert [r["text"] for r in collected] == [RECORD.text(k) for k in RECORD_KEYS]


@pytest.mark.parametrize(
    "data",
    [
        b'{"shop": "a","seq":1,"lane":1}',  # a space
        b'{"seq":1,"shop":"a","lane":1}',  # another order
        b'{"shop":"a","seq":1}',  # a field missing
        b'{"shop":"a","seq":1,"lane":1,"x":1}',  # a field more
        b'{"shop":"a","seq":"1","lane":1}',  # a string for a long
        b'{"shop":"a","seq":1,"lane":2147483648}',  # beyond an int
        b'{"shop":"a","seq":1.0,"lane":1}',
        b'{"shop":1,"seq":1,"lane":1}',
        rb'{"shop":"\u00e9","seq":1,"lane":1}',  # an escape Jackson does not write
        b"[1]",
        b"",
        b"[" * 10_000,  # nested past Python's recursion limit
        b'{"shop":' + b"[" * 10_000,
    ],
    ids=lambda data: repr(data[:40]),
)
def test_a_record_key_written_otherwise_is_rejected(spark: SparkSession, data: bytes) -> None:
    frame = spark.createDataFrame([(data,)], "key binary")
    reason = frame.select(key_reason(RECORD)).collect()[0][0]
    assert reason.startswith(not_record_key(RECORD) + " ("), reason


def test_a_record_key_of_invalid_utf8_or_none_is_rejected(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(b"\xff",), (None,)], "key binary")
    reasons = [r[0] for r in frame.select(key_reason(RECORD)).collect()]
    assert reasons == [REASON_BAD_UTF8, REASON_NO_KEY]
