"""Runtime code the deployable parts share: the clock, Kafka topics and producers.

Imports run one way: tooling -> parts (gateway, node, pipeline) -> runtime -> schema.
"""

from runtime.clock import Clock, wall_clock_ms
from runtime.produce import ProduceError, Record, Write, new_producer, produce_keys, produce_records
from runtime.topics import ensure_topics, partition_count, statefed_topics

__all__ = [
    "Clock",
    "ProduceError",
    "Record",
    "Write",
    "ensure_topics",
    "new_producer",
    "partition_count",
    "produce_keys",
    "produce_records",
    "statefed_topics",
    "wall_clock_ms",
]
