"""Pipeline configuration, read from `STATEFED_*` environment variables in one place."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pipeline.errors import PipelineConfigError

__all__ = ["SOURCE_FORMATS", "STARTING_OFFSETS", "PipelineConfig"]

SOURCE_FORMATS = ("statefed_kafka", "kafka")
STARTING_OFFSETS = ("earliest", "latest")
_MEMORY = re.compile(r"^[1-9][0-9]*[kmgt]?$", re.IGNORECASE)
_LOG_LEVELS = ("ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")

_T = TypeVar("_T")


@dataclass(frozen=True)
class PipelineConfig:
    """Where the pipeline reads and writes, and how its Spark session is sized.

    `source_format` picks the Kafka source: `statefed_kafka` (the project's Python data
    source, the default) or `kafka` (the official connector, when its jar is on the
    classpath). `max_offsets_per_trigger` caps one micro-batch (0 = no cap).
    """

    bootstrap: str = "127.0.0.1:9092"
    checkpoint_dir: Path = Path(".statefed/checkpoints")
    spark_master: str = "local[2]"
    trigger_ms: int = 500
    # dead letters are for people, not for reads: a slow trigger leaves the 2 cores of
    # local[2] to the view queries (their batches took ~480 ms instead of ~850 ms)
    deadletter_trigger_ms: int = 5000
    shuffle_partitions: int = 2
    driver_memory: str = "512m"
    driver_host: str = "127.0.0.1"
    spark_log_level: str = "WARN"
    source_format: str = "statefed_kafka"
    starting_offsets: str = "earliest"
    read_tasks: int = 2
    max_offsets_per_trigger: int = 1_000_000
    read_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        _check(bool(self.bootstrap.strip()), "STATEFED_BOOTSTRAP", self.bootstrap, "is empty")
        _check(
            bool(self.spark_master.strip()), "STATEFED_SPARK_MASTER", self.spark_master, "is empty"
        )
        _check(self.trigger_ms >= 0, "STATEFED_TRIGGER_MS", self.trigger_ms, "must be >= 0")
        _check(
            self.deadletter_trigger_ms >= 0,
            "STATEFED_DEADLETTER_TRIGGER_MS",
            self.deadletter_trigger_ms,
            "must be >= 0",
        )
        _check(
            1 <= self.shuffle_partitions <= 1000,
            "STATEFED_SPARK_SHUFFLE_PARTITIONS",
            self.shuffle_partitions,
            "must be in 1..1000",
        )
        _check(
            bool(_MEMORY.match(self.driver_memory)),
            "STATEFED_SPARK_DRIVER_MEMORY",
            self.driver_memory,
            "must look like 512m or 2g",
        )
        _check(
            self.spark_log_level.upper() in _LOG_LEVELS,
            "STATEFED_SPARK_LOG_LEVEL",
            self.spark_log_level,
            f"must be one of {', '.join(_LOG_LEVELS)}",
        )
        _check(
            self.source_format in SOURCE_FORMATS,
            "STATEFED_SOURCE_FORMAT",
            self.source_format,
            f"must be one of {', '.join(SOURCE_FORMATS)}",
        )
        _check(
            self.starting_offsets in STARTING_OFFSETS,
            "STATEFED_STARTING_OFFSETS",
            self.starting_offsets,
            f"must be one of {', '.join(STARTING_OFFSETS)}",
        )
        _check(1 <= self.read_tasks <= 64, "STATEFED_READ_TASKS", self.read_tasks, "must be 1..64")
        _check(
            self.max_offsets_per_trigger >= 0,
            "STATEFED_MAX_OFFSETS_PER_TRIGGER",
            self.max_offsets_per_trigger,
            "must be >= 0 (0 = no cap)",
        )
        _check(
            self.read_timeout_ms > 0,
            "STATEFED_READ_TIMEOUT_MS",
            self.read_timeout_ms,
            "must be > 0",
        )
        _check(
            self.delivery_timeout_ms > 0,
            "STATEFED_DELIVERY_TIMEOUT_MS",
            self.delivery_timeout_ms,
            "must be > 0",
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> PipelineConfig:
        """Read every `STATEFED_*` variable the pipeline knows; unset ones keep defaults."""
        d = cls()

        def get(name: str, default: _T, parse: Callable[[str], _T]) -> _T:
            raw = environ.get(name)
            if raw is None or raw == "":
                return default
            try:
                return parse(raw)
            except ValueError as exc:
                raise PipelineConfigError(f"{name}={raw!r} is not valid: {exc}") from exc

        return cls(
            bootstrap=get("STATEFED_BOOTSTRAP", d.bootstrap, str),
            checkpoint_dir=get("STATEFED_CHECKPOINT_DIR", d.checkpoint_dir, Path),
            spark_master=get("STATEFED_SPARK_MASTER", d.spark_master, str),
            trigger_ms=get("STATEFED_TRIGGER_MS", d.trigger_ms, int),
            deadletter_trigger_ms=get(
                "STATEFED_DEADLETTER_TRIGGER_MS", d.deadletter_trigger_ms, int
            ),
            shuffle_partitions=get("STATEFED_SPARK_SHUFFLE_PARTITIONS", d.shuffle_partitions, int),
            driver_memory=get("STATEFED_SPARK_DRIVER_MEMORY", d.driver_memory, str),
            driver_host=get("STATEFED_SPARK_DRIVER_HOST", d.driver_host, str),
            spark_log_level=get("STATEFED_SPARK_LOG_LEVEL", d.spark_log_level, str),
            source_format=get("STATEFED_SOURCE_FORMAT", d.source_format, str),
            starting_offsets=get("STATEFED_STARTING_OFFSETS", d.starting_offsets, str),
            read_tasks=get("STATEFED_READ_TASKS", d.read_tasks, int),
            max_offsets_per_trigger=get(
                "STATEFED_MAX_OFFSETS_PER_TRIGGER", d.max_offsets_per_trigger, int
            ),
            read_timeout_ms=get("STATEFED_READ_TIMEOUT_MS", d.read_timeout_ms, int),
            delivery_timeout_ms=get("STATEFED_DELIVERY_TIMEOUT_MS", d.delivery_timeout_ms, int),
        )


def _check(ok: bool, variable: str, value: object, problem: str) -> None:
    if not ok:
        raise PipelineConfigError(f"{variable}={value!r} {problem}")
