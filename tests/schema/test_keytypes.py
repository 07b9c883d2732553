"""Key types: the bytes are Kafka's Java serializers', the key text round-trips and sorts as
the keys do, wrong keys are refused by name, and a string key is partitioned as before.

The Java producer itself is checked against these in test_keytypes_kafka.py.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema import partition_for
from schema.keytypes import KeyType, partition_of_bytes

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
NAN_BITS = "7ff8000000000000"  # Double.doubleToLongBits(NaN): the one NaN Java writes

strings = st.text(st.characters(codec="utf-8"))  # no lone surrogates: those are no keys
ints = st.integers(INT_MIN, INT_MAX)
longs = st.integers(LONG_MIN, LONG_MAX)
doubles = st.floats(allow_nan=True, allow_infinity=True)
KEYS: dict[KeyType, st.SearchStrategy[str | int | float]] = {
    KeyType.STRING: strings,
    KeyType.INT: ints,
    KeyType.LONG: longs,
    KeyType.DOUBLE: doubles,
}
typed_keys = st.sampled_from(list(KeyType)).flatmap(
    lambda key_type: st.tuples(st.just(key_type), KEYS[key_type])
)


def _bits(value: float) -> bytes:
    """A double's bytes: compares -0.0 apart from 0.0, and NaN equal to itself."""
    return struct.pack(">d", value)


def _same(key_type: KeyType, a: str | int | float, b: str | int | float) -> bool:
    """Equal as keys of `key_type` (a double key is its bits; Java writes one NaN)."""
    if key_type is KeyType.DOUBLE:
        assert isinstance(a, float) and isinstance(b, float)
        return (math.isnan(a) and math.isnan(b)) or _bits(a) == _bits(b)
    return type(a) is type(b) and a == b


# serialized bytes written by Kafka's StringSerializer, IntegerSerializer, LongSerializer
# and DoubleSerializer (UTF-8; big-endian; doubleToLongBits)
JAVA_BYTES: list[tuple[KeyType, str | int | float, str]] = [
    (KeyType.STRING, "kafka", "6b61666b61"),
    (KeyType.STRING, "é", "c3a9"),
    (KeyType.STRING, "日本", "e697a5e69cac"),
    (KeyType.STRING, "😀", "f09f9880"),  # UTF-8's 4 bytes, not a surrogate pair's 6
    (KeyType.STRING, "a\0b", "610062"),  # plain UTF-8, not Java's modified UTF-8 (c080)
    (KeyType.INT, 1, "00000001"),
    (KeyType.INT, -1, "ffffffff"),
    (KeyType.INT, INT_MIN, "80000000"),
    (KeyType.INT, INT_MAX, "7fffffff"),
    (KeyType.LONG, 1, "0000000000000001"),
    (KeyType.LONG, -1, "ffffffffffffffff"),
    (KeyType.LONG, LONG_MIN, "8000000000000000"),
    (KeyType.LONG, 2**32, "0000000100000000"),
    (KeyType.DOUBLE, 1.0, "3ff0000000000000"),
    (KeyType.DOUBLE, 1, "3ff0000000000000"),  # an int is a double key's number too
    (KeyType.DOUBLE, -2.5, "c004000000000000"),
    (KeyType.DOUBLE, 0.0, "0000000000000000"),
    (KeyType.DOUBLE, -0.0, "8000000000000000"),
    (KeyType.DOUBLE, 5e-324, "0000000000000001"),  # Double.MIN_VALUE
    (KeyType.DOUBLE, math.inf, "7ff0000000000000"),
    (KeyType.DOUBLE, -math.inf, "fff0000000000000"),
    (KeyType.DOUBLE, math.nan, NAN_BITS),
    (KeyType.DOUBLE, -math.nan, NAN_BITS),  # Python's -nan has the sign bit; Java's has not
]


@pytest.mark.parametrize(("key_type", "key", "data"), JAVA_BYTES)
def test_serialized_bytes_are_the_java_serializers(
    key_type: KeyType, key: str | int | float, data: str
) -> None:
    assert key_type.serialize(key).hex() == data


@given(typed_keys)
def test_deserialize_reads_back_what_serialize_wrote(
    typed: tuple[KeyType, str | int | float],
) -> None:
    key_type, key = typed
    back = key_type.deserialize(key_type.serialize(key))
    assert _same(key_type, back, key)


