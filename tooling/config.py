"""The settings the `statefed` command line and the local launchers read themselves.

Each part (pipeline, node, gateway) reads its own configuration; these are the few
variables of the tools around them, read by the same reader (`runtime.config`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runtime.config import EnvConfig, setting, settings_group
from runtime.kafka import KafkaClientConfig, KafkaProperties

__all__ = ["ToolingConfig"]


@dataclass(frozen=True)
class ToolingConfig(KafkaClientConfig, EnvConfig):
    """Bootstrap, catalogue and topic layout for `broker`, `topics`, `produce` and `demo`;
    the gateway and token `status` reads from."""

    bootstrap: str = setting("STATEFED_BOOTSTRAP", "127.0.0.1:9092")
    # librdkafka settings of every Kafka client (runtime.kafka): STATEFED_KAFKA_CONFIG and
    # STATEFED_KAFKA_* variables; `kafka` joins them with the bootstrap servers
    kafka_properties: KafkaProperties = settings_group(KafkaProperties.from_env, KafkaProperties())
    # `package.module:NAME`; None = the built-in catalogue
    catalogue: str | None = setting("STATEFED_CATALOGUE", None, parse=str)
    partitions: int = setting("STATEFED_PARTITIONS", 6, low=1)
    broker_host: str = setting("STATEFED_BROKER_HOST", "127.0.0.1")
    broker_port: int = setting("STATEFED_BROKER_PORT", 9092, low=1, high=65535)
    # `statefed broker`: Kafka's data directory (kept across restarts)
    broker_dir: Path = setting("STATEFED_BROKER_DIR", Path(".statefed/broker"))
    demo_dir: Path = setting("STATEFED_DEMO_DIR", Path(".statefed/demo"))
    # `statefed topics`: 3 is the production norm (a 1-broker cluster needs 1, and says so)
    topics_replication: int = setting("STATEFED_TOPICS_REPLICATION_FACTOR", 3, low=1)
    # None: one less than the replication factor, at least 1
    topics_min_isr: int | None = setting("STATEFED_TOPICS_MIN_INSYNC_REPLICAS", None, parse=int)
    # `statefed status`: where the gateway serves /status.json, and a bearer token with the
    # operator scope when the gateway authenticates
    gateway_url: str = setting("STATEFED_GATEWAY_URL", "http://127.0.0.1:8100")
    gateway_token: str | None = setting("STATEFED_GATEWAY_TOKEN", None, parse=str)
