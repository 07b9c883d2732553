"""The gateway's configuration, read from `STATEFED_*` environment variables in one place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gateway.cors import origins_problem
from runtime.config import EnvConfig, setting
from runtime.tls import check_ca, check_pair

__all__ = ["GatewayConfig"]

_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def _comma_separated(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class GatewayConfig(EnvConfig):
    """Everything `run_gateway` needs; the defaults suit the local demo."""

    bootstrap: str = setting("STATEFED_BOOTSTRAP", "127.0.0.1:9092")
    host: str = setting("STATEFED_GATEWAY_HOST", "127.0.0.1")
    port: int = setting("STATEFED_GATEWAY_PORT", 8100, low=1, high=65535)
    # deadline of one client request, retries included
    timeout_ms: int = setting("STATEFED_GATEWAY_TIMEOUT_MS", 5000, low=1, high=600_000)
    # extra rounds for partitions that failed (NOT_OWNER, refused, unassigned): 5 rounds of
    # doubling backoff span ~1.5 s, about what promoting a standby to active takes
    retries: int = setting("STATEFED_GATEWAY_RETRIES", 5, low=0, high=100)
    # wait before the first retry; doubles each round
    backoff_ms: int = setting("STATEFED_GATEWAY_BACKOFF_MS", 50, low=0, high=60_000)
    # a partition whose active copy cannot answer is read from a standby at most this many
    # records behind; 0 = active copies only
    max_lag: int = setting("STATEFED_GATEWAY_MAX_LAG", 1000, low=0, high=1 << 62)
    # a node answers a local top-N of at most 10000
    max_top_limit: int = setting("STATEFED_MAX_TOP_LIMIT", 1000, low=1, high=10_000)
    max_lookup_keys: int = setting("STATEFED_MAX_LOOKUP_KEYS", 1000, low=1, high=1_000_000)
    # representations of one `_entities` call: a federation router batches as many as its
    # plan holds, each a point lookup (priced as such by gateway.limits)
    max_entity_representations: int = setting(
        "STATEFED_GATEWAY_MAX_ENTITIES", 1000, low=1, high=1_000_000
    )
    # how far back in statefed.members reading starts
    members_lookback_ms: int = setting(
        "STATEFED_GATEWAY_MEMBERS_LOOKBACK_MS", 10_000, low=1, high=86_400_000
    )
    # how many records of statefed.pipeline are read back
    status_tail_records: int = setting(
        "STATEFED_GATEWAY_STATUS_TAIL_RECORDS", 10_000, low=1, high=100_000_000
    )
    # per node, opened as needed and kept alive
    upstream_connections: int = setting(
        "STATEFED_GATEWAY_UPSTREAM_CONNECTIONS", 64, low=1, high=10_000
    )
    log_level: str = setting(
        "STATEFED_GATEWAY_LOG_LEVEL", "info", parse=str.lower, choices=_LOG_LEVELS
    )
    # query limits (gateway.limits); the standard introspection query, GraphiQL's, is 15
    # deep, and gateway.limits stops walking deeper than 200 levels
    max_depth: int = setting("STATEFED_GATEWAY_MAX_DEPTH", 15, low=1, high=200)
    max_aliases: int = setting("STATEFED_GATEWAY_MAX_ALIASES", 30, low=0, high=100_000)
    max_root_fields: int = setting("STATEFED_GATEWAY_MAX_ROOT_FIELDS", 20, low=1, high=10_000)
    # P x limit per top-N, keys per lookup, `first` per history page
    max_cost: int = setting("STATEFED_GATEWAY_MAX_COST", 50_000, low=1, high=10**12)
    # UTF-8 bytes of one key
    max_key_bytes: int = setting("STATEFED_GATEWAY_MAX_KEY_BYTES", 1024, low=1, high=1 << 20)
    # of a POST body; of a GET query string, whose request target (path and query string)
    # must also fit the HTTP parser's 65,535 bytes: longer documents go by POST
    max_body_bytes: int = setting(
        "STATEFED_GATEWAY_MAX_BODY_BYTES", 1 << 20, low=1024, high=1 << 30
    )
    # __schema and __type; __typename always works
    introspection: bool = setting("STATEFED_GATEWAY_INTROSPECTION", True)
    # the produce mutation (writes to the catalogue's input topics): off unless asked for
    produce: bool = setting("STATEFED_GATEWAY_PRODUCE", False)

    # browser origins whose pages may read answers (gateway.cors): exact `scheme://host[:port]`,
    # comma-separated; empty = none (no CORS headers); `*` alone = any, without credentials
    cors_origins: tuple[str, ...] = setting(
        "STATEFED_GATEWAY_CORS_ORIGINS", (), parse=_comma_separated
    )
    # how far past the gateway's clock a produced eventTime may be: a future event moves the
    # pipeline's watermark, and every real event of a windowed view would then be late
    produce_max_ahead_ms: int = setting(
        "STATEFED_GATEWAY_PRODUCE_MAX_AHEAD_MS", 300_000, low=0, high=86_400_000
    )
    # produced records per second per principal (a token bucket holding as many)
    produce_rate: int = setting("STATEFED_GATEWAY_PRODUCE_RATE", 100, low=1, high=1_000_000)
    # the secret shared with every node (runtime.trust): node calls are signed with it, and
    # only nodes whose membership records it verifies are routed to; None = neither
    cluster_secret_file: Path | None = setting("STATEFED_CLUSTER_SECRET_FILE", None, parse=Path)
    # tokens of one GraphQL document, counted while parsing, before validation and limits;
    # GraphiQL's introspection query has ~190
    max_tokens: int = setting("STATEFED_GATEWAY_MAX_TOKENS", 5000, low=100, high=1_000_000)
    # HTTPS: a PEM certificate (chain) and its key, both or neither
    tls_cert: Path | None = setting("STATEFED_GATEWAY_TLS_CERT", None, parse=Path)
    tls_key: Path | None = setting("STATEFED_GATEWAY_TLS_KEY", None, parse=Path)
    # the CA (PEM) https node URLs are verified against; unset: the system's trust store
    node_ca: Path | None = setting("STATEFED_GATEWAY_NODE_CA", None, parse=Path)

    def __post_init__(self) -> None:
        super().__post_init__()
        problem = origins_problem(self.cors_origins)
        if problem is not None:
            raise self.config_error("STATEFED_GATEWAY_CORS_ORIGINS", problem)
        env = GatewayConfig.ENV
        check_pair(self.tls_cert, self.tls_key, (env["tls_cert"], env["tls_key"]))
        check_ca(self.node_ca, env["node_ca"])

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0

    @property
    def backoff_s(self) -> float:
        return self.backoff_ms / 1000.0

    @property
    def url(self) -> str:
        scheme = "http" if self.tls_cert is None else "https"
        return f"{scheme}://{self.host}:{self.port}"
