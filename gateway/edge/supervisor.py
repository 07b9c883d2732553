"""Several gateway processes on one port (STATEFED_GATEWAY_PROCESSES > 1).

One gateway process answers on one event loop, so it uses one core. With N processes,
the parent (`supervise`) starts N workers (`python -m gateway.edge.worker INDEX COUNT
DIR`), each a complete gateway that binds the port itself with SO_REUSEPORT: the kernel
spreads new connections over them, and nothing is shared between them but the port and
the directory where they answer each other's metrics (`gateway.edge.workermetrics`).

The parent stops every worker (SIGTERM, then SIGKILL past a deadline) when it gets SIGTERM
or SIGINT, and also when a worker exits by itself: a lost worker stops the whole gateway,
so that whatever supervises it (systemd, Kubernetes) sees it and restarts it.
"""

from __future__ import annotations

import logging
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from gateway.config import GatewayConfig
from runtime.config import ConfigError
from runtime.signals import set_from_handler

__all__ = ["stop_handler", "supervise"]

log = logging.getLogger("gateway.edge.server")  # the gateway's own lines, as run_gateway's

# a worker stops within uvicorn's 5 s graceful shutdown plus its Kafka readers' close
_STOP_DEADLINE_S = 15.0
_POLL_S = 0.2


def stop_handler(stopping: threading.Event) -> Callable[[int, FrameType | None], None]:
    """The SIGTERM/SIGINT handler setting `stopping`: through `set_from_handler`, as the main
    thread may be inside `stopping.wait` holding its lock when the signal comes."""

    def stop(signum: int, frame: FrameType | None) -> None:
        set_from_handler(stopping)

    return stop


def supervise(config: GatewayConfig) -> int:
    """Run `config.processes` workers on the configured port until SIGTERM or SIGINT, or
    until one exits; stop them all and answer the parent's exit status (0 after a signal
    when every worker stopped cleanly, else 1)."""
    _refuse_a_taken_port(config)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop_handler(stopping))
    directory = Path(tempfile.mkdtemp(prefix="statefed-gateway-"))  # mode 0700
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(config.processes):
            workers.append(_start_worker(index, config.processes, directory))
        log.info(
            "statefed gateway: %d worker processes (pids %s) share %s",
            config.processes,
            ", ".join(str(w.pid) for w in workers),
            config.url,
        )
        lost = _wait(workers, stopping)
    finally:
        clean = _stop_all(workers)
        shutil.rmtree(directory, ignore_errors=True)
    return 0 if clean and not lost else 1


def _refuse_a_taken_port(config: GatewayConfig) -> None:
    """SO_REUSEPORT would let the workers join another gateway's workers of the same user
    on the port, sharing its traffic: refuse a port something already answers on."""
    host = "127.0.0.1" if config.host in ("0.0.0.0", "") else config.host
    host = "::1" if host == "::" else host
    try:
        with socket.create_connection((host, config.port), timeout=1.0):
            pass
    except OSError:
        return
    raise ConfigError(
        "STATEFED_GATEWAY_PORT",
        f"something already answers on {config.host}:{config.port}: stop it, or choose "
        "another port",
    )


def _start_worker(index: int, count: int, directory: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "gateway.edge.worker", str(index), str(count), str(directory)]
    # same environment, same output: the workers' log lines go where the parent's go
    return subprocess.Popen(command)


def _wait(workers: Sequence[subprocess.Popen[bytes]], stopping: threading.Event) -> bool:
    """Wait for a stop signal (False) or a worker's own exit (True, logged)."""
    while not stopping.wait(_POLL_S):
        for index, worker in enumerate(workers):
            code = worker.poll()
            if code is not None:
                log.error(
                    "statefed gateway: worker %d (pid %d) exited with status %d; stopping "
                    "the others (its log lines above say why)",
                    index,
                    worker.pid,
                    code,
                )
                return True
    return False


def _stop_all(workers: Sequence[subprocess.Popen[bytes]]) -> bool:
    """SIGTERM every worker still running, SIGKILL those not stopped by the deadline;
    True when every worker exited with status 0."""
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + _STOP_DEADLINE_S
    clean = True
    for index, worker in enumerate(workers):
        try:
            code = worker.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.error(
                "statefed gateway: worker %d (pid %d) did not stop: killed", index, worker.pid
            )
            worker.kill()
            code = worker.wait()
        clean = clean and code == 0
    return clean
