"""Peak memory of statefed's processes, sampled over their process trees.

A background thread samples every process of each part (the pid and all descendants)
twice a second and keeps, per part and per component (e.g. the pipeline's Python
driver, its JVM and its Python workers), the highest RSS and PSS seen, summed over the
component's processes. RSS counts pages shared between forked processes (Spark's Python
workers fork from one daemon) once per process; PSS splits them, so PSS sums are the
tree's real footprint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import TracebackType

import psutil

__all__ = ["Peaks", "RssSampler", "component_of"]

PidsOf = Callable[[], Mapping[str, int]]
# part -> component -> {"rss": bytes, "pss": bytes, "processes": n}, each a peak
Peaks = dict[str, dict[str, dict[str, int]]]


def component_of(process: psutil.Process, root: bool) -> str:
    """Which kind of process this is within its part's tree."""
    if root:
        return "main"
    try:
        name = process.name().lower()
        cmdline = " ".join(process.cmdline()).lower()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other"
    if "java" in name:
        return "jvm"
    if "pyspark" in cmdline or "python" in name:
        return "python workers"
    return "other"


class RssSampler:
    """`with RssSampler(pids_of):` samples until exit; read `peaks()` at any time."""

    def __init__(self, pids_of: PidsOf, interval_s: float = 0.5) -> None:
        self._pids_of = pids_of
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._lock = threading.Lock()
        self._peaks: Peaks = {}

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def sample(self) -> None:
        for part, pid in dict(self._pids_of()).items():
            usage = _tree_usage(pid)
            with self._lock:
                peaks = self._peaks.setdefault(part, {})
                for component, figures in usage.items():
                    peak = peaks.setdefault(component, {})
                    for key, value in figures.items():
                        peak[key] = max(peak.get(key, 0), value)

    def peaks(self) -> Peaks:
        with self._lock:
            return {part: {c: dict(f) for c, f in p.items()} for part, p in self._peaks.items()}

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(5.0)


def _tree_usage(pid: int) -> dict[str, dict[str, int]]:
    """RSS, PSS and process count per component of the tree at `pid`, plus "total"."""
    try:
        root = psutil.Process(pid)
        tree = [(root, True)] + [(c, False) for c in root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return {}
    usage: dict[str, dict[str, int]] = {}
    for process, is_root in tree:
        try:
            memory = process.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for component in (component_of(process, is_root), "total"):
            figures = usage.setdefault(component, {"rss": 0, "pss": 0, "processes": 0})
            figures["rss"] += memory.rss
            figures["pss"] += getattr(memory, "pss", memory.rss)
            figures["processes"] += 1
    return usage
