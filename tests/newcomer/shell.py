"""Running what a newcomer runs: fenced blocks of a Markdown file, and processes in a
process group of their own, their output read by a thread, stopped by their handle as a
newcomer would (Ctrl-C to the group), then SIGKILL at the deadline."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tooling.processes import wait_until

__all__ = ["Block", "Output", "demo_places", "readme_blocks", "start", "stop"]

_FENCE = re.compile(r"^```(\w*)\s*$")
# held while a demo runs: every demo serves the same fixed places (port 8100, Kafka on
# 9092, the registry on 8081), whichever test or worker starts it
_PLACES_LOCK = Path(tempfile.gettempdir()) / "statefed-demo-places.lock"


@contextlib.contextmanager
def demo_places() -> Iterator[None]:
    """The demo's fixed places for the caller alone (a lock across processes)."""
    with _PLACES_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Block:
    """A fenced block of the README: its language and text, and the line its text starts."""

    lang: str
    line: int
    text: str


def readme_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lang: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        fence = _FENCE.match(line)
        if lang is None and fence:
            lang, start, body = fence.group(1), number + 1, []
        elif lang is not None and line.strip() == "```":
            blocks.append(Block(lang, start, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


class Output:
    """The lines a process prints, read by a thread so the process never blocks on a pipe."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def finish(self, timeout_s: float = 10.0) -> None:
        """Wait for the end of the stream (the process has exited)."""
        self._thread.join(timeout_s)

    def tail(self, count: int = 60) -> str:
        return "\n".join(self.lines[-count:])


def start(
    args: list[str], cwd: Path, bin_dir: Path | None = None, *, own_stderr: bool = False
) -> subprocess.Popen[str]:
    """A process in its own process group (stopped with everything it starts), its
    standard error in its output (with `own_stderr`, in a pipe of its own, as a terminal
    keeps apart what a command prints and its progress), with the environment of a fresh
    shell: no STATEFED_*, and `bin_dir` first on the PATH (an activated virtualenv's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEFED_")}
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if own_stderr else subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _group_alive(process: subprocess.Popen[str]) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(process: subprocess.Popen[str]) -> bool:
    process.poll()  # reaps the process once it has exited: a zombie still counts in its group
    return not _group_alive(process)


def _signal(process: subprocess.Popen[str], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(process.pid, sig)


def stop(process: subprocess.Popen[str], first: signal.Signals, timeout_s: float) -> bool:
    """Send `first` to the process's group, wait for the group to be gone, SIGKILL it at
    the deadline; whether it was gone in time."""
    _signal(process, first)
    try:
        wait_until(lambda: _gone(process), timeout_s, "the process group to end", 0.2)
    except TimeoutError:
        _signal(process, signal.SIGKILL)
        return False
    finally:
        process.wait()
    return True
