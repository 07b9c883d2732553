"""Beyond loopback the gateway, as a node, does not start without the cluster secret
(docs/security.md, Trust between the parts): without it the gateway routes reads to any node
announced on the membership topic, signed or not. Its opt-out, STATEFED_GATEWAY_CLUSTER_AUTH=
none, mirrors the node's STATEFED_NODE_AUTH=none; on loopback (`make demo`) nothing changes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

import pytest

from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from node.config import NodeConfig
from runtime.config import ConfigError
from tests.security.startup import start_gateway

ROOT = Path(__file__).parents[2]
SECRET = "STATEFED_CLUSTER_SECRET_FILE"
OPT_OUT = "STATEFED_GATEWAY_CLUSTER_AUTH"
# callers' authentication asked for, so only the cluster secret is missing
ANONYMOUS = {"STATEFED_GATEWAY_AUTH": "anonymous"}
BEYOND = ["0.0.0.0", "::", "10.1.2.3", "gateway.example"]


def refused_variable(part: type[GatewayConfig | NodeConfig], environ: Mapping[str, str]) -> str:
    """The variable the configuration of `part` refuses `environ` for ("" when it starts)."""
    try:
        part.from_env(environ)
    except ConfigError as exc:
        return exc.variable
    return ""


@pytest.mark.parametrize("host", BEYOND)
def test_a_gateway_beyond_loopback_needs_the_cluster_secret(host: str) -> None:
    environ = {**ANONYMOUS, "STATEFED_GATEWAY_HOST": host}
    with pytest.raises(ConfigError) as refused:
        GatewayConfig.from_env(environ)
    assert refused.value.variable == SECRET
    message = str(refused.value)
    assert "\n" not in message and repr(host) in message
    assert "head -c 48 /dev/urandom | base64 > cluster.secret" in message  # how to make one
    assert f"{OPT_OUT}=none" in message
    given = GatewayConfig.from_env({**environ, SECRET: "/run/secrets/cluster"})
    assert given.cluster_secret_file == Path("/run/secrets/cluster")
    accepted = GatewayConfig.from_env({**environ, OPT_OUT: "none"})
    assert (accepted.cluster_auth, accepted.cluster_secret_file) == ("none", None)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_on_loopback_the_gateway_runs_without_the_secret(host: str) -> None:
    config = GatewayConfig.from_env({"STATEFED_GATEWAY_HOST": host})  # as `make demo` runs it
    assert (config.cluster_auth, config.cluster_secret_file) == ("cluster", None)


@pytest.mark.parametrize("opt_out", [False, True])
@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "127.0.0.1", "::1", "localhost"])
def test_the_gateway_and_a_node_start_in_the_same_places(host: str, opt_out: bool) -> None:
    node = {"STATEFED_NODE_HOST": host} | ({"STATEFED_NODE_AUTH": "none"} if opt_out else {})
    gateway = {**ANONYMOUS, "STATEFED_GATEWAY_HOST": host} | ({OPT_OUT: "none"} if opt_out else {})
    expected = SECRET if host in ("0.0.0.0", "10.1.2.3") and not opt_out else ""
    assert refused_variable(NodeConfig, node) == expected
    assert refused_variable(GatewayConfig, gateway) == expected


def test_the_gateway_process_refuses_to_start_beyond_loopback_without_the_secret() -> None:
    done = start_gateway({**ANONYMOUS, "STATEFED_GATEWAY_HOST": "0.0.0.0"})
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"statefed gateway: {SECRET}: is not set")
    assert "/dev/urandom" in line and f"{OPT_OUT}=none" in line


def test_a_gateway_told_to_accept_unsigned_members_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.edge.app")
    config = GatewayConfig.from_env(
        {**ANONYMOUS, "STATEFED_GATEWAY_HOST": "10.1.2.3", OPT_OUT: "none"}
    )

    async def start_and_stop() -> None:
        app = GatewayApp(config, feed=RoutingFeed())
        await app.startup()
        await app.shutdown()

    asyncio.run(start_and_stop())
    (warning,) = [r for r in caplog.records if SECRET in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert f"{OPT_OUT}=none" in warning.getMessage() and "10.1.2.3" in warning.getMessage()
