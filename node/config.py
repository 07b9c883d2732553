"""Configuration of a node process, read from `STATEFED_*` environment variables."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from node.errors import ConfigError
from runtime import shared_settings as shared
from runtime.config import EnvConfig, comma_separated, setting, settings_group
from runtime.hosts import HostPolicy, hosts_problem, is_loopback
from runtime.kafka import KafkaClientConfig, KafkaProperties
from runtime.tls import check_pair

__all__ = ["NodeConfig"]

_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_WILDCARD_HOSTS = {"0.0.0.0", "::", ""}
_AUTH_MODES = ("cluster", "none")


def _without_slash(raw: str) -> str:
    return raw.rstrip("/")


@dataclass(frozen=True)
class NodeConfig(KafkaClientConfig, EnvConfig):
    """Everything a node process needs; `from_env` is the one place that reads it."""

    config_error = ConfigError

    bootstrap: str = shared.bootstrap()
    # librdkafka settings of every Kafka client (runtime.kafka): STATEFED_KAFKA_CONFIG and
    # STATEFED_KAFKA_* variables; `kafka` joins them with the bootstrap servers
    kafka_properties: KafkaProperties = settings_group(KafkaProperties.from_env, KafkaProperties())
    node_id: str = setting(
        "STATEFED_NODE_ID",
        "node-8101",
        doc="unique id in the cluster; it names the state directory, so keep it across restarts",
        shown_default="`<hostname>-<port>`",
    )
    host: str = setting(
        "STATEFED_NODE_HOST",
        "127.0.0.1",
        doc=(
            "address the node serves on; beyond loopback it needs "
            "`STATEFED_CLUSTER_SECRET_FILE` (or `STATEFED_NODE_AUTH=none`)"
        ),
    )
    port: int = setting(
        "STATEFED_NODE_PORT", 8101, low=1, high=65535, doc="port the node serves on"
    )
    url: str = setting(
        "STATEFED_NODE_URL",
        "http://127.0.0.1:8101",
        parse=_without_slash,
        doc="the URL the gateway reaches the node at (`https://` with `STATEFED_NODE_TLS_CERT`)",
        shown_default="`http://<host>:<port>`",
    )
    state_dir: Path = setting(
        "STATEFED_STATE_DIR",
        Path(".statefed/state/node-8101"),
        doc="LevelDB partition stores (`partition-<p>/`)",
        shown_default="`.statefed/state/<node id>`",
    )
    heartbeat_ms: int = setting(
        "STATEFED_HEARTBEAT_MS",
        1000,
        low=50,
        high=60_000,
        doc="membership heartbeat; 3 missed = dead",
    )
    group_id: str = setting(
        "STATEFED_GROUP_ID", "statefed-nodes", doc="consumer group of the nodes"
    )
    store_cache_mb: int = setting(
        "STATEFED_STORE_CACHE_MB",
        32,
        low=1,
        high=65_536,
        doc="LevelDB block cache per partition store",
    )
    retention_sweep_ms: int = setting(
        "STATEFED_RETENTION_SWEEP_MS",
        10_000,
        low=50,
        high=86_400_000,
        doc="how often expired windows are purged from partitions that receive no records",
    )
    standby_replicas: int = setting(
        "STATEFED_STANDBY_REPLICAS",
        1,
        low=0,
        high=16,
        doc=(
            "standby copies of each partition on other live nodes (fewer when "
            "fewer nodes are live; 0 = off)"
        ),
    )
    cluster_secret_file: Path | None = shared.cluster_secret_file()
    auth: str = setting(
        "STATEFED_NODE_AUTH",
        "cluster",
        parse=str.lower,
        choices=_AUTH_MODES,
        doc=(
            "`cluster`: `/graphql` answers only calls signed with the cluster "
            "secret (required beyond loopback); `none`: it answers anyone"
        ),
    )
    allowed_hosts: tuple[str, ...] = setting(
        "STATEFED_NODE_ALLOWED_HOSTS",
        (),
        parse=comma_separated,
        doc=(
            "comma-separated host names callers reach the node by, besides IP addresses, "
            "`localhost`, `*.localhost` and the host of `STATEFED_NODE_URL` (always "
            "answered); a request whose `Host` names another is refused (HTTP 421) while "
            "the node answers without the cluster secret, and with it when this is set; "
            "`*` = any (see [DNS rebinding](security.md#dns-rebinding))"
        ),
        shown_default="empty",
    )
    metrics_token_file: Path | None = shared.metrics_token_file()
    # query limits applied to every caller (runtime.graphql_http.limits); the defaults admit
    # every document the gateway sends (at most 10,000 keys or a top-10,000, a page of 1000)
    max_depth: int = setting(
        "STATEFED_NODE_MAX_DEPTH",
        15,
        low=1,
        high=200,
        doc=(
            "how deep fields nest (`QUERY_TOO_DEEP`; see [Cost before "
            "work](security.md#cost-before-work))"
        ),
    )
    max_aliases: int = setting(
        "STATEFED_NODE_MAX_ALIASES",
        500,
        low=0,
        high=100_000,
        doc="aliased and repeated fields, per fragment spread (`TOO_MANY_ALIASES`)",
    )
    max_cost: int = setting(
        "STATEFED_NODE_MAX_COST",
        100_000,
        low=1,
        high=10**12,
        doc="`first`, `limit` and key lists multiplied down the tree (`QUERY_TOO_COSTLY`)",
    )
    max_tokens: int = setting(
        "STATEFED_NODE_MAX_TOKENS",
        5000,
        low=100,
        high=1_000_000,
        doc="tokens of one GraphQL document (`GRAPHQL_PARSE_FAILED`)",
    )
    normalize_literals: bool = setting(
        "STATEFED_NODE_NORMALIZE_LITERALS",
        True,
        doc=(
            "documents that differ only in literal argument values share one plan"
            " (see [Literals in queries](querying.md#literals-in-queries))"
        ),
    )
    fast_lookups: bool = setting(
        "STATEFED_NODE_FAST_LOOKUPS",
        True,
        doc=(
            "the gateway's batch lookups are answered straight from the stores, "
            "without executing GraphQL (see [Fast lookups on the "
            "node](querying.md#fast-lookups-on-the-node))"
        ),
    )
    # of a POST body: the gateway's batch of 1000 keys of up to 1 KiB each fits
    max_body_bytes: int = setting(
        "STATEFED_NODE_MAX_BODY_BYTES",
        8 << 20,
        low=1024,
        high=1 << 30,
        doc="a POST body (`PAYLOAD_TOO_LARGE`, HTTP 413)",
    )
    # the gateway never introspects nodes
    introspection: bool = setting(
        "STATEFED_NODE_INTROSPECTION",
        False,
        doc=(
            "`__schema` and `__type` for callers of the node "
            "(`INTROSPECTION_DISABLED`; `__typename` works)"
        ),
    )
    feed_buffer_mb: int = setting(
        "STATEFED_NODE_FEED_BUFFER_MB",
        16,
        low=1,
        high=65_536,
        doc=(
            "recent changes the node keeps in memory for the change feed, over "
            "all its partitions; a follow from an older offset is replayed from "
            "the changelog in Kafka (see [The change "
            "feed](operations.md#the-change-feed))"
        ),
    )
    # HTTPS: a PEM certificate (chain) and its key, both or neither; the URL is then https
    tls_cert: Path | None = setting(
        "STATEFED_NODE_TLS_CERT",
        None,
        parse=Path,
        doc=(
            "the node's PEM certificate (chain): it serves HTTPS, its advertised "
            "URL is then `https://<host>:<port>` and an explicit `http://` URL is"
            " refused (see [TLS](security.md#tls))"
        ),
        shown_default="unset (HTTP)",
    )
    tls_key: Path | None = setting(
        "STATEFED_NODE_TLS_KEY",
        None,
        parse=Path,
        doc="the key of `STATEFED_NODE_TLS_CERT`",
        shown_default="unset (HTTP)",
    )
    test_delay_ms: int = setting(
        "STATEFED_NODE_TEST_DELAY_MS",
        0,
        low=0,
        high=600_000,
        doc=(
            "**for tests only**: holds back every `/graphql` answer this long, to"
            " make a slow node (the gateway's hedged reads are tested with it); "
            "never set it in production"
        ),
    )
    # logs (runtime.logs): text or json lines, and the lowest level written
    log_format: str = shared.log_format()
    log_level: str = shared.log_level()

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _NODE_ID.match(self.node_id):
            raise ConfigError(
                "STATEFED_NODE_ID",
                f"{self.node_id!r} must be 1-128 letters, digits, '.', '_' or '-'",
            )
        if not self.url.startswith(("http://", "https://")) or self.url.endswith("/"):
            raise ConfigError(
                "STATEFED_NODE_URL",
                f"must be an http(s) base URL without a trailing '/', got {self.url!r}",
            )
        problem = hosts_problem(self.allowed_hosts)
        if problem is not None:
            raise ConfigError("STATEFED_NODE_ALLOWED_HOSTS", problem)
        check_pair(
            self.tls_cert,
            self.tls_key,
            ("STATEFED_NODE_TLS_CERT", "STATEFED_NODE_TLS_KEY"),
            ConfigError,
        )
        if self.tls_cert is not None and not self.url.startswith("https://"):
            raise ConfigError(
                "STATEFED_NODE_URL",
                f"must be an https URL when STATEFED_NODE_TLS_CERT is set, got {self.url!r}",
            )
        if (
            self.auth == "cluster"
            and self.cluster_secret_file is None
            and not is_loopback(self.host)
        ):
            raise ConfigError(
                "STATEFED_CLUSTER_SECRET_FILE",
                f"is not set, and the node serves on {self.host!r}, beyond loopback: anyone who "
                "can reach it could read every view. Give it the cluster's secret file (the "
                "gateway's), or set STATEFED_NODE_AUTH=none to let it answer anyone",
            )

    @property
    def checks_calls(self) -> bool:
        """Whether /graphql answers only calls signed with the cluster secret."""
        return self.auth == "cluster" and self.cluster_secret_file is not None

    def host_policy(self) -> HostPolicy:
        """The `Host` values the node answers (runtime.hosts): checked while it answers
        without the cluster secret, and with it when STATEFED_NODE_ALLOWED_HOSTS lists names;
        the host of its URL, which the gateway and the other nodes call it by, always."""
        return HostPolicy(
            self.allowed_hosts,
            "STATEFED_NODE_ALLOWED_HOSTS",
            part="node",
            required=not self.checks_calls,
            also=(urlsplit(self.url).hostname or "",),
        )

    @classmethod
    def env_values(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        """The set variables, and the defaults that derive from others: the node id and
        the state directory from the port and id, the URL from the host, port and TLS."""
        values = super().env_values(environ)
        host = values.setdefault("host", "127.0.0.1")
        port = values.setdefault("port", 8101)
        # the default id must be stable across restarts (it names the state directory)
        node_id = values.setdefault("node_id", f"{socket.gethostname()}-{port}")
        # a wildcard bind address is no address others can call: advertise the host name
        advertised_host = socket.gethostname() if host in _WILDCARD_HOSTS else host
        if ":" in advertised_host:
            advertised_host = f"[{advertised_host}]"
        scheme = "https" if values.get("tls_cert") is not None else "http"
        values.setdefault("url", f"{scheme}://{advertised_host}:{port}")
        values.setdefault("state_dir", Path(f".statefed/state/{node_id}"))
        return values
