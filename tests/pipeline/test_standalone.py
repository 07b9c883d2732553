"""The pipeline on a Spark standalone cluster, started with spark-submit and statefed's
application file: counts exact, then exact again after the worker is SIGKILLed mid-stream
(its executor lost) and a new one joins, and after the driver is killed and resubmitted.
The user's `--conf` settings win over statefed's, except the enforced ones."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import psutil
import pytest

from pipeline.session import ROCKSDB_PROVIDER
from runtime.topics import ensure_topics, statefed_topics
from tests.pipeline.standalone import HOST, StandaloneSpark, get_json, logged_port
from tests.pipeline.standalone_views import CATALOGUE, SPEC, STANDALONE_WORDS
from tests.pipeline.support import PARTITIONS, ChangelogReader, produce
from tooling.broker import KafkaBroker
from tooling.processes import ManagedProcess, wait_until

READY = "statefed pipeline: ready"


class Truth:
    """The words produced so far, counted."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.counts: Counter[str] = Counter()
        self._batches = 0

    def produce(self, records: int = 240, keys: int = 17) -> None:
        self._batches += 1
        words = [f"w{(self._batches * 7 + i) % keys}" for i in range(records)]
        produce(self.bootstrap, STANDALONE_WORDS.topic, (w.encode() for w in words))
        self.counts.update(words)


def _submit(cluster: StandaloneSpark, broker: KafkaBroker, base: Path) -> ManagedProcess:
    options = [
        *("--name", "statefed-pipeline", "--driver-memory", "512m"),
        "--driver-java-options=-Xss16m",
        *("--executor-memory", "512m", "--total-executor-cores", "1"),
        *("--conf", "spark.ui.port=0"),  # any free port; read from the driver's log
        # the user's setting wins over statefed's default (2)
        *("--conf", "spark.sql.shuffle.partitions=1"),
        # statefed enforces UTC over it
        *("--conf", "spark.sql.session.timeZone=America/New_York"),
    ]
    env = {
        "STATEFED_BOOTSTRAP": broker.bootstrap,
        "STATEFED_CATALOGUE": SPEC,
        "STATEFED_CHECKPOINT_DIR": str(base / "checkpoints"),
        "STATEFED_TRIGGER_MS": "200",
        "STATEFED_SPARK_UI": "true",
    }
    driver = cluster.submit(options, env)
    driver.wait_for_log(READY, 300)
    return driver


def _spark_properties(ui_port: int) -> dict[str, str]:
    """The application's Spark properties, from the driver's UI (STATEFED_SPARK_UI)."""
    api = f"http://{HOST}:{ui_port}/api/v1/applications"
    app = get_json(api)[0]["id"]
    return dict(get_json(f"{api}/{app}/environment")["sparkProperties"])


def _stop_cleanly(driver: ManagedProcess) -> None:
    """SIGTERM to the Python driver (spark-submit's child) stops the queries and Spark, and
    spark-submit exits 0; a SIGTERM to spark-submit itself would end its JVM at once."""
    assert driver.pid is not None
    children = psutil.Process(driver.pid).children()  # also Python workers of the driver's
    drivers = [p for p in children if any(a.endswith("sparkapp.py") for a in _cmdline(p))]
    assert drivers, f"no Python driver under spark-submit: {[_cmdline(p) for p in children]}"
    # a process forked from the driver shows its command line too (a clean-clone run found
    # two): the driver is the oldest
    python = min(drivers, key=_started)
    python.terminate()
    driver.wait_for_log("pipeline stopped", 120)
    wait_until(lambda: not driver.running(), 60, "spark-submit to exit")
    assert driver.returncode == 0, driver.log_tail()


def _started(process: psutil.Process) -> float:
    try:
        return float(process.create_time())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return float("inf")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return []  # a child that ended already (a Python worker the driver started)


@pytest.mark.timeout(900)
def test_counts_stay_exact_through_worker_and_driver_loss(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, CATALOGUE))
    truth = Truth(broker.bootstrap)
    changelog = ChangelogReader(broker.bootstrap, STANDALONE_WORDS.changelog_topic)
    try:
        with StandaloneSpark(tmp_path, os.environ) as cluster:
            cluster.start_master()
            worker = cluster.start_worker()
            driver = _submit(cluster, broker, tmp_path)

            properties = _spark_properties(logged_port(driver, "SparkUI", 30))
            assert properties["spark.sql.shuffle.partitions"] == "1"
            assert properties["spark.sql.session.timeZone"] == "UTC"
            assert properties["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
            assert properties["spark.master"] == cluster.url

            truth.produce()
            changelog.wait_for(truth.counts, 180)

            # the worker dies with its executor while a batch is in flight
            truth.produce()
            worker.kill()
            cluster.start_worker()
            truth.produce()
            changelog.wait_for(truth.counts, 240)

            # the driver dies while a batch is in flight; resubmitted, it resumes from the
            # checkpoints
            truth.produce()
            driver.kill()
            driver = _submit(cluster, broker, tmp_path)
            truth.produce()
            changelog.wait_for(truth.counts, 240)
            _stop_cleanly(driver)

        # replays after both losses rewrote the same absolute counts: none ever overshot
        assert changelog.highest == truth.counts
        assert changelog.misplaced == []
    finally:
        changelog.close()
