"""`statefed gateway` run as a process with only the given statefed settings, for the tests
of what it refuses at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["start_gateway"]

ROOT = Path(__file__).parents[2]


def start_gateway(settings: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The gateway process started with `settings` as its only STATEFED_* variables, once it
    exited (within 60 s: these settings must make it refuse to start)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("STATEFED_")},
        **settings,
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "gateway"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
