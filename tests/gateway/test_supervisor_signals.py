"""The gateway supervisor's SIGTERM/SIGINT handler (gateway.edge.supervisor) sets its stop
event without waiting for the event's lock, which the interrupted main thread may hold
inside `stopping.wait` (it polls its workers with one): a SIGTERM must never hang it."""

from __future__ import annotations

import signal
import threading

from gateway.edge.supervisor import stop_handler


def test_the_handler_stops_the_supervisor_even_while_the_main_thread_holds_the_lock() -> None:
    stopping = threading.Event()
    handled = threading.Event()

    def interrupted_inside_wait() -> None:
        with stopping._cond:  # type: ignore[attr-defined]  # as inside Event.wait
            stop_handler(stopping)(signal.SIGTERM, None)
            handled.set()

    handler = threading.Thread(target=interrupted_inside_wait, daemon=True)
    handler.start()
    assert handled.wait(10.0), "the handler waited for the lock its own thread holds"
    assert stopping.wait(10.0)
