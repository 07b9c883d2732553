"""`statefed node`'s restore bars (tooling.restoreview): drawn from a node's /health, served
here by a small app under uvicorn whose restore the test moves, onto a terminal console."""

from __future__ import annotations

import io
import threading
from typing import Any

import orjson
from rich.console import Console

from tests.gateway.fakes import ServerThread
from tooling.processes import wait_until
from tooling.restoreview import restore_progress


class Health:
    """An ASGI app answering GET /health with `partitions`, counting the reads."""

    def __init__(self) -> None:
        self.partitions: list[dict[str, Any]] = []
        self.reads = 0
        self._lock = threading.Lock()

    def restore(self, partition: int, role: str, done: int, total: int) -> None:
        with self._lock:
            done_yet = total > 0 and done >= total  # a total of 0: not known yet
            copy = {"partition": partition, "role": role, "restoring": not done_yet}
            copy |= {"restoreDone": done, "restoreTotal": total}
            self.partitions = [p for p in self.partitions if p["partition"] != partition]
            self.partitions.append(copy)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        with self._lock:
            body = orjson.dumps({"state": "RESTORING", "partitions": self.partitions})
            self.reads += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


def read_after(health: Health, reads: int) -> None:
    """Wait until the watcher has read /health `reads` more times (and drawn it)."""
    target = health.reads + reads
    wait_until(lambda: health.reads >= target, 10, f"{reads} reads of /health", 0.01)


def test_restores_are_drawn_as_bars_until_done() -> None:
    health = Health()
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)

    def shows(*texts: str) -> None:
        wait_until(
            lambda: all(t in screen.getvalue() for t in texts),
            10,
            lambda: screen.getvalue()[-300:],
            0.01,
        )

    with (
        ServerThread(health) as server,
        restore_progress(server.url, interval_s=0.05, console=console),
    ):
        read_after(health, 2)
        assert screen.getvalue() == ""  # nothing restores: nothing is drawn
        health.restore(3, "ACTIVE", 250, 1000)
        health.restore(4, "STANDBY", 0, 0)  # total not known yet
        shows("restoring partition 3 (ACTIVE)", "250/1000", "restoring partition 4 (STANDBY)")
        health.restore(3, "ACTIVE", 1000, 1000)
        health.restore(4, "STANDBY", 80, 80)
        shows("1000/1000", "80/80")  # finished bars end full
        stopped = len(screen.getvalue())
        read_after(health, 3)
        assert len(screen.getvalue()) == stopped  # nothing restores: nothing more is drawn
