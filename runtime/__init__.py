"""Runtime code the deployable parts share: the clock, Kafka client settings (TLS, SASL:
`runtime.kafka`), Kafka topics and producers, top-N ranking, the one reader of
`STATEFED_*` configuration (`runtime.config`), and trust between the parts: the cluster
secret, signed node calls and membership (`runtime.trust`).

Imports run one way: tooling -> parts (gateway, node, pipeline) -> runtime -> schema.
"""

from runtime.clock import Clock, wall_clock_ms
from runtime.config import ConfigError, EnvConfig, setting, settings_group
from runtime.kafka import (
    KafkaConnectionError,
    KafkaProperties,
    KafkaSettings,
    connection_hint,
    redacted,
)
from runtime.produce import ProduceError, Record, Write, new_producer, produce_keys, produce_records
from runtime.ranking import Rankable, merge_top, rank
from runtime.topics import ensure_topics, partition_count, statefed_topics
from runtime.trust import ClusterSecret, NodeCallSigner, RequestVerifier, SignatureError

__all__ = [
    "Clock",
    "ClusterSecret",
    "ConfigError",
    "EnvConfig",
    "KafkaConnectionError",
    "KafkaProperties",
    "KafkaSettings",
    "NodeCallSigner",
    "ProduceError",
    "Rankable",
    "Record",
    "RequestVerifier",
    "SignatureError",
    "Write",
    "connection_hint",
    "ensure_topics",
    "merge_top",
    "new_producer",
    "partition_count",
    "produce_keys",
    "produce_records",
    "rank",
    "redacted",
    "setting",
    "settings_group",
    "statefed_topics",
    "wall_clock_ms",
]
