"""Sampling profiles with py-spy (optional): where a busy process spends its CPU.

py-spy is a separate tool (`pip install py-spy`); the benchmark looks for it next to the
Python interpreter, on PATH, or at `--py-spy PATH`, and skips profiling without it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.bench.report import Section

__all__ = ["STATEFED_CODE", "Profile", "ProfileRecorder", "find_py_spy", "write_profiles"]

STATEFED_CODE = ("gateway/", "node/", "schema/")
_ENTRY_POINTS = ("tooling/cli.py", "node/serve/server.py", "gateway/edge/server.py")
# the part of a process a sample's time goes to: the first of these its own frame's file
# starts with, else its caller's (a frame without a known file, as a dataclass's generated
# `__init__` or code in C, is its caller's time), else "other"
AREAS = (
    ("runtime/graphql_http/", "HTTP and GraphQL over HTTP (ours)"),
    ("gateway/edge/", "HTTP and GraphQL over HTTP (ours)"),
    ("gateway/cors.py", "HTTP and GraphQL over HTTP (ours)"),
    ("uvicorn/", "HTTP server (uvicorn)"),
    ("httptools/", "HTTP server (uvicorn)"),
    ("asyncio/", "event loop"),
    ("gateway/execute/", "gateway: plans and responses"),
    ("gateway/reads/cache.py", "gateway: cache"),
    ("gateway/reads/admission.py", "gateway: cache"),
    ("gateway/reads/entries.py", "gateway: cache"),
    ("gateway/reads/whole.py", "gateway: cache"),
    ("gateway/reads/", "gateway: reads (planner)"),
    ("gateway/nodes/", "gateway: node calls"),
    ("gateway/cluster/", "gateway: routing and cluster"),
    ("gateway/", "gateway: fields, models, other"),
    ("schema/", "partitioner and key types"),
    ("node/", "node"),
    ("graphql/", "graphql-core"),
    ("strawberry/", "strawberry"),
    ("confluent_kafka/", "Kafka client"),
    ("runtime/", "runtime, other"),
)


def find_py_spy(explicit: str | None) -> str | None:
    if explicit:
        return explicit if Path(explicit).exists() else None
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def _short(frame: str) -> str:
    """`f (/x/site-packages/strawberry/schema.py:12)` -> `f (strawberry/schema.py)`."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3.11/", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})" if path else name


@dataclass
class Profile:
    """Samples of one process: self time and inclusive time per function."""

    part: str
    samples: int = 0
    self_time: Counter[str] = field(default_factory=Counter)
    inclusive: Counter[str] = field(default_factory=Counter)
    areas: Counter[str] = field(default_factory=Counter)  # self time by `AREAS`

    @classmethod
    def from_collapsed(cls, part: str, text: str) -> Profile:
        profile = cls(part)
        for line in text.splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [_short(f) for f in stack.split(";") if f]
            if not frames:
                continue
            n = int(count)
            profile.samples += n
            profile.self_time[frames[-1]] += n
            profile.areas[_area(frames)] += n
            for frame in set(frames):
                profile.inclusive[frame] += n
        return profile

    def top(self, counter: Counter[str], n: int) -> list[tuple[str, float]]:
        rows = counter.most_common(n)
        return [(f, 100.0 * c / self.samples) for f, c in rows] if self.samples else []

    def top_statefed(self, n: int) -> list[tuple[str, float]]:
        """Inclusive time of statefed's own functions, without the process entry points."""
        rows = [
            (f, c)
            for f, c in self.inclusive.most_common()
            if f.split(" (")[-1].startswith(STATEFED_CODE)
            and not f.split(" (")[-1].startswith(_ENTRY_POINTS)
        ]
        return [(f, 100.0 * c / self.samples) for f, c in rows[:n]] if self.samples else []

    def to_json(self, n: int = 15) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "area_percent": dict(self.top(self.areas, len(self.areas))),
            "self_percent": dict(self.top(self.self_time, n)),
            "statefed_inclusive_percent": dict(self.top_statefed(n)),
        }


def _area(frames: list[str]) -> str:
    """The area (`AREAS`) of a sample whose stack is `frames`, innermost last."""
    for frame in reversed(frames):
        path = frame.split(" (")[-1]
        for prefix, area in AREAS:
            if path.startswith(prefix):
                return area
    return "other"


class ProfileRecorder:
    """Records several processes at once for a fixed time."""

    def __init__(self, py_spy: str, workdir: Path) -> None:
        self.py_spy = py_spy
        self.workdir = workdir

    def start(
        self, part: str, pid: int, seconds: float, gil: bool = False
    ) -> tuple[str, subprocess.Popen[bytes], Path]:
        """Record `pid` for `seconds`; with `gil`, only the thread holding the GIL is
        sampled (the Python work of the process, one thread at a time), else every thread."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        out = self.workdir / f"{part.replace(' ', '-')}.collapsed"
        command = [
            self.py_spy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, round(seconds))),
            "--rate",
            "250",
            "--format",
            "raw",
            "--nonblocking",
            *(["--gil"] if gil else []),
            "--output",
            str(out),
        ]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return part, process, out

    @staticmethod
    def finish(started: tuple[str, subprocess.Popen[bytes], Path], timeout_s: float) -> Profile:
        part, process, out = started
        try:
            _, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
        if not out.exists():
            raise RuntimeError(f"py-spy wrote no profile of {part}: {stderr.decode()[-500:]}")
        return Profile.from_collapsed(part, out.read_text(errors="replace"))


def write_profiles(section: Section, profiles: list[Profile], what: str) -> None:
    """Tables of each profile's hottest functions and statefed code; `what` (a sentence)
    says what was profiled."""
    if not profiles:
        section.notes.append("Not profiled: py-spy not found (pass --py-spy PATH).")
        return
    section.figures["profiles"] = {p.part: p.to_json() for p in profiles}
    section.notes.append(what)
    for profile in profiles:
        table = section.table(f"{profile.part}: hottest functions (self)", "% of samples")
        for frame, percent in profile.top(profile.self_time, 12):
            table.add(f"`{frame}`", f"{percent:.1f}")
        table = section.table(f"{profile.part}: statefed code (inclusive)", "% of samples")
        for frame, percent in profile.top_statefed(10):
            table.add(f"`{frame}`", f"{percent:.1f}")
        table = section.table(f"{profile.part}: where the time goes (self time)", "% of samples")
        for area, percent in profile.top(profile.areas, len(profile.areas)):
            table.add(area, f"{percent:.1f}")
