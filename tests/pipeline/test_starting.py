"""Starting the pipeline's queries together (`pipeline.starting.start_together`): what
started is kept in the catalogue's order, also when another start failed, and no more
than `at_once` starts run at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pipeline.starting import start_together


def _start(name: str, done: threading.Event | None = None) -> Callable[[], str]:
    def start() -> str:
        if done is not None:
            assert done.wait(10.0), f"{name} waited for the start after it"
        return name

    return start


def test_what_started_is_kept_in_the_order_of_the_starts() -> None:
    second_done = threading.Event()

    def second() -> str:
        second_done.set()
        return "second"

    kept: list[str] = []
    start_together([_start("first", second_done), second], kept.append)
    assert kept == ["first", "second"]  # the first finished last


def test_a_failed_start_is_raised_after_the_others_are_kept() -> None:
    def failing() -> str:
        raise RuntimeError("streaming query statefed.b failed to start 3 times")

    kept: list[str] = []
    with pytest.raises(RuntimeError, match=r"statefed\.b failed to start"):
        start_together([_start("a"), failing, _start("c")], kept.append)
    assert kept == ["a", "c"]


def test_no_more_than_at_once_starts_run_together() -> None:
    running, most = 0, 0
    lock = threading.Lock()
    release = threading.Barrier(2, timeout=10.0)

    def start() -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait()  # two at a time meet here; a third would have to wait
        with lock:
            running -= 1
        return most

    start_together([start] * 6, lambda _: None, at_once=2)
    assert most == 2
