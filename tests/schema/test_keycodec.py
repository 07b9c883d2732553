"""The key codec: round trip and order preservation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema import MAX_UINT, STR_TAG, escape_str, pack, pack_str, pack_uint, unpack

parts = st.one_of(st.text(), st.integers(min_value=0, max_value=MAX_UINT))
# Tuples compared element by element only make sense when the element types line up.
shaped = st.lists(st.tuples(st.text(), st.integers(min_value=0, max_value=MAX_UINT), st.text()))


@given(st.lists(parts, max_size=6))
def test_round_trip(values: list[str | int]) -> None:
    assert unpack(pack(*values)) == tuple(values)


@given(st.text(), st.text())
def test_string_order_is_preserved(a: str, b: str) -> None:
    assert (pack(a) < pack(b)) == (a < b)


@given(st.integers(0, MAX_UINT), st.integers(0, MAX_UINT))
def test_integer_order_is_preserved(a: int, b: int) -> None:
    assert (pack(a) < pack(b)) == (a < b)


@given(shaped)
def test_tuple_order_is_preserved(rows: list[tuple[str, int, str]]) -> None:
    assert sorted(rows) == sorted(rows, key=lambda row: pack(*row))


@given(st.text(), st.text(), st.text())
def test_a_string_never_runs_into_the_next_part(a: str, b: str, c: str) -> None:
    assert pack(a, b).startswith(pack(a))
    assert not pack(a + c, b).startswith(pack(a)) or c == ""


@pytest.mark.parametrize("bad", [-1, MAX_UINT + 1, 1.5, True, b"bytes"])
def test_bad_parts_are_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        pack(bad)  # type: ignore[arg-type]


@given(st.lists(parts, max_size=6), parts)
def test_the_one_part_packers_extend_a_packed_prefix(
    values: list[str | int], last: str | int
) -> None:
    one = pack_str(last) if isinstance(last, str) else pack_uint(last)
    assert one == pack(last)
    assert pack(*values) + one == pack(*values, last)


@pytest.mark.parametrize("bad", [-1, MAX_UINT + 1])
def test_pack_uint_refuses_what_pack_refuses(bad: int) -> None:
    with pytest.raises(ValueError):
        pack_uint(bad)


# short alphabets so that strings are often prefixes of each other and hold NUL
_nul_heavy = st.text(alphabet=st.sampled_from(["\x00", "\x01", "a", "\xff", "é", "\U0001f600"]))


@given(_nul_heavy, _nul_heavy)
def test_packed_strings_order_as_their_utf8_bytes(a: str, b: str) -> None:
    # scans promise the byte order of the UTF-8 key: NUL and prefixes must not disturb it
    utf8_a, utf8_b = a.encode("utf-8"), b.encode("utf-8")
    assert (pack_str(a) < pack_str(b)) == (utf8_a < utf8_b)
    assert (pack_str(a) == pack_str(b)) == (utf8_a == utf8_b)


@given(_nul_heavy, _nul_heavy)
def test_a_packed_string_starts_with_the_escape_of_exactly_its_prefixes(p: str, s: str) -> None:
    assert pack_str(p + s).startswith(STR_TAG + escape_str(p))
    assert pack_str(s).startswith(STR_TAG + escape_str(p)) == s.startswith(p)
