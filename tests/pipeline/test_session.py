"""Spark settings precedence: Spark's own configuration wins over statefed's defaults,
except the enforced settings; STATEFED_SPARK_UI switches the UI on."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark import SparkConf
from pyspark.sql import SparkSession

from pipeline import PipelineConfig
from pipeline.session import ENFORCED, ROCKSDB_PROVIDER, default_settings, session_settings
from tests.classdata import assert_maps_its_archive

REPO = Path(__file__).resolve().parents[2]


def _conf(settings: dict[str, str] | None = None) -> dict[str, str]:
    """Spark's configuration as `build_session` reads it from a SparkConf."""
    return dict(SparkConf(loadDefaults=False).setAll(list((settings or {}).items())).getAll())


def test_with_nothing_set_by_spark_every_default_and_the_enforced_settings_apply() -> None:
    config = PipelineConfig()
    settings = session_settings(config, _conf(), python="/opt/python")
    assert settings == {**default_settings(config, python="/opt/python"), **ENFORCED}
    assert settings["spark.sql.shuffle.partitions"] == "2"
    assert settings["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    assert settings["spark.sql.session.timeZone"] == "UTC"
    assert settings["spark.ui.enabled"] == "false"
    assert settings["spark.pyspark.python"] == "/opt/python"


def test_a_local_pipelines_scratch_files_go_to_its_checkpoint_directory(tmp_path: Path) -> None:
    local = PipelineConfig(checkpoint_dir=tmp_path / "checkpoints")
    settings = session_settings(local, _conf())
    assert settings["spark.local.dir"] == str(tmp_path / "checkpoints" / "spark-local")
    # on a cluster the executors' own directories are the workers' to set
    cluster = PipelineConfig(checkpoint_dir=tmp_path, spark_master="spark://m:7077")
    assert "spark.local.dir" not in session_settings(cluster, _conf())
    submitted = session_settings(local, _conf({"spark.master": "spark://m:7077"}))
    assert "spark.local.dir" not in submitted
    # a directory of Spark's configuration wins
    given = session_settings(local, _conf({"spark.local.dir": "/var/spark"}))
    assert "spark.local.dir" not in given


def test_what_spark_sets_is_left_alone() -> None:
    spark_conf = _conf(
        {
            "spark.master": "spark://m:7077",
            "spark.app.name": "nightly",
            "spark.sql.shuffle.partitions": "8",
            "spark.ui.enabled": "true",
            "spark.driver.host": "10.0.0.5",
            "spark.pyspark.python": "/opt/venv/bin/python",
        }
    )
    settings = session_settings(PipelineConfig(), spark_conf)
    # the session builder overrides what it is given: these keys must not be among them
    assert not settings.keys() & spark_conf.keys()
    assert settings["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER


def test_the_enforced_settings_replace_the_users_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline.session"):
        settings = session_settings(
            PipelineConfig(), _conf({"spark.sql.session.timeZone": "America/New_York"})
        )
    assert settings["spark.sql.session.timeZone"] == "UTC"
    assert "spark.sql.session.timeZone=America/New_York replaced with UTC" in caplog.text


def test_pysparks_own_launcher_values_are_not_the_users() -> None:
    # a Python program that starts Spark itself gets these from pyspark's launcher
    launched = _conf({"spark.app.name": "pyspark-shell", "spark.ui.showConsoleProgress": "true"})
    settings = session_settings(PipelineConfig(), launched, app_name="statefed-pipeline")
    assert settings["spark.app.name"] == "statefed-pipeline"
    assert settings["spark.ui.showConsoleProgress"] == "false"


@pytest.mark.parametrize(("value", "enabled"), [("true", "true"), ("off", "false"), ("", "false")])
def test_statefed_spark_ui_switches_the_ui(value: str, enabled: str) -> None:
    config = PipelineConfig.from_env({"STATEFED_SPARK_UI": value})
    assert session_settings(config, _conf())["spark.ui.enabled"] == enabled
    # Spark's own setting still wins
    assert "spark.ui.enabled" not in session_settings(config, _conf({"spark.ui.enabled": "true"}))


_PROBE = """
import json, os
from pyspark import SparkContext
from pipeline import PipelineConfig, build_session
spark = build_session(PipelineConfig.from_env(os.environ))
jvm = SparkContext._jvm
args = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
print(json.dumps({
    "conf": dict(spark.sparkContext.getConf().getAll()),
    "timeZone": spark.conf.get("spark.sql.session.timeZone"),
    "jvm": [str(a) for a in args],
    "MASTER": os.environ.get("MASTER"),
}))
spark.stop()
"""


@pytest.mark.timeout(300)
def test_statefed_pipeline_takes_spark_defaults_conf_over_its_own(tmp_path: Path) -> None:
    """`statefed pipeline` starts the driver JVM itself: spark-defaults.conf still wins,
    and the JVM gets statefed's heap and thread stack where it says nothing."""
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.master local[1]\n"
        "spark.sql.shuffle.partitions 3\n"
        "spark.sql.session.timeZone Asia/Tokyo\n"
        "spark.ui.port 0\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("MASTER", "SPARK_SUBMIT_OPTS")},
        "SPARK_CONF_DIR": str(tmp_path),
        "STATEFED_SPARK_MASTER": "local[2]",
        "STATEFED_SPARK_DRIVER_MEMORY": "600m",
        "STATEFED_SPARK_UI": "true",
        "PYTHONPATH": str(REPO),
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-3000:]
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    conf = probe["conf"]
    assert conf["spark.master"] == "local[1]"  # spark-defaults.conf over STATEFED_SPARK_MASTER
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert probe["timeZone"] == "UTC"  # enforced
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.app.name"] == "statefed-pipeline"
    assert {"-Xss16m", "-Xmx600m"} <= set(probe["jvm"])
    assert probe["MASTER"] is None  # what the JVM was started with stays out of the environment


def test_the_driver_jvm_maps_the_class_data_archive_make_install_wrote(
    spark: SparkSession,
) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    assert_maps_its_archive("spark", int(jvm.java.lang.ProcessHandle.current().pid()))
