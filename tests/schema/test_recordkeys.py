"""Record keys: the bytes are the compact JSON Jackson writes, the key text round-trips and
sorts as the keys do field by field, and keys written otherwise are refused by name.

Jackson itself (through Kafka's Java producer) is checked in
tests/differential/test_typed_keys.py; Spark's reading of the bytes in
tests/pipeline/test_keys.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema import KeyField, KeyType, RecordKey, partition_of_bytes

KEY = RecordKey((KeyField("shop"), KeyField("seq", KeyType.LONG), KeyField("lane", KeyType.INT)))
strings = st.text(st.characters(codec="utf-8"))  # no lone surrogates
keys = st.fixed_dictionaries(
    {
        "shop": strings,
        "seq": st.integers(-(2**63), 2**63 - 1),
        "lane": st.integers(-(2**31), 2**31 - 1),
    }
)


def _order(key: dict[str, Any]) -> tuple[bytes, int, int]:
    return key["shop"].encode(), key["seq"], key["lane"]


@given(keys)
def test_the_key_text_round_trips(key: dict[str, Any]) -> None:
    assert KEY.from_text(KEY.text(key)) == key


@given(keys, keys)
def test_key_texts_sort_as_the_keys_do_field_by_field(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert (KEY.text(a) < KEY.text(b)) == (_order(a) < _order(b))


@given(keys)
def test_the_bytes_are_compact_json_in_the_fields_order(key: dict[str, Any]) -> None:
    """What json.dumps writes compact, but for the control characters, which Jackson
    escapes with capital hex digits, and characters beyond U+FFFF, which it escapes as
    surrogate pairs."""
    data = KEY.serialize(key)
    assert json.loads(data) == key and list(json.loads(data)) == ["shop", "seq", "lane"]
    if not any(c < " " or c > "\uffff" for c in key["shop"]):
        in_order = {name: key[name] for name in KEY.names}
        expected = json.dumps(in_order, separators=(",", ":"), ensure_ascii=False)
        assert data == expected.encode()
    assert KEY.deserialize(data) == key


def test_strings_are_escaped_as_jackson_escapes_them() -> None:
    key = {"shop": 'q" b\\ /\n\t\x01\x1f\u2028é😀', "seq": -1, "lane": 0}
    escaped = '"q\\" b\\\\ /\\n\\t\\u0001\\u001F\u2028é\\uD83D\\uDE00"'
    assert KEY.serialize(key) == f'{{"shop":{escaped},"seq":-1,"lane":0}}'.encode()


@given(keys, st.integers(1, 64))
def test_the_partition_is_murmur2_of_the_bytes(key: dict[str, Any], partitions: int) -> None:
    expected = partition_of_bytes(KEY.serialize(key), partitions)
    assert KEY.partition(KEY.text(key), partitions) == expected


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"shop": "a","seq":1,"lane":1}', "not compact JSON"),
        (b'{"seq":1,"shop":"a","lane":1}', "not compact JSON"),
        (b'{"shop":"a","seq":1}', "missing ['lane']"),
        (b'{"shop":"a","seq":1,"lane":1,"x":1}', "extra ['x']"),
        (b'{"shop":"a","seq":"1","lane":1}', "'seq'"),
        (b'{"shop":"a","seq":1,"lane":2147483648}', "'lane'"),
        (b'{"shop":"a","seq":1.0,"lane":1}', "'seq'"),
        (b'{"shop":1,"seq":1,"lane":1}', "'shop'"),
        (b"[1]", "not a JSON object"),
        (b"\xff", "not JSON"),
        (b"[" * 10_000, "nested too deeply"),  # json.loads: a RecursionError
        (b'{"shop":' + b"[" * 10_000, "nested too deeply"),
    ],
)
def test_bytes_written_otherwise_are_refused_saying_why(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("[", r"\[").replace("]", r"\]")):
        KEY.deserialize(data)


@pytest.mark.parametrize(
    "text",
    ["", "a", "a\x00", "a\x00\x02", "a\x00\x00" + "f" * 15, "a\x00\x00" + "0" * 32 + "x"],
)
def test_a_text_that_is_no_key_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        KEY.from_text(text)


def test_a_record_key_is_declared_with_fields_of_key_types_a_json_key_carries() -> None:
    with pytest.raises(ValueError, match="strings, ints or longs"):
        KeyField("price", KeyType.DOUBLE)
    with pytest.raises(ValueError, match="twice"):
        RecordKey((KeyField("a"), KeyField("a", KeyType.INT)))
    with pytest.raises(ValueError, match="at least one"):
        RecordKey(())
    with pytest.raises(ValueError, match="GraphQL name"):
        KeyField("not-a-name")
