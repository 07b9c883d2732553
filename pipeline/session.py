"""The Spark session the pipeline runs in: statefed's settings beneath the user's Spark ones.

Spark's own configuration wins (spark-defaults.conf, `--conf` and the flags of
spark-submit or of PYSPARK_SUBMIT_ARGS): statefed fills in only the keys it leaves unset,
with the values measured to work on 2 cores. The exception is `ENFORCED`, the settings the
pipeline's results depend on, applied over the user's with a warning.

Under spark-submit the driver JVM already runs. Otherwise (`statefed pipeline`) it starts
here, and what must be known when a JVM starts (master, heap, thread stack, local
address) goes to spark-submit as environment variables, which it reads with the lowest
precedence, so spark-defaults.conf still wins.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from pipeline.config import PipelineConfig
from pipeline.jvmlogs import log4j_options
from runtime.classdata import archive_options
from runtime.environment import environment
from runtime.hosts import is_loopback

__all__ = [
    "ENFORCED",
    "ROCKSDB_PROVIDER",
    "build_session",
    "clear_scratch",
    "default_settings",
    "scratch_dir",
    "session_settings",
    "spark_master",
]

log = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# The settings the results depend on, whatever Spark's configuration says. The session
# zone: Spark's default is the JVM's, i.e. the driver host's. Today's plans convert no
# timestamp to local time (event times are epoch ms, windows are aligned on the epoch), and
# UTC keeps it so for any plan (a new view kind casting a timestamp to a date or a string
# would otherwise count differently on a driver in another zone); statefed shows no local
# time, so this takes nothing from the user.
ENFORCED = {"spark.sql.session.timeZone": "UTC"}

# What pyspark's launcher sets when a Python program starts Spark itself (as it does for
# a shell): no choice of the user's, so statefed's values replace them.
_LAUNCHER_VALUES = {"spark.app.name": "pyspark-shell", "spark.ui.showConsoleProgress": "true"}
# -Xss16m: query.stop() overflows the default thread stack of the driver
_STACK = "-Xss16m"


# the task slots of statefed's local Spark besides those of the Real-Time Mode queries
LOCAL_SLOTS = 2
# Spark's checkpoint file manager on Hadoop's FileSystem API (see `default_settings`)
FILE_SYSTEM_CHECKPOINTS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
# generated classes Spark keeps compiled: about 16 a query, so room for 60 queries
CODEGEN_CACHE_ENTRIES = 1000
# Spark's local directory of a local pipeline, in its checkpoint directory (`scratch_dir`)
SCRATCH = "spark-local"


def spark_master(config: PipelineConfig, realtime_slots: int = 0) -> str:
    """`STATEFED_SPARK_MASTER`, else local with `LOCAL_SLOTS` task slots beside the
    `realtime_slots` the Real-Time Mode queries need (`pipeline.job.session_slots`)."""
    return config.spark_master or f"local[{LOCAL_SLOTS + realtime_slots}]"


def default_settings(
    config: PipelineConfig,
    app_name: str = "statefed-pipeline",
    python: str = sys.executable,
    realtime_slots: int = 0,
) -> dict[str, str]:
    """statefed's value of each Spark setting it sets; Spark's configuration wins over them.

    None of these changes results: the state store provider and the shuffle partitions
    of a query are kept in its checkpoint, which Spark follows over the session's values.
    """
    local = {} if config.spark_master else _local_settings(config)
    return local | {
        "spark.master": spark_master(config, realtime_slots),
        "spark.app.name": app_name,
        "spark.driver.host": config.driver_host,
        "spark.driver.bindAddress": config.driver_host,
        # 200 shuffle partitions cost ~15 s of freshness per batch on 2 cores
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # the compiled classes Spark keeps (100 by default): the demo's nine queries use
        # about 150, and at 100 every micro-batch compiled some again (10% of Spark's CPU)
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        # checkpoint files through Hadoop's FileSystem API, not FileContext's: on a local
        # file system (STATEFED_CHECKPOINT_DIR is a path) both rename atomically, but
        # FileContext's rename forks `readlink` twice a file (Hadoop without its native
        # library): 60 processes a second in the demo, 300 ms of each micro-batch's commits
        "spark.sql.streaming.checkpointFileManagerClass": FILE_SYSTEM_CHECKPOINTS,
        # Real-Time Mode checkpoints no more often than this (Spark's default: 5 s)
        "spark.sql.streaming.realTimeMode.minBatchDuration": f"{config.realtime_checkpoint_ms}ms",
        "spark.ui.enabled": "true" if config.spark_ui else "false",
        "spark.ui.showConsoleProgress": "false",
        # Python workers must run an interpreter with statefed's packages
        "spark.pyspark.python": python,
    }


def _local_settings(config: PipelineConfig) -> dict[str, str]:
    """Of statefed's local Spark: batch work (a DataFrame of local rows) keeps the
    parallelism of `LOCAL_SLOTS`, whatever slots the Real-Time Mode queries add (Spark's
    default is one partition per slot: 90 tiny tasks in the pipeline tests' session); its
    scratch files go to `scratch_dir`."""
    return {
        "spark.default.parallelism": str(LOCAL_SLOTS),
        "spark.local.dir": str(scratch_dir(config)),
    }


def scratch_dir(config: PipelineConfig) -> Path:
    """Where a local pipeline's Spark keeps its scratch files (`spark.local.dir`): the
    working copies of its RocksDB state stores, as large as the state, and its block
    manager's files. Spark's default, the system's temporary directory, kept the state
    stores' copies after every run, a clean stop included: one directory of 25 MB and more
    a run, and as much as the state a run of a large one. In the checkpoint directory,
    which no other pipeline may share, a run empties what an earlier one left
    (`clear_scratch`)."""
    return (config.checkpoint_dir / SCRATCH).absolute()


def _fresh_scratch(config: PipelineConfig) -> Path:
    """`scratch_dir`, emptied of what a run killed before its Spark stopped left there.
    The driver JVM statefed starts takes it as its temporary directory too: Spark's
    launcher left an empty directory a run in the system's, and its Kafka clients their
    native libraries."""
    clear_scratch(config)
    scratch = scratch_dir(config)
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch


def clear_scratch(config: PipelineConfig) -> None:
    """Remove `scratch_dir` and what is in it (before `statefed pipeline` starts its
    driver JVM, and once the pipeline's Spark has stopped); the state is in the
    checkpoints."""
    if not config.spark_master:
        shutil.rmtree(scratch_dir(config), ignore_errors=True)


def session_settings(
    config: PipelineConfig,
    spark_conf: Mapping[str, str],
    app_name: str = "statefed-pipeline",
    python: str = sys.executable,
    realtime_slots: int = 0,
) -> dict[str, str]:
    """The settings to give the session builder (which overrides whatever it is given):
    statefed's defaults for the keys `spark_conf` (Spark's configuration) leaves unset,
    and `ENFORCED`."""
    users = {k: v for k, v in spark_conf.items() if _LAUNCHER_VALUES.get(k) != v}
    defaults = default_settings(config, app_name, python, realtime_slots)
    if not users.get("spark.master", defaults["spark.master"]).startswith("local"):
        # spark-submit to a cluster: the scratch directories are its workers' to set
        defaults.pop("spark.local.dir", None)
    for key in sorted(defaults.keys() & users.keys()):
        if users[key] != defaults[key]:
            log.info("Spark setting %s=%s kept (statefed's: %s)", key, users[key], defaults[key])
    for key, value in ENFORCED.items():
        if key in users and users[key] != value:
            log.warning(
                "Spark setting %s=%s replaced with %s: the pipeline's results depend on it",
                key,
                users[key],
                value,
            )
    return {**{k: v for k, v in defaults.items() if k not in users}, **ENFORCED}


def build_session(
    config: PipelineConfig, app_name: str = "statefed-pipeline", realtime_slots: int = 0
) -> SparkSession:
    """A session on Spark's configured master, else `spark_master(config, realtime_slots)`;
    takes 8-22 s on a cold JVM."""
    # Python code on executors runs in workers started from PYSPARK_PYTHON (default:
    # `python3` on PATH, which may lack pyarrow): use this interpreter unless told otherwise
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _start_driver_jvm(config, realtime_slots)
    spark_conf = dict(SparkConf().getAll())  # what the JVM was started with
    settings = session_settings(config, spark_conf, app_name, python, realtime_slots)
    _warn_if_unreachable({**spark_conf, **settings})
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.spark_log_level.upper())
    return spark


def _start_driver_jvm(config: PipelineConfig, realtime_slots: int) -> None:
    """Connect to the driver JVM (spark-submit's, or one started before), or start it."""
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        SparkContext._ensure_initialized()
        _warn_without_stack()
        return
    # where unset (what the user's environment says wins), restored afterwards: a child
    # process of this one (a test's) must not inherit a master it did not ask for
    launch = {
        "MASTER": spark_master(config, realtime_slots),
        "SPARK_DRIVER_MEMORY": config.driver_memory,
        # otherwise Spark resolves the host name and may pick a non-loopback interface
        "SPARK_LOCAL_IP": config.driver_host,
    }
    launch = {key: os.environ.get(key, value) for key, value in launch.items()}
    # the stack, the class-data archive and the log format before the user's options
    # (a later -Xss or -Dlog4j2.configurationFile wins)
    options = [_STACK, *archive_options("spark", config.jvm_archives)]
    if not config.spark_master:
        options.append(f"-Djava.io.tmpdir={_fresh_scratch(config)}")
    options += log4j_options(config.log_format, os.environ)
    options.append(os.environ.get("SPARK_SUBMIT_OPTS", ""))
    launch["SPARK_SUBMIT_OPTS"] = " ".join(options).strip()
    with environment(launch):
        SparkContext._ensure_initialized()


def _warn_without_stack() -> None:
    jvm = SparkContext._jvm
    assert jvm is not None
    args = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    if not any(str(arg).startswith("-Xss") for arg in args):
        log.warning(
            "the driver JVM runs with the default thread stack, which stopping the queries "
            "can overflow: start it with %s (spark-submit --driver-java-options=%s)",
            _STACK,
            _STACK,
        )


def _warn_if_unreachable(settings: Mapping[str, str]) -> None:
    """Executors on other hosts cannot connect back to a driver on a loopback address."""
    master, host = settings.get("spark.master", ""), settings.get("spark.driver.host", "")
    if not master.startswith("spark://") or not is_loopback(host):
        return
    addresses = master.removeprefix("spark://").split(",")
    if not all(is_loopback(a.rsplit(":", 1)[0]) for a in addresses):
        log.warning(
            "the driver listens on %s, which executors on other hosts cannot reach: set "
            "STATEFED_SPARK_DRIVER_HOST (or spark.driver.host) to an address they can",
            host,
        )
