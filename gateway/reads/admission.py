"""Which keys the gateway cache takes in: what is asked again, not every key read once.

A cache that fills every miss costs more than it saves unless access is skewed: each miss
is read from a node, then read again by the fill, and evicts a row that may be asked again
sooner. So the cache admits a key the way TinyLFU does: a small frequency sketch counts
how often each (view, key) was asked lately, and a missed key is filled only once it was
asked `admit_after` times, and, when the cache is full, only if it was asked more often
than the row it would evict.

The sketch is a count-min sketch: four counters per key in one table of small counters
(at most 15), found by double hashing. It never counts a key less than it was asked; it may
count more when keys share all four counters. The table has 16 counters per entry the cache
holds, and every `width / 4` adds (four entries' worth of lookups per entry held) all
counters are halved: on average one increment per counter is added between two halvings,
so a key asked once is rarely taken for one asked twice, and what was popular long ago
fades. (Simulated with uniform access over a thousand times more keys than the cache holds:
2% of the lookups were filled, against every miss with plain LRU; `tests/gateway/
test_admission.py`.) Aging is one `bytes.translate` over the table (a byte per counter, 16 bytes
per entry held): no pause however wide it is.

In front of the sketch, as in TinyLFU, a doorkeeper: one bit per key (one hash, two bits
per counter of the sketch), set at a key's first ask since the last halving, and cleared
at each halving. Only a key asked again reaches the sketch, and its estimate is the
sketch's count plus its bit. With access spread over far more keys than the cache holds,
most asks are first asks: a bit is set where four counters were incremented (0.2 us
against 1.1 us for every lookup counted).
"""

from __future__ import annotations

from collections.abc import Hashable

from runtime.bitfilter import BitFilter

__all__ = ["Admission", "FrequencySketch"]

_DEPTH = 4  # counters per key (`_slots` is unrolled for four)
_MAX_COUNT = 15
_MIX = 0x9E3779B97F4A7C15  # a 64-bit odd constant (the golden ratio's), to derive the step
_MASK64 = (1 << 64) - 1
_HALF = bytes(i >> 1 for i in range(256))  # the halving of every counter value
_PER_ITEM = 16  # counters per item the sketch is sized for
_MIN_WIDTH = 1 << 10
_MAX_WIDTH = 1 << 24


class FrequencySketch:
    """How often each item was counted lately (an estimate never below the truth until
    the counters are halved)."""

    def __init__(self, items: int) -> None:
        """A sketch sized for about `items` distinct items counted at once (the entries a
        cache holds)."""
        width = _MIN_WIDTH
        while width < _PER_ITEM * items and width < _MAX_WIDTH:
            width <<= 1
        self._table = bytearray(width)
        self._mask = width - 1
        self._sample = width // _DEPTH  # adds between two halvings: one per counter
        self._added = 0
        self.halvings = 0

    @property
    def width(self) -> int:
        return self._mask + 1

    def _slots(self, item: Hashable) -> tuple[int, int, int, int]:
        """The item's four counters (unrolled: this runs for every key looked up)."""
        first = hash(item) & _MASK64
        # the step from the product's high half, which depends on every bit of the hash (its
        # low bits would follow the hash's low bits alone: one slot for all four)
        step = (((first * _MIX) & _MASK64) >> 32) | 1
        mask = self._mask
        return (
            first & mask,
            (first + step) & mask,
            (first + 2 * step) & mask,
            (first + 3 * step) & mask,
        )

    def add(self, item: Hashable) -> int:
        """Count `item` once more; how often it was counted lately, this time included."""
        table = self._table
        least = _MAX_COUNT
        for slot in self._slots(item):
            count = table[slot]
            if count < _MAX_COUNT:
                count += 1
                table[slot] = count
            least = min(least, count)
        self.tick()
        return least

    def tick(self) -> None:
        """One more ask towards the next halving (every `width / 4` asks), whether the
        sketch counted it (`add`) or the doorkeeper did."""
        self._added += 1
        if self._added >= self._sample:
            self._age()

    def count(self, item: Hashable) -> int:
        """How often `item` was counted lately (at most 15)."""
        table = self._table
        a, b, c, d = self._slots(item)
        return min(table[a], table[b], table[c], table[d])

    def _age(self) -> None:
        self._table = bytearray(self._table.translate(_HALF))
        self._added //= 2
        self.halvings += 1


class Admission:
    """The cache's admission policy: counts every key asked (`asked`) and says whether a
    missed key is filled (`admits`). `admit_after` 1 admits every key at its first miss
    and never compares with the row it evicts (plain LRU)."""

    def __init__(self, entries: int, admit_after: int) -> None:
        self._sketch = FrequencySketch(entries)
        # the doorkeeper: the items asked once since the last halving, two bits per counter
        self._door = BitFilter(2 * self._sketch.width)
        self._halvings = 0
        self.admit_after = admit_after
        self.refused = 0  # misses not filled

    def asked(self, view: str, key: str) -> bool:
        """Count a lookup of `key` of `view`; whether the key is now asked often enough to be
        filled (and its partition followed)."""
        if self.admit_after <= 1:
            return True
        item = (view, key)
        sketch = self._sketch
        if self._door.add(item):  # a first ask since the last halving: asked that often before
            sketch.tick()
            count = sketch.count(item) + 1
        else:
            count = sketch.add(item) + 1
        if sketch.halvings != self._halvings:  # the doorkeeper starts again with the halving
            self._halvings = sketch.halvings
            self._door.clear()
        return count >= self.admit_after

    def admits(self, view: str, key: str, victim: tuple[str, str] | None) -> bool:
        """Whether to fill `key` of `view`, evicting `victim` (None: nothing is evicted)."""
        if self.admit_after <= 1:
            return True
        count = self._count((view, key))
        admitted = count >= self.admit_after and (victim is None or count > self._count(victim))
        if not admitted:
            self.refused += 1
        return admitted

    def _count(self, item: tuple[str, str]) -> int:
        """How often `item` was asked lately: the sketch's count and the doorkeeper's bit."""
        return self._sketch.count(item) + self._door.has(item)
