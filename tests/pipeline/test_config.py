"""PipelineConfig: defaults, parsing from the environment, errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import PipelineConfig, PipelineConfigError


def test_defaults_match_the_architecture() -> None:
    config = PipelineConfig.from_env({})
    assert config.bootstrap == "127.0.0.1:9092"
    assert config.checkpoint_dir == Path(".statefed/checkpoints")
    assert config.spark_master is None  # local[N], N for the Real-Time Mode queries
    assert config.pipeline_mode == "micro_batch"
    assert config.realtime_checkpoint_ms == 5000
    assert config.shuffle_partitions == 2
    assert config.driver_memory == "512m"
    assert config.max_offsets_per_trigger == 1_000_000
    assert config.starting_offsets == "earliest"
    assert config.spark_ui is False


def test_every_variable_is_read() -> None:
    config = PipelineConfig.from_env(
        {
            "STATEFED_BOOTSTRAP": "10.0.0.1:9093",
            "STATEFED_CHECKPOINT_DIR": "/var/lib/statefed/cp",
            "STATEFED_SPARK_MASTER": "spark://master:7077",
            "STATEFED_TRIGGER_MS": "250",
            "STATEFED_DEADLETTER_TRIGGER_MS": "750",
            "STATEFED_SPARK_SHUFFLE_PARTITIONS": "1",
            "STATEFED_SPARK_DRIVER_MEMORY": "2g",
            "STATEFED_SPARK_DRIVER_HOST": "10.0.0.5",
            "STATEFED_SPARK_UI": "on",
            "STATEFED_SPARK_LOG_LEVEL": "error",
            "STATEFED_STARTING_OFFSETS": "latest",
            "STATEFED_MAX_OFFSETS_PER_TRIGGER": "0",
            "STATEFED_READ_TIMEOUT_MS": "1000",
            "STATEFED_DELIVERY_TIMEOUT_MS": "2000",
            "UNRELATED": "x",
        }
    )
    assert config == PipelineConfig(
        bootstrap="10.0.0.1:9093",
        checkpoint_dir=Path("/var/lib/statefed/cp"),
        spark_master="spark://master:7077",
        trigger_ms=250,
        deadletter_trigger_ms=750,
        shuffle_partitions=1,
        driver_memory="2g",
        driver_host="10.0.0.5",
        spark_ui=True,
        spark_log_level="error",
        starting_offsets="latest",
        max_offsets_per_trigger=0,
        read_timeout_ms=1000,
        delivery_timeout_ms=2000,
    )


def test_empty_values_keep_the_default() -> None:
    assert PipelineConfig.from_env({"STATEFED_TRIGGER_MS": ""}).trigger_ms == 500


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("STATEFED_TRIGGER_MS", "soon"),
        ("STATEFED_TRIGGER_MS", "-1"),
        ("STATEFED_DEADLETTER_TRIGGER_MS", "-1"),
        ("STATEFED_SPARK_SHUFFLE_PARTITIONS", "0"),
        ("STATEFED_SPARK_DRIVER_MEMORY", "lots"),
        ("STATEFED_SPARK_LOG_LEVEL", "loud"),
        ("STATEFED_SPARK_UI", "maybe"),
        ("STATEFED_STARTING_OFFSETS", "yesterday"),
        ("STATEFED_MAX_OFFSETS_PER_TRIGGER", "-5"),
        ("STATEFED_BOOTSTRAP", "  "),
    ],
)
def test_invalid_values_are_rejected_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(PipelineConfigError, match=variable):
        PipelineConfig.from_env({variable: value})


def test_config_is_frozen() -> None:
    config = PipelineConfig()
    with pytest.raises(AttributeError):
        config.trigger_ms = 1  # type: ignore[misc]
