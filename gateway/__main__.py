"""`python -m gateway`: run the gateway configured from the environment."""

import os

from gateway.config import GatewayConfig
from gateway.edge.server import run_gateway
from runtime.config import ConfigError

try:
    config = GatewayConfig.from_env(os.environ)
except ConfigError as exc:  # e.g. a non-loopback address without STATEFED_GATEWAY_AUTH
    raise SystemExit(f"statefed gateway: {exc}") from None
run_gateway(config)
