"""`python -m gateway.edge.worker INDEX COUNT DIR`: one of the gateway's worker processes,
started by `gateway.edge.supervisor` (not by hand) and configured from the environment as
its parent was."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.edge.server import run_worker
from runtime.config import ConfigError


def main(argv: Sequence[str]) -> int:
    index, count, directory = int(argv[0]), int(argv[1]), Path(argv[2])
    try:
        config = GatewayConfig.from_env(os.environ)
    except ConfigError as exc:
        raise SystemExit(f"statefed gateway: {exc}") from None
    run_worker(config, index, count, directory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
