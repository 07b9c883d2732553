"""The gateway's configuration, read from `STATEFED_*` environment variables in one place."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.cors import origins_problem
from runtime import shared_settings as shared
from runtime.config import ConfigError, EnvConfig, comma_separated, setting, settings_group
from runtime.hosts import HostPolicy, hosts_problem, is_loopback
from runtime.kafka import KafkaClientConfig, KafkaProperties
from runtime.logs import LOG_LEVELS
from runtime.tls import check_ca, check_pair

__all__ = ["AUTH_MODES", "CLUSTER_AUTH_MODES", "GatewayConfig"]

AUTH_MODES = ("jwt", "anonymous")
# the values of the nodes' STATEFED_NODE_AUTH, meaning the same on the gateway's side
CLUSTER_AUTH_MODES = ("cluster", "none")
_AUTH = "STATEFED_GATEWAY_AUTH"
_CLUSTER_AUTH = "STATEFED_GATEWAY_CLUSTER_AUTH"
_CLUSTER_SECRET = "STATEFED_CLUSTER_SECRET_FILE"
_JWKS = "STATEFED_GATEWAY_JWKS"
_SECRET = "STATEFED_GATEWAY_JWT_SECRET_FILE"


@dataclass(frozen=True)
class GatewayConfig(KafkaClientConfig, EnvConfig):
    """Everything `run_gateway` needs; the defaults suit the local demo."""

    bootstrap: str = shared.bootstrap()
    # librdkafka settings of every Kafka client (runtime.kafka): STATEFED_KAFKA_CONFIG and
    # STATEFED_KAFKA_* variables; `kafka` joins them with the bootstrap servers
    kafka_properties: KafkaProperties = settings_group(KafkaProperties.from_env, KafkaProperties())
    host: str = setting(
        "STATEFED_GATEWAY_HOST",
        "127.0.0.1",
        doc=(
            "address the gateway serves on; beyond loopback it needs `STATEFED_GATEWAY_AUTH` "
            "and `STATEFED_CLUSTER_SECRET_FILE` (or `STATEFED_GATEWAY_CLUSTER_AUTH=none`)"
        ),
    )
    port: int = setting(
        "STATEFED_GATEWAY_PORT", 8100, low=1, high=65535, doc="port the gateway serves on"
    )
    processes: int = setting(
        "STATEFED_GATEWAY_PROCESSES",
        1,
        low=1,
        high=64,
        doc=(
            "gateway processes answering on the one port (each binds it with "
            "`SO_REUSEPORT`; the kernel spreads connections over them): one event loop "
            "uses one core, so more than 1 helps on a machine with cores to spare. Each "
            "process holds its own cache and automatic persisted queries; `/metrics` "
            "answers for all of them (see [Gateway capacity]"
            "(operations.md#gateway-capacity))"
        ),
    )
    timeout_ms: int = setting(
        "STATEFED_GATEWAY_TIMEOUT_MS",
        5000,
        low=1,
        high=600_000,
        doc="deadline of one client request across all node calls, retries included",
    )
    retries: int = setting(
        "STATEFED_GATEWAY_RETRIES",
        5,
        low=0,
        high=100,
        doc=(
            "retry rounds after NOT_OWNER or a refused connection, with doubling "
            "backoff (50 ms ... 800 ms: about 1.5 s, what a standby takes to "
            "become active); past them, a partition without an owner while a node "
            "rebalances, or while routing is stale, waits for one until the request's "
            "deadline"
        ),
    )
    backoff_ms: int = setting(
        "STATEFED_GATEWAY_BACKOFF_MS",
        50,
        low=0,
        high=60_000,
        doc="wait before the first retry round; it doubles each round",
    )
    max_lag: int = setting(
        "STATEFED_GATEWAY_MAX_LAG",
        1000,
        low=0,
        high=1 << 62,
        doc=(
            "default of `maxLag`: when a partition's active copy cannot answer, "
            "read a standby at most this many records behind (0 = only a copy "
            "proved current; see [Staleness and "
            "read-your-writes](querying.md#staleness-and-read-your-writes))"
        ),
    )
    # hedged reads and suspicion from calls: gateway.nodes.hedging
    hedge: bool = setting(
        "STATEFED_GATEWAY_HEDGE",
        True,
        doc=(
            "hedged reads: an owner that has not answered within its hedge delay "
            "is raced by a standby within `maxLag` (see [Hedged reads and suspect"
            " nodes](operations.md#hedged-reads-and-suspect-nodes))"
        ),
    )
    hedge_min_ms: int = setting(
        "STATEFED_GATEWAY_HEDGE_MIN_MS",
        20,
        low=1,
        high=600_000,
        doc=(
            "lower bound of a node's hedge delay (its smoothed latency plus four "
            "deviations); at most `STATEFED_GATEWAY_HEDGE_MAX_MS`"
        ),
    )
    hedge_max_ms: int = setting(
        "STATEFED_GATEWAY_HEDGE_MAX_MS",
        500,
        low=1,
        high=600_000,
        doc=(
            "upper bound of a node's hedge delay, and the delay of a node that has not answered yet"
        ),
    )
    suspect_calls: int = setting(
        "STATEFED_GATEWAY_SUSPECT_CALLS",
        3,
        low=1,
        high=10_000,
        doc=(
            "a node that leaves this many calls in a row without an answer is "
            "suspect: not asked, its partitions read from a standby or failed at "
            "once"
        ),
    )
    suspect_ms: int = setting(
        "STATEFED_GATEWAY_SUSPECT_MS",
        1000,
        low=1,
        high=600_000,
        doc="how long suspicion from unanswered calls lasts; the node is then asked again",
    )
    # a node answers a local top-N of at most 10000
    max_top_limit: int = setting(
        "STATEFED_MAX_TOP_LIMIT",
        1000,
        low=1,
        high=10_000,
        doc="bound of `limit` of a top-N (see [Limits](querying.md#limits))",
    )
    max_lookup_keys: int = setting(
        "STATEFED_MAX_LOOKUP_KEYS", 1000, low=1, high=1_000_000, doc="keys of one multi-key lookup"
    )
    # a node answers a slice of at most 10001 rows
    max_scan_page: int = setting(
        "STATEFED_MAX_SCAN_PAGE",
        1000,
        low=1,
        high=10_000,
        doc=(
            "bound of `first` / `last` of a page of a whole-view scan (see "
            "[Browse a whole view](querying.md#browse-a-whole-view))"
        ),
    )
    # each representation is priced as a point lookup (gateway.execute.limits)
    max_entity_representations: int = setting(
        "STATEFED_GATEWAY_MAX_ENTITIES",
        1000,
        low=1,
        high=1_000_000,
        doc=(
            "representations of one `_entities` call (a federation router batches"
            " as many as its plan holds; each is a point lookup, priced as one)"
        ),
    )
    members_lookback_ms: int = setting(
        "STATEFED_GATEWAY_MEMBERS_LOOKBACK_MS",
        10_000,
        low=1,
        high=86_400_000,
        doc="how far back in `statefed.members` the membership reader starts (>= 3 heartbeats)",
    )
    status_tail_records: int = setting(
        "STATEFED_GATEWAY_STATUS_TAIL_RECORDS",
        10_000,
        low=1,
        high=100_000_000,
        doc=(
            "pipeline status records (and dead letters) read at start-up for "
            "`cluster.views` and `/status`"
        ),
    )
    upstream_connections: int = setting(
        "STATEFED_GATEWAY_UPSTREAM_CONNECTIONS",
        64,
        low=1,
        high=10_000,
        doc="connections to each node at most (HTTP/1.1, opened as needed, kept alive)",
    )
    # logs (runtime.logs): text or json lines, and the lowest level written: the gateway's
    # own STATEFED_GATEWAY_LOG_LEVEL when set, else STATEFED_LOG_LEVEL, every part's level
    log_format: str = shared.log_format()
    parts_log_level: str = shared.log_level()
    log_level: str = setting(
        "STATEFED_GATEWAY_LOG_LEVEL",
        "info",
        parse=str.lower,
        choices=LOG_LEVELS,
        doc="the gateway's log level, when it should differ from the other parts'",
        shown_default="`STATEFED_LOG_LEVEL`",
    )
    # query limits (gateway.execute.limits), which stops walking deeper than 200 levels; the
    # standard introspection query, GraphiQL's, is 15 deep
    max_depth: int = setting(
        "STATEFED_GATEWAY_MAX_DEPTH",
        15,
        low=1,
        high=200,
        doc=(
            "how deep fields nest (a root field is depth 1; `QUERY_TOO_DEEP`). "
            "The standard introspection query, the one GraphiQL sends, is 15 "
            "deep; data queries are at most 4"
        ),
    )
    max_aliases: int = setting(
        "STATEFED_GATEWAY_MAX_ALIASES",
        30,
        low=0,
        high=100_000,
        doc=(
            "aliased fields, and fields repeating a response key of their "
            "selection set, counted once per fragment spread (`TOO_MANY_ALIASES`)"
        ),
    )
    max_root_fields: int = setting(
        "STATEFED_GATEWAY_MAX_ROOT_FIELDS",
        20,
        low=1,
        high=10_000,
        doc="root fields, one per response key; `__typename` is free (`TOO_MANY_ROOT_FIELDS`)",
    )
    # P x limit per top-N, keys per lookup, `first` per history page
    max_cost: int = setting(
        "STATEFED_GATEWAY_MAX_COST",
        50_000,
        low=1,
        high=10**12,
        doc=(
            "the sum of the root fields' costs times what they select "
            "(`QUERY_TOO_COSTLY`; see [Limits](querying.md#limits))"
        ),
    )
    max_key_bytes: int = setting(
        "STATEFED_GATEWAY_MAX_KEY_BYTES",
        1024,
        low=1,
        high=1 << 20,
        doc="one key (`word`, `host`, `customer`, an `_entities` key), in bytes of UTF-8",
    )
    # of a POST body; of a GET query string, whose request target (path and query string)
    # must also fit the HTTP parser's 65,535 bytes: longer documents go by POST
    max_body_bytes: int = setting(
        "STATEFED_GATEWAY_MAX_BODY_BYTES",
        1 << 20,
        low=1024,
        high=1 << 30,
        doc=(
            "a POST body, or a GET query string (`PAYLOAD_TOO_LARGE`, HTTP 413; "
            "`URI_TOO_LONG`, HTTP 414)"
        ),
    )
    introspection: bool = setting(
        "STATEFED_GATEWAY_INTROSPECTION",
        True,
        doc=(
            "`__schema`, `__type` and `_service` (GraphiQL, schema tools and routers "
            "composing from `_service` need them; `__typename` always works; see "
            "[Introspection](querying.md#introspection))"
        ),
    )
    produce: bool = setting(
        "STATEFED_GATEWAY_PRODUCE",
        False,
        doc=(
            "serve the `produce` mutation, which writes to the views' input "
            "topics (see [Writes](security.md#writes))"
        ),
    )

    cors_origins: tuple[str, ...] = setting(
        "STATEFED_GATEWAY_CORS_ORIGINS",
        (),
        parse=comma_separated,
        doc=(
            "comma-separated exact origins whose pages may read answers "
            "(`https://app.example.com,http://127.0.0.1:5173`); empty = no CORS "
            "headers; `*` alone = any origin, never with credentials (see "
            "[Browser safety](security.md#browser-safety-csrf-and-cors))"
        ),
        shown_default="empty",
    )
    allowed_hosts: tuple[str, ...] = setting(
        "STATEFED_GATEWAY_ALLOWED_HOSTS",
        (),
        parse=comma_separated,
        doc=(
            "comma-separated host names clients reach the gateway by, besides IP addresses, "
            "`localhost` and `*.localhost` (always answered); a request whose `Host` names "
            "another is refused (HTTP 421) while authentication is off, and with `jwt` when "
            "this is set; `*` = any (see [DNS rebinding](security.md#dns-rebinding))"
        ),
        shown_default="empty",
    )
    # how far past the gateway's clock a produced eventTime may be: a future event moves the
    # pipeline's watermark, and every real event of a windowed view would then be late
    produce_max_ahead_ms: int = setting(
        "STATEFED_GATEWAY_PRODUCE_MAX_AHEAD_MS",
        300_000,
        low=0,
        high=86_400_000,
        doc="how far past the gateway's clock a produced `eventTime` may be (5 minutes)",
    )
    produce_rate: int = setting(
        "STATEFED_GATEWAY_PRODUCE_RATE",
        100,
        low=1,
        high=1_000_000,
        doc="produced records a second per principal, and the burst size",
    )
    cluster_secret_file: Path | None = shared.cluster_secret_file()
    cluster_auth: str = setting(
        _CLUSTER_AUTH,
        "cluster",
        parse=str.lower,
        choices=CLUSTER_AUTH_MODES,
        doc=(
            "`cluster`: node calls are signed and only nodes whose membership records "
            "the cluster secret verifies are routed to (the secret is required beyond "
            "loopback); `none`: without the secret, unsigned membership records are "
            "accepted beyond loopback too (see [Trust between the "
            "parts](security.md#trust-between-the-parts))"
        ),
    )
    metrics_token_file: Path | None = shared.metrics_token_file()
    max_tokens: int = setting(
        "STATEFED_GATEWAY_MAX_TOKENS",
        5000,
        low=100,
        high=1_000_000,
        doc=(
            "tokens of one GraphQL document: parsing stops past the limit "
            "(`GRAPHQL_PARSE_FAILED`); GraphiQL's introspection query has ~190"
        ),
    )
    normalize_literals: bool = setting(
        "STATEFED_GATEWAY_NORMALIZE_LITERALS",
        True,
        doc=(
            "documents that differ only in literal argument values share one "
            "parsed and validated plan (see [Literals in "
            "queries](querying.md#literals-in-queries)); `false` parses and "
            "validates each distinct text"
        ),
    )
    # HTTPS: a PEM certificate (chain) and its key, both or neither
    tls_cert: Path | None = setting(
        "STATEFED_GATEWAY_TLS_CERT",
        None,
        parse=Path,
        doc=(
            "the gateway's PEM certificate (chain): it serves HTTPS (with "
            "`STATEFED_GATEWAY_TLS_KEY`; see [TLS](security.md#tls))"
        ),
        shown_default="unset (HTTP)",
    )
    tls_key: Path | None = setting(
        "STATEFED_GATEWAY_TLS_KEY",
        None,
        parse=Path,
        doc="the key of `STATEFED_GATEWAY_TLS_CERT`",
        shown_default="unset (HTTP)",
    )
    node_ca: Path | None = setting(
        "STATEFED_GATEWAY_NODE_CA",
        None,
        parse=Path,
        doc="the CA (PEM) the gateway verifies `https` node URLs against, host names included",
        shown_default="unset: the system's trust store",
    )
    auth: str | None = setting(
        _AUTH,
        None,
        parse=str.lower,
        doc=(
            "`jwt` (every request needs a bearer token) or `anonymous` (see "
            "[Authentication](security.md#authentication))"
        ),
        shown_default="unset: anonymous, loopback only",
    )
    # where the token signing keys are: a JWKS file or https URL, or an HS256 secret's file
    jwks: str | None = setting(
        _JWKS,
        None,
        parse=str,
        doc=(
            "JWKS file path or `https://` URL of the keys tokens are signed with "
            "(or `STATEFED_GATEWAY_JWT_SECRET_FILE`)"
        ),
    )
    jwt_secret_file: Path | None = setting(
        _SECRET,
        None,
        parse=Path,
        doc="file of the HS256 secret tokens are signed with (or `STATEFED_GATEWAY_JWKS`)",
    )
    jwt_issuer: str | None = setting(
        "STATEFED_GATEWAY_JWT_ISSUER",
        None,
        parse=str,
        doc="the `iss` tokens must carry",
        shown_default="unset: needed with `jwt`",
    )
    jwt_audience: str | None = setting(
        "STATEFED_GATEWAY_JWT_AUDIENCE",
        None,
        parse=str,
        doc="the `aud` tokens must carry",
        shown_default="unset: needed with `jwt`",
    )
    jwt_leeway_s: int = setting(
        "STATEFED_GATEWAY_JWT_LEEWAY_S",
        30,
        low=0,
        high=3600,
        doc="clock skew allowed on `exp`, `nbf`, `iat`, in seconds",
    )
    produce_scope: str = setting(
        "STATEFED_GATEWAY_PRODUCE_SCOPE",
        "statefed:produce",
        doc=(
            "scope the `produce` mutation needs (auth on; see "
            "[Authorization](security.md#authorization))"
        ),
    )
    operator_scope: str = setting(
        "STATEFED_GATEWAY_OPERATOR_SCOPE",
        "statefed:operator",
        doc="scope node URLs in `cluster` and `/health`, and `/status.json`, need (auth on)",
    )
    subscription_queue: int = setting(
        "STATEFED_GATEWAY_SUBSCRIPTION_QUEUE",
        1000,
        low=1,
        high=1_000_000,
        doc=(
            "updates waiting for one subscriber; past it a row subscription keeps"
            " only the newest row of each key (and window), a history subscription, or"
            " a windowed one with that many new windows waiting, ends with "
            "`SUBSCRIBER_TOO_SLOW` (see "
            "[Subscriptions](querying.md#subscriptions))"
        ),
    )

    subscription_max_wait_ms: int = setting(
        "STATEFED_GATEWAY_SUBSCRIPTION_MAX_WAIT_MS",
        100,
        low=0,
        high=60_000,
        doc=(
            "how long an update of a row subscription may wait for its subscriber; past it "
            "the subscriber is behind and gets each key's newest row, the rows between "
            "merged (history subscriptions get every event; see "
            "[Subscriptions](querying.md#subscriptions))"
        ),
    )

    max_subscriptions: int = setting(
        "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS",
        10_000,
        low=1,
        high=10_000_000,
        doc=(
            "subscriptions running at once in the gateway; one more is refused "
            "with `TOO_MANY_SUBSCRIPTIONS` and the connection stays open"
        ),
    )
    max_subscriptions_per_connection: int = setting(
        "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS_PER_CONNECTION",
        100,
        low=1,
        high=1_000_000,
        doc="the same, per WebSocket or SSE connection",
    )
    # an HTTP connection runs one request at a time; a WebSocket multiplexes operations
    max_operations_per_connection: int = setting(
        "STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION",
        100,
        low=1,
        high=1_000_000,
        doc=(
            "operations one WebSocket runs at once: queries and mutations until answered, "
            "subscriptions until their stream starts (then their own limits count them); one "
            "more is answered with an `error` message `TOO_MANY_OPERATIONS` and the "
            "connection stays open. On an SSE stream (single connection mode), results its "
            "client has not taken yet: one more is refused with HTTP 429"
        ),
    )
    # graphql-ws's default
    live_init_timeout_ms: int = setting(
        "STATEFED_GATEWAY_LIVE_INIT_TIMEOUT_MS",
        3000,
        low=1,
        high=600_000,
        doc=(
            "how long a WebSocket may wait before `connection_init` (then close "
            "code 4408; see [Subscription "
            "transports](querying.md#subscription-transports))"
        ),
    )
    live_send_buffer: int = setting(
        "STATEFED_GATEWAY_LIVE_SEND_BUFFER",
        64,
        low=1,
        high=100_000,
        doc=(
            "messages waiting to be sent per connection (and at most 1 MiB of them, a "
            "WebSocket's counted in characters, or one larger message); a client that "
            "does not read makes its "
            "subscriptions wait instead of the gateway buffering more"
        ),
    )
    # on by default: it answers only what a node read would (anything it cannot prove
    # current is read from the nodes)
    cache: bool = setting(
        "STATEFED_GATEWAY_CACHE",
        True,
        doc=(
            "lookups of count, latest and aggregate views answered from memory while the "
            "nodes' change feeds prove the rows current (see "
            "[Cache](querying.md#cache)); `false` sends every lookup to the nodes"
        ),
    )
    cache_mb: int = setting(
        "STATEFED_GATEWAY_CACHE_MB",
        64,
        low=1,
        high=1 << 20,
        doc=(
            "memory the cached rows may take (estimated per entry: 200 bytes, twice "
            "the key's length and the row's JSON); least recently used rows are "
            "evicted past it"
        ),
    )
    cache_admit_after: int = setting(
        "STATEFED_GATEWAY_CACHE_ADMIT_AFTER",
        3,
        low=1,
        high=15,
        doc=(
            "lookups of a key (lately, as a frequency sketch counts them) before the cache "
            "fills it; when the cache is full, a key must also have been asked more often "
            "than the row it would evict. While it has room, a key asked fewer times is "
            "filled from the node read that missed it, when that read is exact and its "
            "partition followed. `1` fills every miss (plain LRU), which costs a second read "
            "per key read once (see [Cache](querying.md#cache))"
        ),
    )
    cache_whole_views: tuple[str, ...] = setting(
        "STATEFED_GATEWAY_CACHE_WHOLE_VIEWS",
        (),
        parse=comma_separated,
        doc=(
            "comma-separated count, latest or aggregate views the cache holds whole: every "
            "key's row, loaded from the nodes and kept by their feeds, so a lookup of any "
            "key (absent ones too) is answered from memory. Their rows count against "
            "`STATEFED_GATEWAY_CACHE_MB` first; a view that outgrows it is cached key by "
            "key again (see [Cache](querying.md#cache))"
        ),
    )
    apq: bool = setting(
        "STATEFED_GATEWAY_APQ",
        True,
        doc=(
            "automatic persisted queries (see [Persisted queries and trusted "
            "documents](querying.md#persisted-queries-and-trusted-documents))"
        ),
    )
    apq_mb: int = setting(
        "STATEFED_GATEWAY_APQ_MB",
        16,
        low=1,
        high=1 << 16,
        doc=(
            "memory the kept query texts may take (estimated per text: its "
            "characters and 264 bytes); least recently used texts are evicted "
            "past it"
        ),
    )
    trusted_documents: Path | None = setting(
        "STATEFED_GATEWAY_TRUSTED_DOCUMENTS",
        None,
        parse=Path,
        doc="path of a manifest: only its operations run, and APQ is off",
    )

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
        problem = hosts_problem(self.allowed_hosts)
        if problem is not None:
            raise self.config_error("STATEFED_GATEWAY_ALLOWED_HOSTS", problem)
        env = GatewayConfig.ENV
        check_pair(self.tls_cert, self.tls_key, (env["tls_cert"], env["tls_key"]))
        check_ca(self.node_ca, env["node_ca"])
        if self.auth is not None and self.auth not in AUTH_MODES:
            raise ConfigError(_AUTH, f"must be jwt or anonymous, got {self.auth!r}")
        self._check_beyond_loopback()
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

    def _check_beyond_loopback(self) -> None:
        """Served where others reach it, the gateway needs its callers' authentication asked
        for, and the cluster secret unless told to accept unsigned membership (as a node)."""
        if is_loopback(self.host):
            return
        if self.auth is None:
            raise ConfigError(
                _AUTH,
                f"is unset but the gateway serves on {self.host} (STATEFED_GATEWAY_HOST), "
                f"not a loopback address: set {_AUTH}=jwt with {_JWKS} or {_SECRET}, or "
                f"{_AUTH}=anonymous to serve every caller without a token on purpose",
            )
        if self.cluster_auth == "cluster" and self.cluster_secret_file is None:
            raise ConfigError(
                _CLUSTER_SECRET,
                f"is not set, and the gateway serves on {self.host!r} (STATEFED_GATEWAY_HOST), "
                "beyond loopback: anyone who can write to the membership topic could route "
                "reads to a node of theirs. Make the cluster's secret once (`head -c 48 "
                "/dev/urandom | base64 > cluster.secret`) and give its path to the gateway and "
                f"every node, or set {_CLUSTER_AUTH}=none to accept unsigned membership records",
            )

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

    def host_policy(self) -> HostPolicy:
        """The `Host` values the gateway answers (runtime.hosts): checked while
        authentication is off, and with it when STATEFED_GATEWAY_ALLOWED_HOSTS lists names."""
        return HostPolicy(
            self.allowed_hosts,
            "STATEFED_GATEWAY_ALLOWED_HOSTS",
            part="gateway",
            required=not self.authenticates,
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
