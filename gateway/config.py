"""The gateway's configuration, read from `STATEFED_*` environment variables in one place."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["GatewayConfig"]

_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
_FLAGS = dict.fromkeys(("true", "1", "yes", "on"), True) | dict.fromkeys(
    ("false", "0", "no", "off"), False
)


def _flag(variable: str, raw: str) -> bool:
    value = _FLAGS.get(raw.strip().lower())
    if value is None:
        raise ValueError(f"{variable} must be true or false, got {raw!r}")
    return value


@dataclass(frozen=True)
class GatewayConfig:
    """Everything `run_gateway` needs; the defaults suit the local demo."""

    bootstrap: str = "127.0.0.1:9092"
    host: str = "127.0.0.1"
    port: int = 8100
    timeout_ms: int = 5000  # deadline of one client request, retries included
    # extra rounds for partitions that failed (NOT_OWNER, refused, unassigned): 5 rounds of
    # doubling backoff span ~1.5 s, about what promoting a standby to active takes
    retries: int = 5
    backoff_ms: int = 50  # wait before the first retry; doubles each round
    # a partition whose active copy cannot answer is read from a standby at most this many
    # records behind; 0 = active copies only
    max_lag: int = 1000
    max_top_limit: int = 1000
    max_lookup_keys: int = 1000
    members_lookback_ms: int = 10_000  # how far back in statefed.members reading starts
    status_tail_records: int = 10_000  # how many records of statefed.pipeline are read back
    upstream_connections: int = 64  # per node, opened as needed and kept alive
    log_level: str = "info"
    # query limits (gateway.limits); the standard introspection query, GraphiQL's, is 15 deep
    max_depth: int = 15
    max_aliases: int = 30
    max_root_fields: int = 20
    max_cost: int = 50_000  # P x limit per top-N, keys per lookup, `first` per history page
    max_key_bytes: int = 1024  # UTF-8 bytes of one key
    # of a POST body; of a GET query string, whose request target (path and query string)
    # must also fit the HTTP parser's 65,535 bytes: longer documents go by POST
    max_body_bytes: int = 1 << 20
    introspection: bool = True  # __schema and __type; __typename always works
    produce: bool = True  # the produce mutation (writes to the catalogue's input topics)

    ENV: ClassVar[Mapping[str, str]] = {
        "bootstrap": "STATEFED_BOOTSTRAP",
        "host": "STATEFED_GATEWAY_HOST",
        "port": "STATEFED_GATEWAY_PORT",
        "timeout_ms": "STATEFED_GATEWAY_TIMEOUT_MS",
        "retries": "STATEFED_GATEWAY_RETRIES",
        "backoff_ms": "STATEFED_GATEWAY_BACKOFF_MS",
        "max_lag": "STATEFED_GATEWAY_MAX_LAG",
        "max_top_limit": "STATEFED_MAX_TOP_LIMIT",
        "max_lookup_keys": "STATEFED_MAX_LOOKUP_KEYS",
        "members_lookback_ms": "STATEFED_GATEWAY_MEMBERS_LOOKBACK_MS",
        "status_tail_records": "STATEFED_GATEWAY_STATUS_TAIL_RECORDS",
        "upstream_connections": "STATEFED_GATEWAY_UPSTREAM_CONNECTIONS",
        "log_level": "STATEFED_GATEWAY_LOG_LEVEL",
        "max_depth": "STATEFED_GATEWAY_MAX_DEPTH",
        "max_aliases": "STATEFED_GATEWAY_MAX_ALIASES",
        "max_root_fields": "STATEFED_GATEWAY_MAX_ROOT_FIELDS",
        "max_cost": "STATEFED_GATEWAY_MAX_COST",
        "max_key_bytes": "STATEFED_GATEWAY_MAX_KEY_BYTES",
        "max_body_bytes": "STATEFED_GATEWAY_MAX_BODY_BYTES",
        "introspection": "STATEFED_GATEWAY_INTROSPECTION",
        "produce": "STATEFED_GATEWAY_PRODUCE",
    }

    # inclusive bounds of the integer settings
    _BOUNDS: ClassVar[Mapping[str, tuple[int, int]]] = {
        "port": (1, 65535),
        "timeout_ms": (1, 600_000),
        "retries": (0, 100),
        "backoff_ms": (0, 60_000),
        "max_lag": (0, 1 << 62),
        "max_top_limit": (1, 10_000),  # a node answers a local top-N of at most 10000
        "max_lookup_keys": (1, 1_000_000),
        "members_lookback_ms": (1, 86_400_000),
        "status_tail_records": (1, 100_000_000),
        "upstream_connections": (1, 10_000),
        "max_depth": (1, 200),  # gateway.limits stops walking deeper than 200 levels
        "max_aliases": (0, 100_000),
        "max_root_fields": (1, 10_000),
        "max_cost": (1, 10**12),
        "max_key_bytes": (1, 1 << 20),
        "max_body_bytes": (1024, 1 << 30),
    }

    def __post_init__(self) -> None:
        for name, (low, high) in self._BOUNDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(
                    f"{self.ENV[name]} must be an integer in {low}..{high}, got {value!r}"
                )
        for name in ("bootstrap", "host"):
            if not getattr(self, name).strip():
                raise ValueError(f"{self.ENV[name]} must not be empty")
        for name in ("introspection", "produce"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{self.ENV[name]} must be true or false")
        if self.log_level not in _LOG_LEVELS:
            raise ValueError(f"{self.ENV['log_level']} must be one of {', '.join(_LOG_LEVELS)}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GatewayConfig:
        """Read the configuration; unset variables keep their defaults."""
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(cls.ENV[field.name])
            if raw is None:
                continue
            if field.name in ("introspection", "produce"):
                values[field.name] = _flag(cls.ENV[field.name], raw)
            elif field.name in cls._BOUNDS:
                try:
                    values[field.name] = int(raw.strip())
                except ValueError as exc:
                    raise ValueError(
                        f"{cls.ENV[field.name]} must be an integer, got {raw!r}"
                    ) from exc
            else:
                values[field.name] = raw.strip().lower() if field.name == "log_level" else raw
        return cls(**values)  # type: ignore[arg-type]

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0

    @property
    def backoff_s(self) -> float:
        return self.backoff_ms / 1000.0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"
