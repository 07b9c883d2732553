"""The machine and code a run measured: cores, memory, CPU model, date and commit."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = ["Machine", "describe_machine"]


@dataclass(frozen=True)
class Machine:
    cores: int
    memory_bytes: int
    cpu_model: str
    kernel: str
    python: str
    date: str
    commit: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit(repo: Path) -> str:
    """HEAD, marked `+dirty` when the work tree has changes (read-only git commands)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if status else head


def describe_machine(repo: Path) -> Machine:
    return Machine(
        cores=os.cpu_count() or 0,
        memory_bytes=psutil.virtual_memory().total,
        cpu_model=_cpu_model(),
        kernel=platform.release(),
        python=platform.python_version(),
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        commit=_commit(repo),
    )
