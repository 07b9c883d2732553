"""Runtime code the deployable parts share: the clock, Kafka topics and producers, and
the one reader of `STATEFED_*` configuration (`runtime.config`).

Imports run one way: tooling -> parts (gateway, node, pipeline) -> runtime -> schema.
"""

from runtime.clock import Clock, wall_clock_ms
from runtime.config import ConfigError, EnvConfig, setting
from runtime.produce import ProduceError, Record, Write, new_producer, produce_keys, produce_records
from runtime.topics import ensure_topics, partition_count, statefed_topics

__all__ = [
    "Clock",
    "ConfigError",
    "EnvConfig",
    "ProduceError",
    "Record",
    "Write",
    "ensure_topics",
    "new_producer",
    "partition_count",
    "produce_keys",
    "produce_records",
    "setting",
    "statefed_topics",
    "wall_clock_ms",
]
