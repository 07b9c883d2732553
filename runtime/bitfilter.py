"""A set of items kept as one bit each, found by one hash: it can say an item was surely
never added, never that it surely was (another item may share its bit).

The node's partition stores use one to skip reading old rows of keys never written, the
gateway cache's admission one as TinyLFU's doorkeeper (the keys asked once lately).
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["BitFilter"]


class BitFilter:
    """`bits` bits (rounded up to a power of two, at least 8), one per item's hash."""

    def __init__(self, bits: int) -> None:
        size = 8
        while size < bits:
            size <<= 1
        self._mask = size - 1
        self._bits = bytearray(size >> 3)

    def add(self, item: Hashable) -> bool:
        """Set `item`'s bit; True when it was unset (the item surely new)."""
        bit = hash(item) & self._mask
        byte, flag = bit >> 3, 1 << (bit & 7)
        bits = self._bits
        if bits[byte] & flag:
            return False
        bits[byte] |= flag
        return True

    def has(self, item: Hashable) -> bool:
        """Whether `item`'s bit is set (it may be another item's)."""
        bit = hash(item) & self._mask
        return bool(self._bits[bit >> 3] & (1 << (bit & 7)))

    def clear(self) -> None:
        self._bits = bytearray(len(self._bits))
