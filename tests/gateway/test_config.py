"""GatewayConfig.from_env: defaults, parsing, and errors that name the variable."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from runtime.config import ConfigError


def test_defaults() -> None:
    config = GatewayConfig.from_env({})
    assert config == GatewayConfig()
    assert (config.bootstrap, config.host, config.port) == ("127.0.0.1:9092", "127.0.0.1", 8100)
    assert config.max_top_limit == 1000
    assert config.timeout_s == 5.0
    assert (config.max_depth, config.max_aliases, config.max_root_fields) == (15, 30, 20)
    assert (config.max_cost, config.max_key_bytes, config.max_body_bytes) == (50_000, 1024, 1 << 20)
    assert config.introspection is True
    assert config.produce is False and config.max_lag == 1000
    assert (config.hedge, config.hedge_min_ms, config.hedge_max_ms) == (True, 20, 500)
    assert (config.suspect_calls, config.suspect_ms) == (3, 1000)
    assert (config.apq, config.apq_mb, config.trusted_documents) == (True, 16, None)
    assert config.metrics_token_file is None  # /metrics open, as /health is
    assert config.cors_origins == ()
    assert (config.produce_max_ahead_ms, config.produce_rate) == (300_000, 100)
    assert config.cluster_auth == "cluster"  # the secret is required beyond loopback
    assert config.max_operations_per_connection == 100


def test_every_variable_is_read(tmp_path: Path) -> None:
    pem = tmp_path / "file.pem"
    pem.write_text("(not read by the config)")
    environ = {
        "STATEFED_BOOTSTRAP": "kafka:9092",
        "STATEFED_GATEWAY_HOST": "0.0.0.0",
        "STATEFED_GATEWAY_PORT": "9000",
        "STATEFED_GATEWAY_PROCESSES": "3",
        "STATEFED_GATEWAY_TIMEOUT_MS": "750",
        "STATEFED_GATEWAY_RETRIES": "0",
        "STATEFED_GATEWAY_BACKOFF_MS": "20",
        "STATEFED_GATEWAY_MAX_LAG": "5",
        "STATEFED_GATEWAY_HEDGE": "no",
        "STATEFED_GATEWAY_HEDGE_MIN_MS": "7",
        "STATEFED_GATEWAY_HEDGE_MAX_MS": "70",
        "STATEFED_GATEWAY_SUSPECT_CALLS": "4",
        "STATEFED_GATEWAY_SUSPECT_MS": "2500",
        "STATEFED_MAX_TOP_LIMIT": "50",
        "STATEFED_MAX_LOOKUP_KEYS": "10",
        "STATEFED_MAX_SCAN_PAGE": "30",
        "STATEFED_GATEWAY_MAX_ENTITIES": "20",
        "STATEFED_GATEWAY_MEMBERS_LOOKBACK_MS": "30000",
        "STATEFED_GATEWAY_STATUS_TAIL_RECORDS": "500",
        "STATEFED_GATEWAY_UPSTREAM_CONNECTIONS": "8",
        "STATEFED_GATEWAY_LOG_LEVEL": "WARNING",
        "STATEFED_LOG_LEVEL": "debug",
        "STATEFED_LOG_FORMAT": "JSON",
        "STATEFED_GATEWAY_MAX_DEPTH": "8",
        "STATEFED_GATEWAY_MAX_ALIASES": "0",
        "STATEFED_GATEWAY_MAX_ROOT_FIELDS": "5",
        "STATEFED_GATEWAY_MAX_COST": "123456",
        "STATEFED_GATEWAY_MAX_KEY_BYTES": "64",
        "STATEFED_GATEWAY_MAX_BODY_BYTES": "65536",
        "STATEFED_GATEWAY_INTROSPECTION": "Off",
        "STATEFED_GATEWAY_PRODUCE": "yes",
        "STATEFED_GATEWAY_CORS_ORIGINS": "https://app.example, http://127.0.0.1:5173",
        "STATEFED_GATEWAY_ALLOWED_HOSTS": "gateway, statefed.example",
        "STATEFED_GATEWAY_PRODUCE_MAX_AHEAD_MS": "1000",
        "STATEFED_GATEWAY_PRODUCE_RATE": "7",
        "STATEFED_CLUSTER_SECRET_FILE": "/run/secrets/cluster",
        "STATEFED_GATEWAY_CLUSTER_AUTH": "None",
        "STATEFED_GATEWAY_MAX_TOKENS": "700",
        "STATEFED_GATEWAY_NORMALIZE_LITERALS": "off",
        "STATEFED_GATEWAY_TLS_CERT": str(pem),
        "STATEFED_GATEWAY_TLS_KEY": str(pem),
        "STATEFED_GATEWAY_NODE_CA": str(pem),
        "STATEFED_GATEWAY_AUTH": "JWT",
        "STATEFED_GATEWAY_JWKS": "https://issuer.example/jwks.json",
        "STATEFED_GATEWAY_JWT_ISSUER": "https://issuer.example/",
        "STATEFED_GATEWAY_JWT_AUDIENCE": "statefed",
        "STATEFED_GATEWAY_JWT_LEEWAY_S": "5",
        "STATEFED_GATEWAY_PRODUCE_SCOPE": "write",
        "STATEFED_GATEWAY_OPERATOR_SCOPE": "ops",
        "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS": "9",
        "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS_PER_CONNECTION": "3",
        "STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION": "7",
        "STATEFED_GATEWAY_LIVE_INIT_TIMEOUT_MS": "250",
        "STATEFED_GATEWAY_LIVE_SEND_BUFFER": "16",
        "STATEFED_GATEWAY_SUBSCRIPTION_QUEUE": "9",
        "STATEFED_GATEWAY_SUBSCRIPTION_MAX_WAIT_MS": "40",
        "STATEFED_GATEWAY_CACHE": "false",
        "STATEFED_GATEWAY_CACHE_MB": "12",
        "STATEFED_GATEWAY_CACHE_ADMIT_AFTER": "5",
        "STATEFED_GATEWAY_CACHE_WHOLE_VIEWS": "word_counts, last_booking",
        "STATEFED_GATEWAY_APQ": "off",
        "STATEFED_GATEWAY_APQ_MB": "3",
        "STATEFED_GATEWAY_TRUSTED_DOCUMENTS": str(pem),
        "STATEFED_METRICS_TOKEN_FILE": "/run/secrets/metrics",
    }
    config = GatewayConfig.from_env(environ)
    # the secret file is the JWKS's alternative: read in a configuration of its own
    secret = "STATEFED_GATEWAY_JWT_SECRET_FILE"
    assert set(GatewayConfig.ENV.values()) == set(environ) | {secret}
    without_jwks = {k: v for k, v in environ.items() if k != "STATEFED_GATEWAY_JWKS"}
    assert GatewayConfig.from_env({**without_jwks, secret: "/run/secret"}).jwt_secret_file == (
        Path("/run/secret")
    )
    # the Kafka client settings are a family of variables (STATEFED_KAFKA_*, runtime.kafka)
    kafka = {"kafka_properties"}
    assert {f.name for f in dataclasses.fields(GatewayConfig)} == set(GatewayConfig.ENV) | kafka
    assert config.bootstrap == "kafka:9092" and config.port == 9000 and config.processes == 3
    assert config.timeout_ms == 750 and config.retries == 0 and config.log_level == "warning"
    assert config.log_format == "json"  # and the gateway's own level wins over every part's
    assert config.url == "https://0.0.0.0:9000"
    assert config.max_tokens == 700 and config.normalize_literals is False
    assert config.tls_cert == config.tls_key == config.node_ca == pem
    assert config.status_tail_records == 500
    assert (config.subscription_queue, config.subscription_max_wait_ms) == (9, 40)
    assert config.max_scan_page == 30
    assert config.metrics_token_file == Path("/run/secrets/metrics")
    assert config.max_lag == 5
    assert (config.cache, config.cache_mb, config.cache_admit_after) == (False, 12, 5)
    assert config.cache_whole_views == ("word_counts", "last_booking")
    assert (config.hedge, config.hedge_min_ms, config.hedge_max_ms) == (False, 7, 70)
    assert (config.suspect_calls, config.suspect_ms) == (4, 2500)
    assert (config.max_lookup_keys, config.max_entity_representations) == (10, 20)
    assert (config.max_depth, config.max_aliases, config.max_root_fields) == (8, 0, 5)
    assert (config.max_cost, config.max_key_bytes, config.max_body_bytes) == (123456, 64, 65536)
    assert config.introspection is False and config.produce is True
    assert config.cors_origins == ("https://app.example", "http://127.0.0.1:5173")
    assert config.allowed_hosts == ("gateway", "statefed.example")
    assert (config.produce_max_ahead_ms, config.produce_rate) == (1000, 7)
    assert config.cluster_secret_file == Path("/run/secrets/cluster")
    assert config.cluster_auth == "none"
    assert config.authenticates and config.jwks == "https://issuer.example/jwks.json"
    assert (config.jwt_issuer, config.jwt_audience, config.jwt_leeway_s) == (
        "https://issuer.example/",
        "statefed",
        5,
    )
    assert (config.produce_scope, config.operator_scope) == ("write", "ops")
    assert (config.max_subscriptions, config.max_subscriptions_per_connection) == (9, 3)
    assert config.max_operations_per_connection == 7
    assert (config.live_init_timeout_ms, config.live_send_buffer) == (250, 16)
    assert config.subscription_queue == 9
    assert (config.apq, config.apq_mb, config.trusted_documents) == (False, 3, pem)


@pytest.mark.parametrize(
    ("raw", "value"), [("true", True), ("1", True), (" YES ", True), ("false", False), ("0", False)]
)
def test_introspection_flag(raw: str, value: bool) -> None:
    config = GatewayConfig.from_env({"STATEFED_GATEWAY_INTROSPECTION": raw})
    assert config.introspection is value


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("STATEFED_GATEWAY_PORT", "eighty"),
        ("STATEFED_GATEWAY_PORT", "0"),
        ("STATEFED_GATEWAY_PORT", "70000"),
        ("STATEFED_GATEWAY_TIMEOUT_MS", "0"),
        ("STATEFED_GATEWAY_RETRIES", "-1"),
        ("STATEFED_MAX_TOP_LIMIT", "10001"),
        ("STATEFED_MAX_SCAN_PAGE", "10001"),
        ("STATEFED_GATEWAY_UPSTREAM_CONNECTIONS", "0"),
        ("STATEFED_GATEWAY_STATUS_TAIL_RECORDS", "0"),
        ("STATEFED_GATEWAY_HOST", " "),
        ("STATEFED_BOOTSTRAP", "  "),
        ("STATEFED_GATEWAY_LOG_LEVEL", "loud"),
        ("STATEFED_GATEWAY_MAX_DEPTH", "0"),
        ("STATEFED_GATEWAY_MAX_DEPTH", "201"),
        ("STATEFED_GATEWAY_MAX_ALIASES", "-1"),
        ("STATEFED_GATEWAY_MAX_ROOT_FIELDS", "0"),
        ("STATEFED_GATEWAY_MAX_COST", "0"),
        ("STATEFED_GATEWAY_MAX_KEY_BYTES", "0"),
        ("STATEFED_GATEWAY_MAX_BODY_BYTES", "100"),
        ("STATEFED_GATEWAY_INTROSPECTION", "maybe"),
        ("STATEFED_GATEWAY_AUTH", "basic"),
        ("STATEFED_GATEWAY_CLUSTER_AUTH", "open"),
        ("STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION", "0"),
        ("STATEFED_GATEWAY_JWT_LEEWAY_S", "-1"),
        ("STATEFED_GATEWAY_APQ_MB", "0"),
        ("STATEFED_GATEWAY_TRUSTED_DOCUMENTS", "/no/such/manifest.json"),
    ],
)
def test_invalid_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=variable):
        GatewayConfig.from_env({variable: value})


def test_every_parts_log_level_is_the_gateways_unless_its_own_is_set() -> None:
    assert GatewayConfig.from_env({"STATEFED_LOG_LEVEL": "debug"}).log_level == "debug"
    both = {"STATEFED_LOG_LEVEL": "debug", "STATEFED_GATEWAY_LOG_LEVEL": "error"}
    assert GatewayConfig.from_env(both).log_level == "error"
    assert GatewayConfig.from_env({}).log_level == "info"


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        GatewayConfig().port = 1  # type: ignore[misc]


def test_the_hedge_delay_bounds_must_be_in_order() -> None:
    environ = {"STATEFED_GATEWAY_HEDGE_MIN_MS": "300", "STATEFED_GATEWAY_HEDGE_MAX_MS": "200"}
    with pytest.raises(ConfigError, match=r"^STATEFED_GATEWAY_HEDGE_MIN_MS: must be at most"):
        GatewayConfig.from_env(environ)
