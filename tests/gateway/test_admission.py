"""The cache's admission (gateway.reads.admission): the frequency sketch never counts a key
less than it was asked (until it halves), and the policy, run as the cache runs it (an LRU
of fixed capacity, a miss filled only when admitted against the row it would evict), against
plain LRU on traces of the shapes the bench measures: uniform over many more keys than the
cache holds (where filling every miss only costs) and Zipf (where the cache pays)."""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.reads.admission import Admission, FrequencySketch

VIEW = "word_counts"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5_000), max_size=2_000))
def test_the_sketch_never_counts_a_key_less_than_it_was_asked(asked: list[int]) -> None:
    sketch = FrequencySketch(1024)  # 16,384 counters, halved after 4,096 adds: not here
    for item in asked:
        sketch.add(("v", str(item)))
    for item, times in Counter(asked).items():
        assert sketch.count(("v", str(item))) >= min(times, 15)


def test_the_sketch_is_mostly_exact_for_what_it_is_sized_for_and_halves_with_age() -> None:
    sketch = FrequencySketch(1000)
    for item in range(1000):
        sketch.add(item)
    exact = sum(sketch.count(item) == 1 for item in range(1000))
    assert exact >= 990, exact  # 1,000 keys over 16,384 counters: few share all four
    for item in range(1000):
        sketch.add(item)
        sketch.add(item)  # the 3,000 adds stay below the 4,096 of a halving
    assert all(sketch.count(item) >= 3 for item in range(1000))
    for _ in range(sketch.width // 4):  # a sample's worth of another key
        sketch.add("other")
    assert all(sketch.count(item) <= 1 for item in range(1000))  # 3 halved to 1


class Simulated:
    """An LRU of `capacity` keys filled on misses as the gateway cache fills them."""

    def __init__(self, capacity: int, admit_after: int) -> None:
        self.capacity = capacity
        self.admission = Admission(capacity, admit_after)
        self.entries: OrderedDict[str, None] = OrderedDict()
        self.hits = self.fills = 0

    def ask(self, key: str) -> None:
        self.admission.asked(VIEW, key)
        if key in self.entries:
            self.entries.move_to_end(key)
            self.hits += 1
            return
        full = len(self.entries) >= self.capacity
        victim = (VIEW, next(iter(self.entries))) if full else None
        if self.admission.admits(VIEW, key, victim):
            self.fills += 1  # a second read of the key, by the fill
            self.entries[key] = None
            if full:
                self.entries.popitem(last=False)


def _uniform(keys: int, n: int, rng: random.Random) -> Iterator[str]:
    return (f"k{rng.randrange(keys)}" for _ in range(n))


def _zipf(keys: int, n: int, rng: random.Random, s: float = 1.0) -> Iterator[str]:
    weights = [1 / (rank + 1) ** s for rank in range(keys)]
    names = [f"k{i}" for i in range(keys)]
    return iter(rng.choices(names, weights, k=n))


def _run(trace: Iterable[str], capacity: int, admit_after: int) -> Simulated:
    cache = Simulated(capacity, admit_after)
    for key in trace:
        cache.ask(key)
    return cache


def test_uniform_access_over_many_more_keys_than_fit_fills_few() -> None:
    """Uniform over 100x the capacity: LRU fills almost every miss (a second read each)
    for a ~1% hit ratio; admission fills a small share and hits as often."""
    lru = _run(_uniform(100_000, 50_000, random.Random(1)), 1_000, admit_after=1)
    admitted = _run(_uniform(100_000, 50_000, random.Random(1)), 1_000, admit_after=2)
    assert lru.fills > 0.95 * 50_000
    assert admitted.fills < 0.05 * lru.fills, (admitted.fills, lru.fills)
    assert admitted.hits >= 0.5 * lru.hits  # both about 1%: nothing worth keeping is lost


def test_skewed_access_hits_at_least_as_often_with_fewer_fills() -> None:
    """Zipf over 100x the capacity: admission keeps the popular keys that one-off keys
    would push out of an LRU."""
    trace = list(_zipf(100_000, 100_000, random.Random(2)))
    lru = _run(trace, 1_000, admit_after=1)
    admitted = _run(trace, 1_000, admit_after=2)
    assert admitted.hits >= lru.hits, (admitted.hits, lru.hits)
    assert admitted.fills < lru.fills / 3, (admitted.fills, lru.fills)


def test_a_key_asked_once_is_not_admitted_and_one_asked_again_is() -> None:
    admission = Admission(1000, admit_after=2)
    assert not admission.asked(VIEW, "once")
    assert not admission.admits(VIEW, "once", None)
    assert admission.asked(VIEW, "once")  # asked again: now frequent
    assert admission.admits(VIEW, "once", None)
    assert admission.refused == 1


def test_when_full_a_key_must_be_asked_more_often_than_the_row_it_evicts() -> None:
    admission = Admission(1000, admit_after=2)
    for _ in range(3):
        admission.asked(VIEW, "held")
    for _ in range(3):
        admission.asked(VIEW, "candidate")
    assert not admission.admits(VIEW, "candidate", (VIEW, "held"))  # as often: kept
    admission.asked(VIEW, "candidate")
    assert admission.admits(VIEW, "candidate", (VIEW, "held"))


def test_admit_after_one_is_plain_lru() -> None:
    admission = Admission(1000, admit_after=1)
    for _ in range(5):
        admission.asked(VIEW, "held")
    assert admission.admits(VIEW, "new", (VIEW, "held"))


def test_first_asks_set_a_doorkeeper_bit_and_only_keys_asked_again_reach_the_sketch() -> None:
    """TinyLFU's doorkeeper: a key asked once costs one bit, not four counters, so access
    spread over many keys leaves the sketch empty; a key asked again is counted by both, and
    a halving of the sketch clears the bits."""
    admission = Admission(1000, admit_after=3)
    sketch = admission._sketch
    for i in range(500):
        assert not admission.asked(VIEW, f"k{i}")
    # only first asks: a few keys share a bit (500 in 32,768), the rest moved no counter
    assert sum(sketch._table) <= 4 * 25, sum(sketch._table)  # without it: 4 x 500
    assert not admission.asked(VIEW, "k7")  # twice
    assert admission.asked(VIEW, "k7")  # three times: bit + two in the sketch
    assert admission.admits(VIEW, "k7", None)
    assert not admission.admits(VIEW, "k8", None)  # asked once
    halvings = sketch.halvings
    asks = 0
    while sketch.halvings == halvings:  # first asks of new keys tick the sketch to its halving
        assert asks < sketch.width, "no halving after as many asks as the sketch is wide"
        admission.asked(VIEW, f"new{asks}")
        asks += 1
    # checked at once: a first ask after the halving could set k8's bit again (shared bit)
    assert not admission._door.has((VIEW, "k8"))  # cleared with the halving


def test_a_key_asked_often_stays_frequent_at_its_first_ask_after_a_halving() -> None:
    """The halving clears the doorkeeper: a popular key's next ask is its first since then,
    but the sketch still holds its count (halved), so it is still asked often enough."""
    admission = Admission(10, admit_after=2)
    for _ in range(8):
        admission.asked(VIEW, "hot")
    halvings = admission._sketch.halvings
    others = 0
    while admission._sketch.halvings == halvings:  # other keys' asks, up to the halving
        admission.asked(VIEW, f"other-{others}")
        others += 1
    assert admission.asked(VIEW, "hot")
    assert admission.admits(VIEW, "hot", None)