@given(typed_keys)
def test_from_text_reads_back_the_key_of_a_text(typed: tuple[KeyType, str | int | float]) -> None:
    key_type, key = typed
    text = key_type.text(key)
    back = key_type.from_text(text)
    assert _same(key_type, back, key) and key_type.text(back) == text


def test_a_double_keys_nan_of_any_bits_is_the_one_nan() -> None:
    """DoubleSerializer writes every NaN as doubleToLongBits' one NaN; bytes of another NaN
    read as NaN and write back as the one."""
    other_nan = bytes.fromhex("fff0000000000001")
    key = KeyType.DOUBLE.deserialize(other_nan)
    assert isinstance(key, float) and math.isnan(key)
    assert KeyType.DOUBLE.serialize(key).hex() == NAN_BITS
    assert KeyType.DOUBLE.text(key) == KeyType.DOUBLE.text(-math.nan)


@pytest.mark.parametrize("text", ["0000000000000001", "0007ffffffffffff", "fff0000000000001"])
def test_a_nan_text_of_other_bits_reads_as_nan(text: str) -> None:
    """The pipeline makes a key text from a record's bytes; a producer other than Java's
    may write a NaN of other bits (Python's -nan: fff8000000000000, text 0007ffffffffffff).
    Such a text is no text of a key (the one NaN's text differs) but reads as NaN, and
    its partition is the one NaN's, rather than failing the pipeline's changelog writer."""
    key = KeyType.DOUBLE.from_text(text)
    assert isinstance(key, float) and math.isnan(key)
    assert KeyType.DOUBLE.text(key) == "fff8000000000000"  # the one NaN's text
    assert KeyType.DOUBLE.partition(text, 6) == partition_of_bytes(bytes.fromhex(NAN_BITS), 6)


@pytest.mark.parametrize("key_type", [KeyType.INT, KeyType.LONG, KeyType.DOUBLE])
@given(data=st.data())
def test_a_numbers_text_is_16_lowercase_hex_digits(key_type: KeyType, data: st.DataObject) -> None:
    text = key_type.text(data.draw(KEYS[key_type]))
    assert len(text) == 16 and set(text) <= set("0123456789abcdef")


@given(
    st.one_of(
        st.tuples(st.just(KeyType.INT), ints, ints), st.tuples(st.just(KeyType.LONG), longs, longs)
    )
)
def test_an_integers_text_sorts_as_the_integer(typed: tuple[KeyType, int, int]) -> None:
    key_type, a, b = typed
    assert (key_type.text(a) < key_type.text(b)) == (a < b)


def _total_order(value: float) -> tuple[float, float]:
    """IEEE 754's total order of a double that is no NaN: -0.0 before 0.0."""
    return value, math.copysign(1.0, value)


@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_a_doubles_text_sorts_as_the_double(a: float, b: float) -> None:
    texts = KeyType.DOUBLE.text(a), KeyType.DOUBLE.text(b)
    assert (texts[0] < texts[1]) == (_total_order(a) < _total_order(b))


def test_the_double_texts_sort_from_minus_infinity_to_nan() -> None:
    ordered = [-math.inf, -1.7976931348623157e308, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0]
    ordered += [1.7976931348623157e308, math.inf, math.nan]
    texts = [KeyType.DOUBLE.text(value) for value in ordered]
    assert texts == sorted(texts) and len(set(texts)) == len(texts)


def test_the_integer_texts_sort_from_min_to_max() -> None:
    ordered = [LONG_MIN, INT_MIN - 1, INT_MIN, -1, 0, 1, INT_MAX, INT_MAX + 1, LONG_MAX]
    texts = [KeyType.LONG.text(value) for value in ordered]
    assert texts == sorted(texts) and texts[0] == "0" * 16 and texts[-1] == "f" * 16


