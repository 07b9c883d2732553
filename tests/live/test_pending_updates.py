"""What waits for a subscriber (gateway.subscriptions.updates `_Merge`), on a clock of the
test's: every change while the subscriber keeps up; once an update has waited past the
subscription's max wait, each key's newest row only; a history subscription every event;
past the bound each key's newest row, or a history subscription's end with every later event
once from its last token; and nothing kept of what the subscription's offset passed."""

from __future__ import annotations

import tracemalloc

import pytest

from gateway.model.errors import SlowSubscriberError
from gateway.nodes.hub import FeedBatch
from gateway.subscriptions.tokens import ResumeToken
from gateway.subscriptions.updates import KeyUpdate, _Merge
from schema import WORD_COUNTS
from schema.feed import Change
from tests.clocks import HandClock

MAX_WAIT_S = 0.1


@pytest.fixture
def clock() -> HandClock:
    return HandClock()


def batch(*changes: tuple[str, int]) -> FeedBatch:
    found = tuple(Change(WORD_COUNTS.name, k, o, {"count": o}) for k, o in changes)
    return FeedBatch(found, max(o for _k, o in changes) + 1, {"partition": 0})


def drain(merge: _Merge) -> list[tuple[str, int]]:
    taken: list[KeyUpdate] = []
    while (update := merge.take()) is not None:
        taken.append(update)
    return [(u.key, u.offset) for u in taken]


def merge(clock: HandClock, conflate: bool = True, bound: int = 1000, keys: int = 1) -> _Merge:
    return _Merge(WORD_COUNTS, None, conflate, bound, MAX_WAIT_S, clock, keys=keys)


def test_a_subscriber_that_keeps_up_gets_every_change(clock: HandClock) -> None:
    pending = merge(clock)
    pending.accept(0, batch(("a", 1), ("a", 2), ("b", 3)), True)
    clock.now += MAX_WAIT_S / 2  # waited less than the max
    pending.accept(0, batch(("a", 4)), True)
    assert drain(pending) == [("a", 1), ("a", 2), ("b", 3), ("a", 4)]


def test_a_subscriber_behind_gets_each_keys_newest_row(clock: HandClock) -> None:
    pending = merge(clock)
    pending.accept(0, batch(("a", 1), ("b", 2)), True)
    clock.now += 2 * MAX_WAIT_S
    pending.accept(0, batch(("a", 3), ("c", 4), ("a", 5)), True)
    # a's row 1 waited too long: 3 then 5 replaced it; b and c each have one
    assert drain(pending) == [("b", 2), ("c", 4), ("a", 5)]
    first = pending.token()
    pending.accept(0, batch(("a", 6)), True)  # nothing waits any more: not behind
    pending.accept(0, batch(("a", 7)), True)
    assert drain(pending) == [("a", 6), ("a", 7)]
    assert first != pending.token()


def test_the_token_of_a_subscriber_behind_never_skips_a_waiting_change(
    clock: HandClock,
) -> None:
    pending = merge(clock)
    pending.accept(0, batch(("a", 10), ("b", 11)), True)
    clock.now += 2 * MAX_WAIT_S
    pending.accept(0, batch(("a", 12)), True)
    update = pending.take()
    assert update is not None and (update.key, update.offset) == ("b", 11)
    # a's 10 was replaced by its 12, which still waits: the token resumes from 12, not 13
    assert ResumeToken.parse(WORD_COUNTS.name, update.token).offsets == {0: 12}


def test_a_history_subscription_gets_every_event_however_late(clock: HandClock) -> None:
    pending = merge(clock, conflate=False, bound=4)
    pending.accept(0, batch(("a", 1), ("a", 2)), True)
    clock.now += 10 * MAX_WAIT_S
    pending.accept(0, batch(("a", 3), ("a", 4)), True)
    assert drain(pending) == [("a", 1), ("a", 2), ("a", 3), ("a", 4)]
    pending.accept(0, batch(("a", 5), ("a", 6), ("a", 7), ("a", 8)), True)
    with pytest.raises(SlowSubscriberError):
        pending.accept(0, batch(("a", 9)), True)


