"""`python -m gateway`: run the gateway configured from the environment."""

import os

from gateway.config import GatewayConfig
from gateway.server import run_gateway

run_gateway(GatewayConfig.from_env(os.environ))
