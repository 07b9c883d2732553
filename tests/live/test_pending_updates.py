"""What waits for a subscriber (gateway.subscriptions.updates `_Merge`), on a clock of the
test's: every change while the subscriber keeps up; once an update has waited past the
subscription's max wait, each key's newest row only; a history subscription every event."""

from __future__ import annotations

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


def merge(clock: HandClock, conflate: bool = True, bound: int = 1000) -> _Merge:
    return _Merge(WORD_COUNTS, None, conflate, bound, MAX_WAIT_S, clock)


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
