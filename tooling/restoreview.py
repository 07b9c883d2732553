"""`statefed node` in a terminal: a progress bar on stderr for each partition copy the node
restores, read from the node's own `/health` (only when stderr is a terminal; the node
itself knows nothing of it)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

__all__ = ["restore_progress"]

log = logging.getLogger(__name__)

_INTERVAL_S = 0.5


class _RestoreBars:
    """One bar per restoring copy, shown from the first restore seen until none restores."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("restoring partition {task.fields[partition]} ({task.fields[role]})"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
        )
        self._tasks: dict[tuple[int, str], TaskID] = {}
        self._shown = False

    def update(self, partitions: list[dict[str, Any]]) -> None:
        restoring = {(p["partition"], p["role"]): p for p in partitions if p["restoring"]}
        if restoring and not self._shown:
            self._progress.start()
            self._shown = True
        for key, copy in restoring.items():
            total = copy["restoreTotal"] or None
            if key not in self._tasks:
                self._tasks[key] = self._progress.add_task(
                    "", total=total, partition=key[0], role=key[1]
                )
            self._progress.update(self._tasks[key], total=total, completed=copy["restoreDone"])
        held = {(p["partition"], p["role"]): p for p in partitions}
        for key in [k for k in self._tasks if k not in restoring]:
            task = self._tasks.pop(key)
            copy = held.get(key, {})  # gone (revoked), or caught up: the bar ends full
            total = copy.get("restoreTotal") or self._progress.tasks[task].total or 0
            self._progress.update(task, total=total, completed=total)
        if not restoring:
            self.close()

    def close(self) -> None:
        if self._shown:
            self._progress.stop()
            self._shown = False


@contextmanager
def restore_progress(
    node_url: str, *, interval_s: float = _INTERVAL_S, console: Console | None = None
) -> Iterator[None]:
    """While inside, poll `node_url`/health every `interval_s` and draw restores on
    `console` (default: stderr)."""
    stopping = threading.Event()
    bars = _RestoreBars(console or Console(stderr=True))

    def follow() -> None:
        with httpx.Client(timeout=2.0) as client:
            while not stopping.wait(interval_s):
                try:
                    body = client.get(node_url.rstrip("/") + "/health").json()
                except (httpx.HTTPError, ValueError) as exc:  # not serving yet, or stopping
                    log.debug("restore progress: %s", exc)
                    continue
                bars.update(body.get("partitions", []))

    thread = threading.Thread(target=follow, name="statefed-restore-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        thread.join(5)
        bars.close()
