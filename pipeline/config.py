"""Pipeline configuration, read from `STATEFED_*` environment variables in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import PipelineConfigError
from pipeline.modes import MODES
from runtime import shared_settings as shared
from runtime.config import EnvConfig, setting, settings_group
from runtime.kafka import KafkaClientConfig, KafkaProperties

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

    bootstrap: str = shared.bootstrap()
    registry_url: str = shared.registry_url()
    # librdkafka settings of every Kafka client (runtime.kafka): STATEFED_KAFKA_CONFIG and
    # STATEFED_KAFKA_* variables; `kafka` joins them with the bootstrap servers
    kafka_properties: KafkaProperties = settings_group(KafkaProperties.from_env, KafkaProperties())
    jvm_archives: Path | None = shared.jvm_archives()  # Spark's driver maps its classes in
    checkpoint_dir: Path = setting(
        "STATEFED_CHECKPOINT_DIR",
        Path(".statefed/checkpoints"),
        doc=(
            "Spark checkpoints: `<dir>/<view>/`, `<dir>/deadletter/<topic>/`; on "
            "a cluster, one directory every executor sees at the same path. A local "
            "Spark keeps its scratch files in `<dir>/spark-local/` (the working copies of "
            "its state stores, as large as the state), emptied at each start and stop. "
            "One pipeline at a time: a second on the same directory is refused"
        ),
    )
    spark_master: str | None = setting(
        "STATEFED_SPARK_MASTER",
        None,
        parse=str,
        shown_default="`local[N]`",
        doc=(
            "Spark master URL (`spark://host:7077` for a standalone cluster); by "
            "default `local[N]`, N = 2, and with Real-Time Mode queries the task slots they "
            "hold (one per input and shuffle partition of each) and the tasks of the "
            "micro-batch queries beside them; "
            "Spark's own configuration wins over this and the other Spark "
            "variables (see [The pipeline on a Spark "
            "cluster](operations.md#the-pipeline-on-a-spark-cluster))"
        ),
    )
    # micro_batch until a read with `atLeast` need not wait for a Real-Time Mode
    # checkpoint (5-11 s measured on 2 cores), and for the idle CPU it costs there
    pipeline_mode: str = setting(
        "STATEFED_PIPELINE_MODE",
        "micro_batch",
        choices=MODES,
        doc=(
            "how the views whose `pipeline_mode` is `auto` run: `real_time` (Spark's "
            "Real-Time Mode where it can run the view, micro-batches elsewhere) or "
            "`micro_batch` (see [Real-Time Mode](operations.md#real-time-mode))"
        ),
    )
    trigger_ms: int = setting(
        "STATEFED_TRIGGER_MS", 500, low=0, doc="micro-batch trigger interval of the view queries"
    )
    realtime_checkpoint_ms: int = setting(
        "STATEFED_REALTIME_CHECKPOINT_MS",
        5000,
        low=1000,
        doc=(
            "how often the first Real-Time Mode query (in catalogue order) checkpoints, "
            "and so publishes its status; each next one a little less often, up to 1.5x "
            "this, so that their checkpoints do not stall them together: an `atLeast` "
            "read of a view waits up to its query's interval"
        ),
    )
    # dead letters are for people, not for reads: a slow trigger leaves the 2 cores of
    # local[2] to the view queries (their batches took ~480 ms instead of ~850 ms)
    deadletter_trigger_ms: int = setting(
        "STATEFED_DEADLETTER_TRIGGER_MS",
        5000,
        low=0,
        doc=(
            "trigger interval of the dead-letter queries (slower, to leave the cores to the views)"
        ),
    )
    max_ahead_ms: int = shared.event_time_max_ahead_ms()
    shuffle_partitions: int = setting(
        "STATEFED_SPARK_SHUFFLE_PARTITIONS",
        2,
        low=1,
        high=1000,
        doc="`spark.sql.shuffle.partitions` (1-2 is best on a small machine)",
    )
    driver_memory: str = setting(
        "STATEFED_SPARK_DRIVER_MEMORY",
        "512m",
        doc=(
            "driver heap of `statefed pipeline`, as the JVM takes it (`512m`, "
            "`2g`; with spark-submit: `--driver-memory`)"
        ),
    )
    driver_host: str = setting(
        "STATEFED_SPARK_DRIVER_HOST",
        "127.0.0.1",
        doc=(
            "address the driver binds to and executors connect back to: on a "
            "cluster, one they can reach"
        ),
    )
    spark_ui: bool = setting(
        "STATEFED_SPARK_UI",
        False,
        doc=(
            "serve Spark's web UI (`spark.ui.enabled`; its port is Spark's "
            "`spark.ui.port`, 4040 by default)"
        ),
    )
    spark_log_level: str = setting(
        "STATEFED_SPARK_LOG_LEVEL",
        "WARN",
        doc=(
            "Spark's log level: `ALL`, `DEBUG`, `INFO`, `WARN`, `ERROR`, `FATAL` or `OFF`, any case"
        ),
    )
    starting_offsets: str = setting(
        "STATEFED_STARTING_OFFSETS",
        "earliest",
        choices=STARTING_OFFSETS,
        doc=(
            "where a query with no checkpoint starts (later, input records "
            "deleted before they were read fail the query: nothing is skipped "
            "silently)"
        ),
    )
    max_offsets_per_trigger: int = setting(
        "STATEFED_MAX_OFFSETS_PER_TRIGGER",
        1_000_000,
        low=0,
        doc="cap on records per micro-batch (0 = none)",
    )
    read_timeout_ms: int = setting(
        "STATEFED_READ_TIMEOUT_MS",
        30_000,
        low=1,
        doc="Kafka read deadline (the connector's consumer poll, reading statuses back)",
    )
    delivery_timeout_ms: int = setting(
        "STATEFED_DELIVERY_TIMEOUT_MS",
        30_000,
        low=1,
        doc="Kafka produce deadline (changelogs, status, dead letters)",
    )
    health_file: Path | None = setting(
        "STATEFED_PIPELINE_HEALTH_FILE",
        None,
        parse=Path,
        doc=(
            "a file the pipeline rewrites about twice a second while every query "
            "runs, and removes when it starts, restarts its queries or stops; "
            "`statefed pipeline --check-health` exits 0 only while it is fresh "
            "(container health checks)"
        ),
    )
    health_max_age_ms: int = setting(
        "STATEFED_PIPELINE_HEALTH_MAX_AGE_MS",
        30_000,
        low=1000,
        high=3_600_000,
        doc="how old that file may be and still count as healthy",
    )
    metrics_host: str = setting(
        "STATEFED_PIPELINE_METRICS_HOST",
        "127.0.0.1",
        doc="address the pipeline's driver serves Prometheus `/metrics` on",
    )
    metrics_port: int = setting(
        "STATEFED_PIPELINE_METRICS_PORT",
        0,
        low=0,
        high=65535,
        doc=(
            "port of the driver's `/metrics` (0 = not served; see [Metrics and "
            "logs](operations.md#metrics-and-logs))"
        ),
        shown_default="`0` (off)",
    )
    # logs (runtime.logs): text or json lines, and the lowest level written
    log_format: str = shared.log_format()
    log_level: str = shared.log_level()
    # read only when STATEFED_PIPELINE_METRICS_PORT is set: /metrics then needs its token
    metrics_token_file: Path | None = shared.metrics_token_file()

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