def test_nothing_is_accepted_once_a_subscription_failed(clock: HandClock) -> None:
    """A history subscriber past its bound ends; what arrives later is not delivered before
    the error nor moves its token past the events it lost."""
    pending = merge(clock, conflate=False, bound=2)
    pending.accept(0, batch(("a", 1), ("a", 2)), True)
    with pytest.raises(SlowSubscriberError) as failed:
        pending.accept(0, batch(("a", 3)), True)
    pending.fail(failed.value)
    pending.fail(SlowSubscriberError(WORD_COUNTS.name, 2, "X"))  # the first failure stays
    pending.accept(0, batch(("a", 4)), True)
    assert drain(pending) == [("a", 1), ("a", 2)]
    assert pending.failure == [failed.value]
    assert ResumeToken.parse(WORD_COUNTS.name, pending.token()).offsets == {0: 3}


def history(*offsets: int) -> FeedBatch:
    """Events of key a, each an entry of its own (its position), as a history view has."""
    found = tuple(Change(WORD_COUNTS.name, "a", o, {"count": o}, (o,)) for o in offsets)
    return FeedBatch(found, max(offsets) + 1, {"partition": 0})


def resume_offset(update: KeyUpdate) -> int:
    return ResumeToken.parse(WORD_COUNTS.name, update.token).offsets[0]


FEED = (history(1, 2), history(3, 4, 5), history(6), history(7, 8, 9))


@pytest.mark.parametrize("bound", range(1, 9))
def test_a_history_subscriber_past_its_bound_resumes_with_every_later_event_once(
    clock: HandClock, bound: int
) -> None:
    """Wherever the bound falls in a batch, each update's token is past its event, so
    resuming from the last token taken gets every later event, none twice."""
    slow = merge(clock, conflate=False, bound=bound)
    with pytest.raises(SlowSubscriberError) as failed:
        for fed in FEED:
            slow.accept(0, fed, True)
    slow.fail(failed.value)
    taken: list[KeyUpdate] = []
    while (update := slow.take()) is not None:
        assert resume_offset(update) > update.offset, update
        taken.append(update)
    token = ResumeToken.parse(WORD_COUNTS.name, taken[-1].token)
    resumed = _Merge(WORD_COUNTS, token, False, 1000, MAX_WAIT_S, clock, keys=1)
    for fed in FEED:  # the replay from the token, and again what came before it
        resumed.accept(0, fed, True)
    offsets = [u.offset for u in taken] + [o for _k, o in drain(resumed)]
    assert offsets == list(range(1, 10))


def test_a_history_subscriber_that_keeps_up_remembers_no_event(clock: HandClock) -> None:
    """What dedupes an event (its entry, its position) is forgotten once the subscription's
    offset passes it: a subscription's memory does not grow with the events it got."""
    pending = merge(clock, conflate=False)

    def keep_up(offsets: range) -> None:
        for offset in offsets:
            pending.accept(0, history(offset), True)
            assert pending.take() is not None

    keep_up(range(1000))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keep_up(range(1000, 21_000))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 500_000  # one entry per event kept: over 5 MB


def test_a_replay_of_what_was_received_is_not_delivered_again(clock: HandClock) -> None:
    """A follow that moved to another copy may send again what the subscription received:
    its offset (the batch's applied) skips it, forgotten entries too."""
    pending = merge(clock, conflate=False)
    pending.accept(0, history(1, 2), True)
    pending.accept(0, history(3), True)
    assert drain(pending) == [("a", 1), ("a", 2), ("a", 3)]
    pending.accept(0, history(2, 3, 4), True)
    assert drain(pending) == [("a", 4)]
    snapshot = Change(WORD_COUNTS.name, "b", 10, {"count": 9}, snapshot=True)
    rows = merge(clock)
    rows.accept(0, FeedBatch((snapshot,), 10, {}), True)
    rows.accept(0, batch(("b", 9), ("b", 10)), True)  # 9 is in the snapshot's row
    assert drain(rows) == [("b", 9), ("b", 10)]  # the snapshot row shows offset 9


def window(key: str, start: int, offset: int) -> FeedBatch:
    found = (Change(WORD_COUNTS.name, key, offset, {"count": 1}, (start,)),)
    return FeedBatch(found, offset + 1, {"partition": 0})


