from __future__ import annotations

import socket
from pathlib import Path

import pytest

from node.config import NodeConfig
from node.errors import ConfigError


def test_defaults_suit_one_local_node() -> None:
    config = NodeConfig.from_env({})
    node_id = f"{socket.gethostname()}-8101"
    assert config == NodeConfig(
        bootstrap="127.0.0.1:9092",
        node_id=node_id,
        host="127.0.0.1",
        port=8101,
        url="http://127.0.0.1:8101",
        state_dir=Path(f".statefed/state/{node_id}"),
        heartbeat_ms=1000,
        group_id="statefed-nodes",
        store_cache_mb=32,
        retention_sweep_ms=10_000,
        standby_replicas=1,
    )


def test_every_variable_is_read() -> None:
    config = NodeConfig.from_env(
        {
            "STATEFED_BOOTSTRAP": "kafka:9092",
            "STATEFED_NODE_ID": "n1",
            "STATEFED_NODE_HOST": "10.0.0.5",
            "STATEFED_NODE_PORT": "9000",
            "STATEFED_NODE_URL": "http://n1.internal:9000/",
            "STATEFED_STATE_DIR": "/var/lib/statefed",
            "STATEFED_HEARTBEAT_MS": "250",
            "STATEFED_GROUP_ID": "g",
            "STATEFED_STORE_CACHE_MB": "256",
            "STATEFED_RETENTION_SWEEP_MS": "500",
            "STATEFED_STANDBY_REPLICAS": "2",
            "STATEFED_CLUSTER_SECRET_FILE": "/run/secrets/cluster",
            "STATEFED_NODE_AUTH": "cluster",
        }
    )
    assert config.bootstrap == "kafka:9092"
    assert (config.node_id, config.host, config.port) == ("n1", "10.0.0.5", 9000)
    assert config.url == "http://n1.internal:9000"
    assert config.state_dir == Path("/var/lib/statefed")
    assert (config.heartbeat_ms, config.group_id, config.store_cache_mb) == (250, "g", 256)
    assert (config.retention_sweep_ms, config.standby_replicas) == (500, 2)
    assert config.cluster_secret_file == Path("/run/secrets/cluster")
    assert config.auth == "cluster" and config.checks_calls


def test_port_and_id_shape_the_url_and_state_dir() -> None:
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n2", "STATEFED_NODE_PORT": "8102"})
    assert config.url == "http://127.0.0.1:8102"
    assert config.state_dir == Path(".statefed/state/n2")


def test_wildcard_bind_advertises_the_host_name() -> None:
    config = NodeConfig.from_env(
        {"STATEFED_NODE_HOST": "0.0.0.0", "STATEFED_NODE_ID": "n", "STATEFED_NODE_AUTH": "none"}
    )
    assert config.url == f"http://{socket.gethostname()}:8101"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("STATEFED_NODE_PORT", "eighty"),
        ("STATEFED_NODE_PORT", "70000"),
        ("STATEFED_NODE_ID", "no/slashes"),
        ("STATEFED_NODE_URL", "127.0.0.1:8101"),
        ("STATEFED_HEARTBEAT_MS", "0"),
        ("STATEFED_STORE_CACHE_MB", "-1"),
        ("STATEFED_RETENTION_SWEEP_MS", "10"),
        ("STATEFED_STANDBY_REPLICAS", "-1"),
    ],
)
def test_invalid_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^{variable}: ") as raised:
        NodeConfig.from_env({"STATEFED_NODE_ID": "n", variable: value})
    assert raised.value.variable == variable


def test_config_is_frozen() -> None:
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n"})
    with pytest.raises(AttributeError):
        config.port = 1  # type: ignore[misc]
