"""Setting an Event from a signal handler (runtime.signals) never waits on the Event's lock."""

from __future__ import annotations

import threading

from runtime.signals import set_from_handler


def test_the_event_is_set_even_while_the_interrupted_thread_holds_its_lock() -> None:
    event = threading.Event()
    # what a handler meets when it interrupts Event.wait between taking back the lock of
    # the Event's Condition and leaving: `event.set()` called here would wait for ever
    with event._cond:  # type: ignore[attr-defined]
        set_from_handler(event)
        assert not event.is_set()
    assert event.wait(10.0)
