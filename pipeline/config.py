"""Pipeline configuration, read from `STATEFED_*` environment variables in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import PipelineConfigError
from runtime.config import EnvConfig, setting, settings_group
from runtime.kafka import KafkaClientConfig, KafkaProperties
from runtime.logs import LOG_FORMATS, LOG_LEVELS

__all__ = ["STARTING_OFFSETS", "PipelineConfig"]

STARTING_OFFSETS = ("earliest", "latest")
_MEMORY = re.compile(r"^[1-9][0-9]*[kmgt]?$", re.IGNORECASE)
_LOG_LEVELS = ("ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


@dataclass(frozen=True)
class PipelineConfig(KafkaClientConfig, EnvConfig):
    """Where the pipeline reads and writes, and how its Spark session is sized.

    Input topics are read with Spark's own Kafka source (`format("kafka")`, installed into
    pyspark's jars/ by `make install`); `max_offsets_per_trigger` caps one micro-batch (0 =
    no cap). The connector reads each Kafka partition in a task of its own: grouping them
    into 2 tasks (coalesce) measured no faster on local[2] (batch p50 1.24-1.56 s either
    way, 6 partitions, ~1,400 rows a batch), so there is no setting for it.
    """

    config_error = PipelineConfigError

    bootstrap: str = setting("STATEFED_BOOTSTRAP", "127.0.0.1:9092")
    # librdkafka settings of every Kafka client (runtime.kafka): STATEFED_KAFKA_CONFIG and
    # STATEFED_KAFKA_* variables; `kafka` joins them with the bootstrap servers
    kafka_properties: KafkaProperties = settings_group(KafkaProperties.from_env, KafkaProperties())
    checkpoint_dir: Path = setting("STATEFED_CHECKPOINT_DIR", Path(".statefed/checkpoints"))
    spark_master: str = setting("STATEFED_SPARK_MASTER", "local[2]")
    trigger_ms: int = setting("STATEFED_TRIGGER_MS", 500, low=0)
    # dead letters are for people, not for reads: a slow trigger leaves the 2 cores of
    # local[2] to the view queries (their batches took ~480 ms instead of ~850 ms)
    deadletter_trigger_ms: int = setting("STATEFED_DEADLETTER_TRIGGER_MS", 5000, low=0)
    shuffle_partitions: int = setting("STATEFED_SPARK_SHUFFLE_PARTITIONS", 2, low=1, high=1000)
    driver_memory: str = setting("STATEFED_SPARK_DRIVER_MEMORY", "512m")
    driver_host: str = setting("STATEFED_SPARK_DRIVER_HOST", "127.0.0.1")
    # spark.ui.enabled, unless Spark's configuration sets it; its port is spark.ui.port
    spark_ui: bool = setting("STATEFED_SPARK_UI", False)
    # Spark's own names; any case
    spark_log_level: str = setting("STATEFED_SPARK_LOG_LEVEL", "WARN")
    starting_offsets: str = setting(
        "STATEFED_STARTING_OFFSETS", "earliest", choices=STARTING_OFFSETS
    )
    # 0 = no cap
    max_offsets_per_trigger: int = setting("STATEFED_MAX_OFFSETS_PER_TRIGGER", 1_000_000, low=0)
    # the connector's consumer poll (kafkaConsumer.pollTimeoutMs), and reading statuses back
    read_timeout_ms: int = setting("STATEFED_READ_TIMEOUT_MS", 30_000, low=1)
    delivery_timeout_ms: int = setting("STATEFED_DELIVERY_TIMEOUT_MS", 30_000, low=1)
    # a file rewritten while every query runs, for health checks (pipeline.health); None: none
    health_file: Path | None = setting("STATEFED_PIPELINE_HEALTH_FILE", None, parse=Path)
    health_max_age_ms: int = setting(
        "STATEFED_PIPELINE_HEALTH_MAX_AGE_MS", 30_000, low=1000, high=3_600_000
    )
    # /metrics of the driver (pipeline.metrics) on this address; port 0 = not served
    metrics_host: str = setting("STATEFED_PIPELINE_METRICS_HOST", "127.0.0.1")
    metrics_port: int = setting("STATEFED_PIPELINE_METRICS_PORT", 0, low=0, high=65535)
    # logs (runtime.logs): text or json lines, and the lowest level written
    log_format: str = setting("STATEFED_LOG_FORMAT", "text", parse=str.lower, choices=LOG_FORMATS)
    log_level: str = setting("STATEFED_LOG_LEVEL", "info", parse=str.lower, choices=LOG_LEVELS)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _MEMORY.match(self.driver_memory):
            raise PipelineConfigError(
                "STATEFED_SPARK_DRIVER_MEMORY",
                f"must look like 512m or 2g (JVM heap size), got {self.driver_memory!r}",
            )
        if self.spark_log_level.upper() not in _LOG_LEVELS:
            raise PipelineConfigError(
                "STATEFED_SPARK_LOG_LEVEL",
                f"must be one of {', '.join(_LOG_LEVELS)}, got {self.spark_log_level!r}",
            )