# (key type, key, what the message says)
WRONG_KEYS: list[tuple[KeyType, object, str]] = [
    (KeyType.INT, True, "32-bit integer"),  # a bool is an int to Python, never a key
    (KeyType.INT, 2**31, "32-bit integer"),
    (KeyType.INT, INT_MIN - 1, "32-bit integer"),
    (KeyType.INT, 1.0, "32-bit integer"),
    (KeyType.INT, "1", "32-bit integer"),
    (KeyType.LONG, False, "64-bit integer"),
    (KeyType.LONG, 2**63, "64-bit integer"),
    (KeyType.LONG, LONG_MIN - 1, "64-bit integer"),
    (KeyType.LONG, None, "64-bit integer"),
    (KeyType.DOUBLE, True, "double key must be a number"),
    (KeyType.DOUBLE, "1.0", "double key must be a number"),
    (KeyType.DOUBLE, 10**400, "double key must be a number"),  # beyond Double.MAX_VALUE
    (KeyType.STRING, 1, "string key must be a string"),
    (KeyType.STRING, b"bytes", "string key must be a string"),
    (KeyType.STRING, True, "string key must be a string"),
]


@pytest.mark.parametrize(
    ("key_type", "key", "message"),
    WRONG_KEYS,
    ids=[f"{key_type.value}-{key!r:.24}" for key_type, key, _ in WRONG_KEYS],
)
def test_a_wrong_key_is_refused_naming_the_type(
    key_type: KeyType, key: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        key_type.serialize(key)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        key_type.text(key)  # type: ignore[arg-type]


def test_a_lone_surrogate_is_no_string_key() -> None:
    """Java's StringSerializer would write it as "?", a different key."""
    with pytest.raises(ValueError):
        KeyType.STRING.serialize("\ud800")


@pytest.mark.parametrize(
    ("key_type", "data"),
    [
        (KeyType.INT, b"\0\0\0"),
        (KeyType.INT, b"\0" * 8),
        (KeyType.LONG, b"\0" * 4),
        (KeyType.DOUBLE, b""),
        (KeyType.STRING, b"\xc3"),  # half of "é"
    ],
)
def test_bytes_that_are_no_key_are_refused(key_type: KeyType, data: bytes) -> None:
    with pytest.raises(ValueError):
        key_type.deserialize(data)


# (key type, text): texts no key has, though int(text, 16) reads some of them
WRONG_TEXTS: list[tuple[KeyType, str]] = [
    (KeyType.LONG, "800000000000000"),  # 15 digits
    (KeyType.LONG, "80000000000000000"),  # 17 digits
    (KeyType.LONG, "8000000000000000\n"),
    (KeyType.LONG, "800000000000000A"),  # upper case: key texts are lower case
    (KeyType.LONG, "0x00000000000001"),
    (KeyType.LONG, "+000000000000001"),
    (KeyType.LONG, "-000000000000001"),
    (KeyType.LONG, "8000_00000000001"),
    (KeyType.LONG, " 800000000000001"),
    (KeyType.LONG, "\u0668" + "0" * 15),  # an Arabic-Indic 8
    (KeyType.INT, "0000000000000000"),  # the long -2**63: beyond 32 bits
    (KeyType.INT, "8000000080000000"),  # 2**31
    (KeyType.DOUBLE, "-000000000000001"),
    (KeyType.DOUBLE, "FFF0000000000000"),
]


@pytest.mark.parametrize(("key_type", "text"), WRONG_TEXTS)
def test_a_text_no_key_has_is_refused(key_type: KeyType, text: str) -> None:
    with pytest.raises(ValueError, match=f"{key_type.value}"):
        key_type.from_text(text)
    with pytest.raises(ValueError, match=f"{key_type.value}"):
        key_type.partition(text, 6)


@given(strings, st.integers(1, 64))
def test_a_string_keys_partition_is_partition_for(key: str, partitions: int) -> None:
    assert KeyType.STRING.partition(KeyType.STRING.text(key), partitions) == partition_for(
        key, partitions
    )


@given(typed_keys, st.integers(1, 64))
def test_the_partition_of_a_keys_text_is_that_of_its_bytes(
    typed: tuple[KeyType, str | int | float], partitions: int
) -> None:
    key_type, key = typed
    partition = key_type.partition(key_type.text(key), partitions)
    assert partition == partition_of_bytes(key_type.serialize(key), partitions)
    assert 0 <= partition < partitions


@pytest.mark.parametrize("partitions", [0, -1])
def test_the_partition_count_must_be_positive(partitions: int) -> None:
    with pytest.raises(ValueError, match="partition count"):
        KeyType.LONG.partition(KeyType.LONG.text(1), partitions)
