"""The one-hash bit filter (runtime.bitfilter): an item added is always found; an item never
added is found only where it shares another's bit; clearing forgets everything."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runtime.bitfilter import BitFilter


@given(st.lists(st.binary(max_size=12), max_size=300))
def test_an_added_item_is_never_taken_for_new(items: list[bytes]) -> None:
    bits = BitFilter(1 << 12)
    for item in items:
        bits.add(item)
    assert all(bits.has(item) for item in items)
    assert not any(bits.add(item) for item in items)


def test_items_never_added_are_mostly_new_and_clearing_forgets() -> None:
    bits = BitFilter(1 << 16)
    added = [("view", f"k{i}") for i in range(1000)]
    for item in added:
        bits.add(item)
    others = [("view", f"other{i}") for i in range(1000)]
    shared = sum(bits.has(item) for item in others)
    assert shared < 50  # 1,000 bits set of 65,536: ~1.5% of other items share one
    bits.clear()
    assert not any(bits.has(item) for item in added)
    assert bits.add(added[0])


def test_the_size_is_a_power_of_two_of_at_least_eight_bits() -> None:
    assert len(BitFilter(1)._bits) == 1
    assert len(BitFilter(100)._bits) == 16  # 128 bits