def test_more_keys_than_the_bound_each_keep_their_newest_row(clock: HandClock) -> None:
    """Past the bound, a subscription of more keys than the bound still gets each key's
    newest row: one row per key waits, never more."""
    keys = [f"k{i}" for i in range(10)]
    pending = merge(clock, bound=4, keys=len(keys))
    for round_ in range(3):
        for i, key in enumerate(keys):  # not behind: the bound alone conflates
            pending.accept(0, window(key, 0, 100 * round_ + i), True)
            assert len(pending.pending) <= len(keys)
    assert sorted(drain(pending)) == [(key, 200 + i) for i, key in enumerate(keys)]


def test_a_windowed_subscriber_that_takes_nothing_ends_past_its_bound_and_resumes(
    clock: HandClock,
) -> None:
    """Each new window of a key is an entry of its own: a subscriber that takes nothing
    would hold one row per window for good. Past the bound it ends instead, with every row
    held, and its last token resumes at the first window it did not get."""
    slow = merge(clock, bound=4, keys=1)
    with pytest.raises(SlowSubscriberError):
        for offset in range(1, 100):
            clock.now += 2 * MAX_WAIT_S  # each batch finds the one before still waiting
            slow.accept(0, window("a", 60 * offset, offset), True)
            assert len(slow.pending) <= 4
    assert offset == 5  # the first window past the bound
    slow.fail(SlowSubscriberError(WORD_COUNTS.name, 4, "X"))
    taken = drain(slow)
    assert taken == [("a", 1), ("a", 2), ("a", 3), ("a", 4)]
    token = ResumeToken.parse(WORD_COUNTS.name, slow.token())
    assert token.offsets == {0: 5}


def test_a_windowed_snapshot_larger_than_the_bound_is_held_whole_with_changes_after_it(
    clock: HandClock,
) -> None:
    """A snapshot's rows (one per window a node keeps) do not count toward the bound: all
    of them wait, then up to the bound of changes of other windows."""
    pending = merge(clock, bound=4, keys=1)
    rows = tuple(
        Change(WORD_COUNTS.name, "a", 11, {"count": 1}, (60 * w,), snapshot=True) for w in range(10)
    )
    pending.accept(0, FeedBatch(rows, 11, {"partition": 0}), True)
    for offset in range(11, 15):  # four changes of new windows
        clock.now += 2 * MAX_WAIT_S
        pending.accept(0, window("a", 60 * offset, offset), True)
    assert len(pending.pending) == 14
    clock.now += 2 * MAX_WAIT_S
    with pytest.raises(SlowSubscriberError):
        pending.accept(0, window("a", 60 * 15, 15), True)
    assert len(drain(pending)) == 14


def test_one_batch_of_more_windows_than_the_bound_is_held_whole(clock: HandClock) -> None:
    """A batch is taken in whole before the subscriber can take any of it (a catch-up, an
    event of a view of many hopping windows): its distinct windows all wait, however many,
    as long as the subscriber keeps up between batches."""
    pending = merge(clock, bound=4, keys=1)
    for round_ in range(3):
        changes = tuple(
            Change(WORD_COUNTS.name, "a", 100 * round_ + w, {"count": 1}, (60 * w,))
            for w in range(10)
        )
        pending.accept(0, FeedBatch(changes, 100 * round_ + 10, {"partition": 0}), True)
        assert len(drain(pending)) == 10
        clock.now += 2 * MAX_WAIT_S  # a while later, with nothing waiting


def test_a_key_subscriber_that_takes_nothing_never_ends(clock: HandClock) -> None:
    """Without windows one row per key waits at most, so a row subscription of keys alone
    never ends for being slow, however many keys and changes."""
    keys = [f"k{i}" for i in range(10)]
    pending = merge(clock, bound=4, keys=len(keys))
    for offset in range(1, 500):  # the last, 490..499, one for each key
        pending.accept(0, batch((keys[offset % len(keys)], offset)), True)
    assert len(pending.pending) <= len(keys)
    assert sorted(drain(pending)) == sorted((k, 490 + i) for i, k in enumerate(keys))
