"""Configuration of a node process, read from `STATEFED_*` environment variables."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from node.errors import ConfigError

__all__ = ["NodeConfig"]

_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


def _int(environ: Mapping[str, str], variable: str, default: int) -> int:
    raw = environ.get(variable)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(variable, f"must be an integer, got {raw!r}") from None


def _str(environ: Mapping[str, str], variable: str, default: str) -> str:
    raw = environ.get(variable, "").strip()
    return raw or default


@dataclass(frozen=True)
class NodeConfig:
    """Everything a node process needs; `from_env` is the one place that reads it."""

    bootstrap: str = "127.0.0.1:9092"
    node_id: str = "node-8101"
    host: str = "127.0.0.1"
    port: int = 8101
    url: str = "http://127.0.0.1:8101"
    state_dir: Path = Path(".statefed/state/node-8101")
    heartbeat_ms: int = 1000
    group_id: str = "statefed-nodes"
    store_cache_mb: int = 32
    # how often expired windows are purged from partitions that receive no records
    retention_sweep_ms: int = 10_000
    # standby copies of each partition on other nodes (fewer when fewer nodes are live)
    standby_replicas: int = 1

    def __post_init__(self) -> None:
        if not self.bootstrap.strip():
            raise ConfigError("STATEFED_BOOTSTRAP", "must not be empty")
        if not _NODE_ID.match(self.node_id):
            raise ConfigError(
                "STATEFED_NODE_ID",
                f"{self.node_id!r} must be 1-128 letters, digits, '.', '_' or '-'",
            )
        if not 1 <= self.port <= 65535:
            raise ConfigError("STATEFED_NODE_PORT", f"must be in 1..65535, got {self.port}")
        if not self.url.startswith(("http://", "https://")) or self.url.endswith("/"):
            raise ConfigError(
                "STATEFED_NODE_URL",
                f"must be an http(s) base URL without a trailing '/', got {self.url!r}",
            )
        if not 50 <= self.heartbeat_ms <= 60_000:
            raise ConfigError(
                "STATEFED_HEARTBEAT_MS", f"must be in 50..60000, got {self.heartbeat_ms}"
            )
        if not self.group_id.strip():
            raise ConfigError("STATEFED_GROUP_ID", "must not be empty")
        if not 1 <= self.store_cache_mb <= 65_536:
            raise ConfigError(
                "STATEFED_STORE_CACHE_MB", f"must be in 1..65536, got {self.store_cache_mb}"
            )
        if not 50 <= self.retention_sweep_ms <= 86_400_000:
            raise ConfigError(
                "STATEFED_RETENTION_SWEEP_MS",
                f"must be in 50..86400000, got {self.retention_sweep_ms}",
            )
        if not 0 <= self.standby_replicas <= 16:
            raise ConfigError(
                "STATEFED_STANDBY_REPLICAS", f"must be in 0..16, got {self.standby_replicas}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> NodeConfig:
        """Read the configuration; defaults suit one node on the local machine."""
        host = _str(environ, "STATEFED_NODE_HOST", "127.0.0.1")
        port = _int(environ, "STATEFED_NODE_PORT", 8101)
        # the default id must be stable across restarts (it names the state directory)
        node_id = _str(environ, "STATEFED_NODE_ID", f"{socket.gethostname()}-{port}")
        # a wildcard bind address is no address others can call: advertise the host name
        advertised_host = socket.gethostname() if host in _WILDCARD_HOSTS else host
        if ":" in advertised_host:
            advertised_host = f"[{advertised_host}]"
        url = _str(environ, "STATEFED_NODE_URL", f"http://{advertised_host}:{port}")
        state_dir = _str(environ, "STATEFED_STATE_DIR", f".statefed/state/{node_id}")
        return cls(
            bootstrap=_str(environ, "STATEFED_BOOTSTRAP", "127.0.0.1:9092"),
            node_id=node_id,
            host=host,
            port=port,
            url=url.rstrip("/"),
            state_dir=Path(state_dir),
            heartbeat_ms=_int(environ, "STATEFED_HEARTBEAT_MS", 1000),
            group_id=_str(environ, "STATEFED_GROUP_ID", "statefed-nodes"),
            store_cache_mb=_int(environ, "STATEFED_STORE_CACHE_MB", 32),
            retention_sweep_ms=_int(environ, "STATEFED_RETENTION_SWEEP_MS", 10_000),
            standby_replicas=_int(environ, "STATEFED_STANDBY_REPLICAS", 1),
        )
