"""Closed-loop HTTP load from a separate process: wrk with wrk_post.lua, else httpx.

Each run POSTs a list of JSON bodies in turn over N keep-alive connections to one URL on
loopback for a fixed time, and returns throughput, latency percentiles and the count of
failed or GraphQL-error responses.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

__all__ = ["LoadGenerator", "LoadResult"]

_LUA = Path(__file__).with_name("wrk_post.lua")
_MARK = "BENCHJSON "


@dataclass(frozen=True)
class LoadResult:
    """One load run: requests/s and latencies in ms."""

    tool: str
    connections: int
    seconds: float
    requests: int
    errors: int
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def _check_loopback(url: str) -> None:
    host = urlsplit(url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"benchmark load goes to loopback only, not to {url}")


class LoadGenerator:
    """Runs wrk (preferred) or the httpx fallback as a child process."""

    def __init__(self, workdir: Path, force_httpx: bool = False) -> None:
        self.workdir = workdir
        self.wrk = None if force_httpx else shutil.which("wrk")

    @property
    def tool(self) -> str:
        return "wrk" if self.wrk else "httpx"

    def run(
        self, url: str, bodies: Sequence[bytes], connections: int, seconds: float
    ) -> LoadResult:
        """Load `url` for `seconds`; raises RuntimeError if the generator fails."""
        _check_loopback(url)
        self.workdir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "wb", dir=self.workdir, suffix=".bodies", delete=False
        ) as file:
            file.write(b"\n".join(bodies) + b"\n")
        try:
            command = self._command(url, Path(file.name), connections, seconds)
            done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30)
        finally:
            Path(file.name).unlink(missing_ok=True)
        return self._parse(done, connections)

    def _command(self, url: str, bodies: Path, connections: int, seconds: float) -> list[str]:
        if self.wrk:
            # one wrk thread: the servers, not the generator, should get the second core
            duration = f"{max(1, round(seconds))}s"
            return [
                self.wrk,
                "-t1",
                f"-c{connections}",
                f"-d{duration}",
                "--timeout",
                "10s",
                "-s",
                str(_LUA),
                url,
                "--",
                str(bodies),
            ]
        return [
            sys.executable,
            "-m",
            "tests.bench.httpx_load",
            url,
            str(bodies),
            "--connections",
            str(connections),
            "--duration",
            str(seconds),
        ]

    def _parse(self, done: subprocess.CompletedProcess[str], connections: int) -> LoadResult:
        lines = [x for x in done.stdout.splitlines() if x.startswith(_MARK)]
        if done.returncode != 0 or not lines:
            raise RuntimeError(
                f"{self.tool} failed (exit {done.returncode}): {done.stderr[-2000:]} "
                f"{done.stdout[-2000:]}"
            )
        raw = orjson.loads(lines[-1][len(_MARK) :])
        seconds = raw["duration_us"] / 1e6
        return LoadResult(
            tool=self.tool,
            connections=connections,
            seconds=seconds,
            requests=int(raw["requests"]),
            errors=int(raw["socket_errors"]) + int(raw["bad_responses"]),
            rps=raw["requests"] / seconds if seconds > 0 else 0.0,
            p50_ms=raw["p50_us"] / 1000,
            p90_ms=raw["p90_us"] / 1000,
            p99_ms=raw["p99_us"] / 1000,
            mean_ms=raw["mean_us"] / 1000,
            max_ms=raw["max_us"] / 1000,
        )
