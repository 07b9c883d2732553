"""The gateway's configuration, read from `STATEFED_*` environment variables in one place."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.cors import origins_problem
from runtime.config import ConfigError, EnvConfig, setting, settings_group
from runtime.kafka import KafkaClientConfig, KafkaProperties
from runtime.logs import LOG_FORMATS, LOG_LEVELS
from runtime.tls import check_ca, check_pair

__all__ = ["AUTH_MODES", "GatewayConfig", "is_loopback"]

AUTH_MODES = ("jwt", "anonymous")
_AUTH = "STATEFED_GATEWAY_AUTH"
_JWKS = "STATEFED_GATEWAY_JWKS"
_SECRET = "STATEFED_GATEWAY_JWT_SECRET_FILE"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches: 127.0.0.0/8, ::1 and localhost."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _comma_separated(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class GatewayConfig(KafkaClientConfig, EnvConfig):
    """Everything `run_gateway` needs; the defaults suit the local demo."""

    bootstrap: str = setting("STATEFED_BOOTSTRAP", "127.0.0.1:9092")
    # librdkafka settings of every Kafka client (runtime.kafka): STATEFED_KAFKA_CONFIG and
    # STATEFED_KAFKA_* variables; `kafka` joins them with the bootstrap servers
    kafka_properties: KafkaProperties = settings_group(KafkaProperties.from_env, KafkaProperties())
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
    # records behind; 0 = only one its node proves current for the read (node.currency)
    max_lag: int = setting("STATEFED_GATEWAY_MAX_LAG", 1000, low=0, high=1 << 62)
    # hedged reads (gateway.hedging): an ACTIVE copy that has not answered within its node's
    # hedge delay (its recent latency, bounded by these; the max until it has answered once)
    # is raced by a standby within maxLag, the first answer wins
    hedge: bool = setting("STATEFED_GATEWAY_HEDGE", True)
    hedge_min_ms: int = setting("STATEFED_GATEWAY_HEDGE_MIN_MS", 20, low=1, high=600_000)
    hedge_max_ms: int = setting("STATEFED_GATEWAY_HEDGE_MAX_MS", 500, low=1, high=600_000)
    # a node that leaves this many calls in a row without an answer (timed out, or outraced
    # by a hedge after waiting its delay) is suspect for STATEFED_GATEWAY_SUSPECT_MS: its
    # partitions are read from a standby at once, or fail at once with reason SUSPECT
    suspect_calls: int = setting("STATEFED_GATEWAY_SUSPECT_CALLS", 3, low=1, high=10_000)
    suspect_ms: int = setting("STATEFED_GATEWAY_SUSPECT_MS", 1000, low=1, high=600_000)
    # a node answers a local top-N of at most 10000
    max_top_limit: int = setting("STATEFED_MAX_TOP_LIMIT", 1000, low=1, high=10_000)
    max_lookup_keys: int = setting("STATEFED_MAX_LOOKUP_KEYS", 1000, low=1, high=1_000_000)
    # `first` / `last` of a page of a whole-view scan; a node answers a slice of at most 10001
    max_scan_page: int = setting("STATEFED_MAX_SCAN_PAGE", 1000, low=1, high=10_000)
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
    # logs (runtime.logs): text or json lines, and the lowest level written: the gateway's
    # own STATEFED_GATEWAY_LOG_LEVEL when set, else STATEFED_LOG_LEVEL, every part's level
    log_format: str = setting("STATEFED_LOG_FORMAT", "text", parse=str.lower, choices=LOG_FORMATS)
    parts_log_level: str = setting(
        "STATEFED_LOG_LEVEL", "info", parse=str.lower, choices=LOG_LEVELS
    )
    log_level: str = setting(
        "STATEFED_GATEWAY_LOG_LEVEL", "info", parse=str.lower, choices=LOG_LEVELS
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
    # a file holding the bearer token /metrics then needs (runtime.metrics), read at start-up;
    # None = /metrics answers anyone (counts and latencies, no view data), as /health does
    metrics_token_file: Path | None = setting("STATEFED_METRICS_TOKEN_FILE", None, parse=Path)
    # tokens of one GraphQL document, counted while parsing, before validation and limits;
    # GraphiQL's introspection query has ~190
    max_tokens: int = setting("STATEFED_GATEWAY_MAX_TOKENS", 5000, low=100, high=1_000_000)
    # documents that differ only in literal argument values share one parsed and validated
    # plan (runtime.graphql_http.literals); off: each distinct text is parsed and validated
    normalize_literals: bool = setting("STATEFED_GATEWAY_NORMALIZE_LITERALS", True)
    # HTTPS: a PEM certificate (chain) and its key, both or neither
    tls_cert: Path | None = setting("STATEFED_GATEWAY_TLS_CERT", None, parse=Path)
    tls_key: Path | None = setting("STATEFED_GATEWAY_TLS_KEY", None, parse=Path)
    # the CA (PEM) https node URLs are verified against; unset: the system's trust store
    node_ca: Path | None = setting("STATEFED_GATEWAY_NODE_CA", None, parse=Path)
    # authentication (gateway.auth): unset = anonymous, allowed on a loopback address only
    auth: str | None = setting(_AUTH, None, parse=str.lower)
    # where the token signing keys are: a JWKS file or https URL, or an HS256 secret's file
    jwks: str | None = setting(_JWKS, None, parse=str)
    jwt_secret_file: Path | None = setting(_SECRET, None, parse=Path)
    jwt_issuer: str | None = setting("STATEFED_GATEWAY_JWT_ISSUER", None, parse=str)
    jwt_audience: str | None = setting("STATEFED_GATEWAY_JWT_AUDIENCE", None, parse=str)
    # clock skew allowed on exp, nbf and iat
    jwt_leeway_s: int = setting("STATEFED_GATEWAY_JWT_LEEWAY_S", 30, low=0, high=3600)
    # scopes the produce mutation, and node URLs (cluster, /health) and /status.json, need
    # when auth is on
    produce_scope: str = setting("STATEFED_GATEWAY_PRODUCE_SCOPE", "statefed:produce")
    operator_scope: str = setting("STATEFED_GATEWAY_OPERATOR_SCOPE", "statefed:operator")
    # updates waiting for one subscriber: past it a row subscription keeps only the newest
    # row per key (a slow reader), a history subscription ends with SUBSCRIBER_TOO_SLOW
    # (resume with the token)
    subscription_queue: int = setting(
        "STATEFED_GATEWAY_SUBSCRIPTION_QUEUE", 1000, low=1, high=1_000_000
    )

    # subscriptions (gateway.live): running at once in the gateway, and on one connection
    # (a WebSocket, an SSE reservation); one over either is refused TOO_MANY_SUBSCRIPTIONS
    max_subscriptions: int = setting(
        "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS", 10_000, low=1, high=10_000_000
    )
    max_subscriptions_per_connection: int = setting(
        "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS_PER_CONNECTION", 100, low=1, high=1_000_000
    )
    # how long a WebSocket may wait before its connection_init (graphql-ws's default)
    live_init_timeout_ms: int = setting(
        "STATEFED_GATEWAY_LIVE_INIT_TIMEOUT_MS", 3000, low=1, high=600_000
    )
    # messages waiting to be sent on one subscription connection: a client that does not
    # read makes its subscriptions wait (and conflate) instead of the gateway buffering more
    live_send_buffer: int = setting("STATEFED_GATEWAY_LIVE_SEND_BUFFER", 64, low=1, high=100_000)
    # the gateway cache (gateway.live.cache): lookups of count and latest views answered
    # from memory while the nodes' change feeds prove the rows current; on by default, as
    # it answers only what a node read would (anything uncertain is read from the nodes)
    cache: bool = setting("STATEFED_GATEWAY_CACHE", True)
    cache_mb: int = setting("STATEFED_GATEWAY_CACHE_MB", 64, low=1, high=1 << 20)
    # automatic persisted queries (gateway.persisted): a client may send a query's SHA-256
    # instead of its text once the gateway has seen the text; the texts are kept in memory,
    # least recently used evicted past STATEFED_GATEWAY_APQ_MB
    apq: bool = setting("STATEFED_GATEWAY_APQ", True)
    apq_mb: int = setting("STATEFED_GATEWAY_APQ_MB", 16, low=1, high=1 << 16)
    # trusted documents (gateway.persisted): a manifest of the only operations the gateway
    # runs (Apollo's persisted-query manifest or a {hash: body} JSON map); APQ is then off
    trusted_documents: Path | None = setting("STATEFED_GATEWAY_TRUSTED_DOCUMENTS", None, parse=Path)

    @classmethod
    def env_values(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        """The set variables; the gateway's log level is STATEFED_LOG_LEVEL's unless
        STATEFED_GATEWAY_LOG_LEVEL is set."""
        values = super().env_values(environ)
        if "parts_log_level" in values:
            values.setdefault("log_level", values["parts_log_level"])
        return values

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hedge_min_ms > self.hedge_max_ms:
            raise ConfigError(
                "STATEFED_GATEWAY_HEDGE_MIN_MS",
                f"must be at most STATEFED_GATEWAY_HEDGE_MAX_MS ({self.hedge_max_ms}), "
                f"got {self.hedge_min_ms}",
            )
        problem = origins_problem(self.cors_origins)
        if problem is not None:
            raise self.config_error("STATEFED_GATEWAY_CORS_ORIGINS", problem)
        env = GatewayConfig.ENV
        check_pair(self.tls_cert, self.tls_key, (env["tls_cert"], env["tls_key"]))
        check_ca(self.node_ca, env["node_ca"])
        if self.auth is not None and self.auth not in AUTH_MODES:
            raise ConfigError(_AUTH, f"must be jwt or anonymous, got {self.auth!r}")
        if self.auth is None and not is_loopback(self.host):
            raise ConfigError(
                _AUTH,
                f"is unset but the gateway serves on {self.host} (STATEFED_GATEWAY_HOST), "
                f"not a loopback address: set {_AUTH}=jwt with {_JWKS} or {_SECRET}, or "
                f"{_AUTH}=anonymous to serve every caller without a token on purpose",
            )
        if self.trusted_documents is not None and not self.trusted_documents.is_file():
            raise ConfigError(
                "STATEFED_GATEWAY_TRUSTED_DOCUMENTS",
                f"no manifest file at {str(self.trusted_documents)!r}: give the path of the "
                "JSON manifest of the operations to run, or unset it",
            )
        if self.authenticates:
            self._check_jwt()
        elif self.jwks is not None or self.jwt_secret_file is not None:
            given = _JWKS if self.jwks is not None else _SECRET
            raise ConfigError(given, f"is set but {_AUTH} is not jwt: set {_AUTH}=jwt or unset it")

    def _check_jwt(self) -> None:
        if (self.jwks is None) == (self.jwt_secret_file is None):
            raise ConfigError(
                _AUTH, f"jwt needs exactly one of {_JWKS} (public keys) or {_SECRET} (HS256)"
            )
        for variable, value in (
            ("STATEFED_GATEWAY_JWT_ISSUER", self.jwt_issuer),
            ("STATEFED_GATEWAY_JWT_AUDIENCE", self.jwt_audience),
        ):
            if value is None:
                raise ConfigError(
                    variable, f"is needed with {_AUTH}=jwt: tokens are checked for it"
                )
        if self.jwks is not None and "://" in self.jwks:
            url = urlsplit(self.jwks)
            loopback_http = url.scheme == "http" and is_loopback(url.hostname or "")
            if url.scheme != "https" and not loopback_http:
                raise ConfigError(
                    _JWKS,
                    "must be a file path or an https URL (http on loopback only), "
                    f"got {self.jwks!r}",
                )

    @property
    def authenticates(self) -> bool:
        """True when requests need a valid bearer token (STATEFED_GATEWAY_AUTH=jwt)."""
        return self.auth == "jwt"

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
