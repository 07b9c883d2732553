"""Signal handlers that set a `threading.Event` without deadlocking.

A Python signal handler runs in the main thread between two bytecodes, wherever that
thread is: also inside `Event.wait`, between taking back the lock of the Event's Condition
(a plain, not reentrant, Lock) after its timed wait and leaving. `Event.set()` takes that
lock, so a handler calling it there waits for itself for ever: a Ctrl-C that never stops
the process. `set_from_handler` hands the `set()` to a short-lived thread, which takes the
lock as soon as the main thread lets it go.
"""

from __future__ import annotations

import threading

__all__ = ["set_from_handler"]


def set_from_handler(event: threading.Event) -> None:
    """Set `event` from a signal handler: soon, in another thread, never blocking this one."""
    threading.Thread(target=event.set, name="set-from-signal", daemon=True).start()
