"""`python -m gateway.edge.worker INDEX COUNT DIR`: one of the gateway's worker processes,
started by `gateway.edge.supervisor` (not by hand) and configured from the environment as
its parent was. A worker whose parent is gone (SIGKILLed: it could not stop its workers)
stops itself, so no worker outlives its gateway, and the last of them to stop removes the
workers' directory, which the parent would have."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.edge.server import run_worker
from runtime.config import ConfigError

log = logging.getLogger("gateway.edge.server")
_PARENT_POLL_S = 0.5


def main(argv: Sequence[str]) -> int:
    index, count, directory = int(argv[0]), int(argv[1]), Path(argv[2])
    try:
        config = GatewayConfig.from_env(os.environ)
    except ConfigError as exc:
        raise SystemExit(f"statefed gateway: {exc}") from None
    parent = os.getppid()
    threading.Thread(target=_stop_without, args=(parent,), daemon=True).start()
    run_worker(config, index, count, directory)  # removes this worker's socket at its end
    if os.getppid() != parent:
        with contextlib.suppress(OSError):  # not empty: another worker is still stopping
            directory.rmdir()
    return 0


def _stop_without(parent: int) -> None:
    """SIGTERM this worker (a clean stop) once `parent` is no longer its parent."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    log.warning("statefed gateway: the supervisor (pid %d) is gone; this worker stops", parent)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
