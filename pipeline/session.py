"""The Spark session the pipeline runs in, with the settings measured to work on 2 cores."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from pipeline.config import PipelineConfig

__all__ = ["ROCKSDB_PROVIDER", "build_session", "session_settings"]

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def session_settings(config: PipelineConfig) -> dict[str, str]:
    """Every Spark setting the pipeline relies on."""
    return {
        "spark.driver.memory": config.driver_memory,
        # query.stop() overflows the default thread stack
        "spark.driver.extraJavaOptions": "-Xss16m",
        "spark.driver.host": config.driver_host,
        "spark.driver.bindAddress": config.driver_host,
        "spark.sql.session.timeZone": "UTC",
        # 200 shuffle partitions cost ~15 s of freshness per batch on 2 cores
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Python workers must see the same interpreter (and packages) as the driver
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }


def build_session(config: PipelineConfig, app_name: str = "statefed-pipeline") -> SparkSession:
    """A session on `config.spark_master`; takes 8-22 s on a cold JVM."""
    # Python data sources run in workers started from PYSPARK_PYTHON (default: `python3`
    # on PATH, which may lack pyarrow): use this interpreter unless told otherwise
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # otherwise Spark resolves the host name and may pick a non-loopback interface
    os.environ.setdefault("SPARK_LOCAL_IP", config.driver_host)
    builder = SparkSession.builder.master(config.spark_master).appName(app_name)
    for key, value in session_settings(config).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.spark_log_level.upper())
    return spark
