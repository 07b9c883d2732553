"""Closed-loop load with wrk where every answer is checked against the truth.

Like `loadgen`, but with `wrk_checked.lua`: each response must be a 200 without GraphQL
errors whose key and count equal the data set's count for that key. The run reports how
many responses were checked and how many were wrong; a run where some were wrong still
has its figures, and the step shows the wrong count next to them.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from tests.bench.loadgen import LoadResult

__all__ = ["CheckedLoad", "CheckedRun", "parse_checked"]

_LUA = Path(__file__).with_name("wrk_checked.lua")
_MARK = "BENCHJSON "


@dataclass(frozen=True)
class CheckedRun:
    """One load run: its figures and what the check of every answer found."""

    load: LoadResult
    checked: int  # responses the script looked at (all that arrived)
    wrong: int  # 200 without errors, but not the truth
    failed: int  # socket errors, non-200 and GraphQL errors

    def to_json(self) -> dict[str, Any]:
        return {**self.load.to_json(), "checked": self.checked, "wrong": self.wrong}


def parse_checked(stdout: str, connections: int) -> CheckedRun:
    """The figures of the `BENCHJSON` line wrk_checked.lua printed; ValueError without one."""
    lines = [x for x in stdout.splitlines() if x.startswith(_MARK)]
    if not lines:
        raise ValueError(f"no {_MARK.strip()} line in wrk's output: {stdout[-2000:]}")
    raw = orjson.loads(lines[-1][len(_MARK) :])
    seconds = raw["duration_us"] / 1e6
    failed = int(raw["socket_errors"]) + int(raw["bad_responses"])
    load = LoadResult(
        tool="wrk",
        connections=connections,
        seconds=seconds,
        requests=int(raw["requests"]),
        errors=failed + int(raw["wrong_answers"]),
        rps=raw["requests"] / seconds if seconds > 0 else 0.0,
        p50_ms=raw["p50_us"] / 1000,
        p90_ms=raw["p90_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        mean_ms=raw["mean_us"] / 1000,
        max_ms=raw["max_us"] / 1000,
    )
    return CheckedRun(load, int(raw["checked"]), int(raw["wrong_answers"]), failed)


def _check_loopback(url: str) -> None:
    if urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"benchmark load goes to loopback only, not to {url}")


class CheckedLoad:
    """Runs wrk with `script` (`wrk_checked.lua`: against a truth file set with `set_truth`)
    over files of bodies in `workdir`."""

    def __init__(self, workdir: Path, key_field: str, script: Path = _LUA) -> None:
        wrk = shutil.which("wrk")
        if wrk is None:
            raise RuntimeError(
                "wrk is needed to check every answer under load: apt-get install wrk"
            )
        self.wrk = wrk
        self.workdir = workdir
        self.key_field = key_field
        self.script = script
        self._truth: Path | None = None

    def set_truth(self, counts: Mapping[str, int]) -> None:
        """The right count of every key the bodies ask for."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._truth = self.workdir / "truth.txt"
        self._truth.write_text("".join(f"{k} {c}\n" for k, c in counts.items()))

    def bodies_file(self, name: str, bodies: Sequence[bytes]) -> Path:
        """`bodies` written once, one per line, for many runs."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / f"{name}.bodies"
        path.write_bytes(b"\n".join(bodies) + b"\n")
        return path

    def run(
        self, url: str, bodies: Sequence[bytes] | Path, connections: int, seconds: float
    ) -> CheckedRun:
        """Load `url` for `seconds` (whole seconds, at least 1) with `bodies` (or a file of
        them from `bodies_file`); RuntimeError if wrk fails."""
        if self._truth is None and self.script == _LUA:
            raise RuntimeError("CheckedLoad.set_truth must come before run")
        _check_loopback(url)
        written = None
        if not isinstance(bodies, Path):
            with tempfile.NamedTemporaryFile(
                "wb", dir=self.workdir, suffix=".bodies", delete=False
            ) as file:
                file.write(b"\n".join(bodies) + b"\n")
            written = bodies = Path(file.name)
        try:
            done = subprocess.run(
                self._command(url, bodies, connections, seconds),
                capture_output=True,
                text=True,
                timeout=seconds + 60,
            )
        finally:
            if written is not None:
                written.unlink(missing_ok=True)
        if done.returncode != 0:
            raise RuntimeError(f"wrk failed (exit {done.returncode}): {done.stderr[-2000:]}")
        return parse_checked(done.stdout, connections)

    def _command(self, url: str, bodies: Path, connections: int, seconds: float) -> list[str]:
        # one wrk thread, as loadgen: the servers, not the generator, get the second core
        duration = f"{max(1, round(seconds))}s"
        truth = "-" if self._truth is None else str(self._truth)
        script = ["-s", str(self.script), url, "--", str(bodies), truth, self.key_field]
        return [self.wrk, "-t1", f"-c{connections}", f"-d{duration}", "--timeout", "10s", *script]
