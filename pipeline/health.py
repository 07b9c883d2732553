"""A liveness file for probes that cannot ask Spark (a container health check).

While every query runs, `run_pipeline` rewrites the file named by
STATEFED_PIPELINE_HEALTH_FILE about twice a second, after checking that every query is
still active; it removes the file when it starts and when it stops. `check_health` reads
it back: healthy when it was written within STATEFED_PIPELINE_HEALTH_MAX_AGE_MS, so a
pipeline that is starting, restarting its queries, stopped or wedged (a driver that no
longer answers) is not. `statefed pipeline --check-health` runs it from the same
environment as the pipeline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from runtime.clock import Clock, wall_clock_ms

__all__ = ["HealthFile", "check_health"]


@dataclass(frozen=True)
class HealthFile:
    """The liveness file at `path`; None: no file is kept (the default)."""

    path: Path | None
    clock: Clock = wall_clock_ms

    def beat(self, queries: int) -> None:
        """Record that `queries` queries are running now (written whole, then renamed in)."""
        if self.path is None:
            return
        document = {"updated_ms": self.clock(), "queries": queries}
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_bytes(orjson.dumps(document))
        partial.replace(self.path)

    def clear(self) -> None:
        """Remove the file: nothing runs (yet, or any more)."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def check_health(path: Path, max_age_ms: int, now_ms: int) -> tuple[bool, str]:
    """Whether the pipeline writing `path` is healthy at `now_ms`, and a line saying why."""
    try:
        document = orjson.loads(path.read_bytes())
        updated_ms, queries = int(document["updated_ms"]), int(document["queries"])
    except FileNotFoundError:
        return False, f"no health file {str(path)!r}: the pipeline is starting or not running"
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return False, f"unreadable health file {str(path)!r}: {exc}"
    age_ms = now_ms - updated_ms
    if age_ms > max_age_ms:
        return False, (
            f"{queries} queries last seen running {age_ms / 1000:.1f} s ago, more than "
            f"STATEFED_PIPELINE_HEALTH_MAX_AGE_MS ({max_age_ms} ms)"
        )
    return True, f"{queries} queries running ({max(age_ms, 0)} ms ago)"
