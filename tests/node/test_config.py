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


def test_every_variable_is_read(tmp_path: Path) -> None:
    pem = tmp_path / "node.pem"
    pem.write_text("(not read by the config)")
    config = NodeConfig.from_env(
        {
            "STATEFED_BOOTSTRAP": "kafka:9092",
            "STATEFED_NODE_ID": "n1",
            "STATEFED_NODE_HOST": "10.0.0.5",
            "STATEFED_NODE_PORT": "9000",
            "STATEFED_NODE_URL": "https://n1.internal:9000/",
            "STATEFED_STATE_DIR": "/var/lib/statefed",
            "STATEFED_HEARTBEAT_MS": "250",
            "STATEFED_GROUP_ID": "g",
            "STATEFED_STORE_CACHE_MB": "256",
            "STATEFED_RETENTION_SWEEP_MS": "500",
            "STATEFED_STANDBY_REPLICAS": "2",
            "STATEFED_CLUSTER_SECRET_FILE": "/run/secrets/cluster",
            "STATEFED_NODE_AUTH": "cluster",
            "STATEFED_NODE_ALLOWED_HOSTS": "node-1.svc,statefed-node-1",
            "STATEFED_NODE_MAX_DEPTH": "9",
            "STATEFED_NODE_MAX_ALIASES": "7",
            "STATEFED_NODE_MAX_COST": "1234",
            "STATEFED_NODE_MAX_TOKENS": "800",
            "STATEFED_NODE_NORMALIZE_LITERALS": "false",
            "STATEFED_NODE_FAST_LOOKUPS": "false",
            "STATEFED_NODE_MAX_BODY_BYTES": "4096",
            "STATEFED_NODE_INTROSPECTION": "yes",
            "STATEFED_NODE_TLS_CERT": str(pem),
            "STATEFED_NODE_TLS_KEY": str(pem),
            "STATEFED_NODE_TEST_DELAY_MS": "40",
            "STATEFED_NODE_FEED_BUFFER_MB": "64",
            "STATEFED_METRICS_TOKEN_FILE": "/run/secrets/metrics",
        }
    )
    assert config.bootstrap == "kafka:9092"
    assert (config.node_id, config.host, config.port) == ("n1", "10.0.0.5", 9000)
    assert config.url == "https://n1.internal:9000"
    assert config.allowed_hosts == ("node-1.svc", "statefed-node-1")
    assert config.state_dir == Path("/var/lib/statefed")
    assert (config.max_depth, config.max_aliases, config.max_cost) == (9, 7, 1234)
    assert (config.max_tokens, config.max_body_bytes, config.introspection) == (800, 4096, True)
    assert config.normalize_literals is False
    assert config.fast_lookups is False
    assert config.tls_cert == config.tls_key == pem
    assert (config.heartbeat_ms, config.group_id, config.store_cache_mb) == (250, "g", 256)
    assert (config.retention_sweep_ms, config.standby_replicas) == (500, 2)
    assert config.cluster_secret_file == Path("/run/secrets/cluster")
    assert config.auth == "cluster" and config.checks_calls
    assert config.test_delay_ms == 40
    assert config.feed_buffer_mb == 64
    assert config.metrics_token_file == Path("/run/secrets/metrics")


def test_tls_makes_the_derived_url_https_and_refuses_an_http_one(tmp_path: Path) -> None:
    pem = tmp_path / "node.pem"
    pem.write_text("(not read by the config)")
    tls = {"STATEFED_NODE_TLS_CERT": str(pem), "STATEFED_NODE_TLS_KEY": str(pem)}
    assert NodeConfig.from_env({**tls, "STATEFED_NODE_PORT": "8102"}).url == (
        "https://127.0.0.1:8102"
    )
    with pytest.raises(ConfigError, match=r"^STATEFED_NODE_URL: must be an https URL"):
        NodeConfig.from_env({**tls, "STATEFED_NODE_URL": "http://n1:8101"})


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"STATEFED_NODE_TLS_CERT": "CERT"}, "^STATEFED_NODE_TLS_KEY: must be set too"),
        ({"STATEFED_NODE_TLS_KEY": "CERT"}, "^STATEFED_NODE_TLS_CERT: must be set too"),
        (
            {"STATEFED_NODE_TLS_CERT": "CERT", "STATEFED_NODE_TLS_KEY": "missing.pem"},
            "^STATEFED_NODE_TLS_KEY: no such file",
        ),
    ],
)
def test_tls_takes_a_certificate_and_a_key_that_exist(
    tmp_path: Path, environ: dict[str, str], message: str
) -> None:
    pem = tmp_path / "node.pem"
    pem.write_text("(not read by the config)")
    values = {k: str(pem) if v == "CERT" else str(tmp_path / v) for k, v in environ.items()}
    with pytest.raises(ConfigError, match=message):
        NodeConfig.from_env(values)


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
        ("STATEFED_NODE_FEED_BUFFER_MB", "0"),
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
