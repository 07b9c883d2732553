"""CPU accounting of a run: how busy our processes are, and what else used the machine.

The benchmark shares the machine with whatever else runs on it; `CpuMeter` measures the
CPU time used by processes outside this run's process tree during a step, so a figure
taken while something else was busy can be told apart.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "CpuMeter",
    "CpuUsage",
    "busy_seconds",
    "own_cpu_seconds",
    "retire_descendants",
    "run_queue_seconds",
    "wait_machine_idle",
    "wait_quiet",
]

# CPU seconds of processes this run stopped on purpose (`retire_descendants`): a grandchild
# its parent does not reap (Spark's JVM) is reaped by init, and its time is lost otherwise
_retired_s = 0.0


def busy_seconds() -> float:
    """CPU seconds the whole machine was busy (every process) since boot."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def run_queue_seconds(pid: int, main_only: bool = False) -> float:
    """Seconds the threads of process `pid` (its main thread alone with `main_only`) were
    ready to run but waiting for a core, since they started: the second field of Linux's
    `/proc/PID/task/TID/schedstat`, which the kernel brings up to date when a thread is
    switched out. 0.0 for a process that is gone or a kernel without schedstat."""
    tasks = [Path(f"/proc/{pid}/task/{pid}")] if main_only else _tasks(pid)
    waited_ns = 0
    for task in tasks:
        try:
            waited_ns += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return waited_ns / 1e9


def _tasks(pid: int) -> list[Path]:
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []


def retire_descendants(pid: int) -> None:
    """Count the CPU time of the descendants of our child `pid` as this run's for good:
    call it just before stopping `pid` when they may die unreaped by it (`pid`'s own time
    comes in when it is reaped)."""
    global _retired_s
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for process in descendants:
        try:
            t = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        _retired_s += t.user + t.system


def own_cpu_seconds(include_self: bool = True) -> float:
    """CPU seconds of this process (with reaped children), every live descendant, and the
    descendants retired (`retire_descendants`)."""
    me = psutil.Process(os.getpid())
    total = _retired_s
    if include_self:
        t = me.cpu_times()
        total += t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            t = child.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += t.user + t.system
    return total


@dataclass(frozen=True)
class CpuUsage:
    seconds: float
    own_cores: float  # average cores used by this run's processes
    other_cores: float  # average cores used by everything else

    def describe(self) -> str:
        return (
            f"this run's processes used {self.own_cores:.2f} cores on average, "
            f"other processes on the machine {self.other_cores:.2f}"
        )


class CpuMeter:
    """`meter = CpuMeter()` ... `meter.stop()` -> CpuUsage over that interval."""

    def __init__(self) -> None:
        self._began = time.monotonic()
        self._busy = busy_seconds()
        self._own = own_cpu_seconds()

    def stop(self) -> CpuUsage:
        elapsed = max(1e-6, time.monotonic() - self._began)
        busy = busy_seconds() - self._busy
        own = own_cpu_seconds() - self._own
        return CpuUsage(elapsed, own / elapsed, max(0.0, busy - own) / elapsed)


def wait_quiet(max_s: float, threshold_cores: float = 0.15, window_s: float = 0.5) -> float:
    """Wait (at most `max_s`) until this run's child processes are idle; returns the wait.

    After a restore or a rebalance, LevelDB compactions and catch-up reads go on for a
    while; a load run started meanwhile measures them too.
    """
    began = time.monotonic()
    while time.monotonic() - began < max_s:
        before = own_cpu_seconds(include_self=False)
        time.sleep(window_s)
        if (own_cpu_seconds(include_self=False) - before) / window_s < threshold_cores:
            break
    return time.monotonic() - began


def wait_machine_idle(
    max_s: float, threshold_cores: float = 0.3, window_s: float = 2.0
) -> CpuUsage:
    """Wait (at most `max_s`) until other processes use under `threshold_cores`."""
    began = time.monotonic()
    while True:
        meter = CpuMeter()
        time.sleep(window_s)
        usage = meter.stop()
        waited = time.monotonic() - began
        if usage.other_cores < threshold_cores or waited > max_s:
            return CpuUsage(waited, usage.own_cores, usage.other_cores)
