"""`python -m gateway`: run the gateway configured from the environment."""

import os

from gateway.config import GatewayConfig
from gateway.edge.server import run_gateway
from runtime.config import ConfigError

try:
    # e.g. a non-loopback address without STATEFED_GATEWAY_AUTH, or worker processes on a
    # port something already answers on
    run_gateway(GatewayConfig.from_env(os.environ))
except ConfigError as exc:
    raise SystemExit(f"statefed gateway: {exc}") from None
