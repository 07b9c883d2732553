"""Record keys as Spark expressions: a key's text (`schema.keytypes`) from its bytes, and
why a key cannot be read.

A string key is its UTF-8 text. A number's key text is 16 hex digits that sort as the
number does; from the serializer's big-endian bytes it is a matter of hex digits, so
Spark computes it without arithmetic:
- long: the 8 bytes, sign bit flipped (the first hex digit XOR 8);
- int: sign-extended to 64 bits, then as a long: `80000000` or `7fffffff`, then the bytes;
- double: IEEE 754's total order: a negative number's bits all flipped (each hex digit
  15 - d), a positive number's sign bit flipped.

A record key (`schema.recordkeys`) is read by `RecordKey.deserialize` itself, in an
Arrow-batched Python UDF: its bytes must be exactly what Jackson writes for its fields
(the escapes included), which no Spark function writes, and the gateway computes its
partition from the same code.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from schema import KeyType, RecordKey

__all__ = [
    "REASON_BAD_UTF8",
    "REASON_EMPTY_KEY",
    "REASON_NOT_FINITE",
    "REASON_NO_KEY",
    "key_reason",
    "key_text",
    "not_record_key",
    "read_record_key",
    "wrong_key_size",
]

REASON_NO_KEY = "null key"
REASON_BAD_UTF8 = "key is not valid UTF-8"
REASON_EMPTY_KEY = "empty key"

_DIGITS = "0123456789abcdef"
_SIGN_FLIPPED = "89abcdef01234567"  # each digit XOR 8
_ALL_FLIPPED = "fedcba9876543210"  # each digit 15 - d


# GraphQL's Float has no NaN nor infinities: such a key could be neither asked for nor
# shown (a top-N or a scan holding it would fail), as an empty string key could not
REASON_NOT_FINITE = "key is a NaN or an infinity, which GraphQL's Float cannot carry"


def wrong_key_size(key_type: KeyType) -> str:
    """The reason of a key whose length is not its type's."""
    return (
        f"key is not {key_type.width} bytes, as Kafka's {key_type.serializer} writes a "
        f"{key_type.value}"
    )


def not_record_key(record_key: RecordKey) -> str:
    """The reason of a key that is not the compact JSON of `record_key`'s fields."""
    fields = ", ".join(f"{f.name} ({f.type.value})" for f in record_key.fields)
    return (
        f"key is not compact JSON of the fields {fields} in this order, as Jackson writes "
        f"it: a key written otherwise lies on a partition no lookup can find"
    )  # the UDF adds what is wrong with the key in parentheses


def key_reason(key_type: KeyType | RecordKey, read: Column | None = None) -> Column:
    """Why a row's key cannot be read as a `key_type`, or null; `read` is the row's
    `read_record_key` when computed once beside (a record key), else it is computed here."""
    key = F.col("key")
    reason = F.when(key.isNull(), F.lit(REASON_NO_KEY))
    if isinstance(key_type, RecordKey):
        read = read_record_key(key_type) if read is None else read
        return reason.when(~F.is_valid_utf8(key.cast("string")), F.lit(REASON_BAD_UTF8)).when(
            read["reason"].isNotNull(), read["reason"]
        )
    if key_type is KeyType.STRING:
        return reason.when(~F.is_valid_utf8(key.cast("string")), F.lit(REASON_BAD_UTF8)).when(
            # the lookup API rejects an empty key, so such a record could never be read
            F.length(key) == 0,
            F.lit(REASON_EMPTY_KEY),
        )
    reason = reason.when(F.length(key) != key_type.width, F.lit(wrong_key_size(key_type)))
    if key_type is KeyType.DOUBLE:  # every exponent bit set: an infinity or a NaN
        reason = reason.when(F.lower(F.hex(key)).rlike("^[7f]ff"), F.lit(REASON_NOT_FINITE))
    return reason


def key_text(key_type: KeyType | RecordKey, read: Column | None = None) -> Column:
    """The key text of a row's key (a readable key: see `key_reason`, also for `read`)."""
    if isinstance(key_type, RecordKey):
        return (read_record_key(key_type) if read is None else read)["text"]
    if key_type is KeyType.STRING:
        return F.col("key").cast("string")
    digits = F.lower(F.hex(F.col("key")))
    first, rest = F.substring(digits, 1, 1), F.substring(digits, 2, 64)
    negative = first.isin(*_DIGITS[8:])
    flip_sign = F.concat(F.translate(first, _DIGITS, _SIGN_FLIPPED), rest)
    if key_type is KeyType.LONG:
        return flip_sign
    if key_type is KeyType.INT:
        return F.concat(F.when(negative, "7fffffff").otherwise("80000000"), digits)
    return F.when(negative, F.translate(digits, _DIGITS, _ALL_FLIPPED)).otherwise(flip_sign)


def read_record_key(record_key: RecordKey) -> Column:
    """struct<text, reason> of a row's key: its key text, or why it is no key of
    `record_key` (null for a null key). A Python UDF: compute it once per row and pass it
    to `key_reason` and `key_text`, which would each run it again."""
    read = F.udf(_record_reader(record_key), "struct<text: string, reason: string>", useArrow=True)
    return read(F.col("key"))


def _record_reader(record_key: RecordKey) -> Callable[[bytes | None], dict[str, str | None]]:
    refused = not_record_key(record_key)

    def read(data: bytes | None) -> dict[str, str | None]:
        if data is None:
            return {"text": None, "reason": None}  # key_reason says: no key
        try:
            key = record_key.deserialize(bytes(data))
        # RecursionError: a key nested nearly as deep as Python's limit may pass json.loads
        # and exceed it in a message; either way a key, never a failed batch
        except (ValueError, RecursionError) as exc:
            return {"text": None, "reason": f"{refused} ({exc})"}
        return {"text": record_key.text(key), "reason": None}

    return read
