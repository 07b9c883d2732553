"""`python -m tooling.classdata`: write the class-data archives (`runtime.classdata`) of
the local Kafka broker, Spark's driver and the Schema Registry. `make jvm-archives` runs
it once the parts are installed; it takes about a minute.

Each archive is written by its JVM at the exit of a training run of the part, with
`-XX:ArchiveClassesAtExit`, so it holds the classes a real run loads:
- the broker: serves the demo catalogue's topics while the pipeline reads and writes them,
  then is stopped (SIGTERM);
- Spark's driver: `statefed pipeline` on the demo catalogue, until every view has written
  its changelog from records produced here, then stopped (SIGTERM: the driver JVM exits
  once the pipeline's Python process has);
- the Schema Registry: a schema registered and read back through Confluent's API, then
  stopped (SIGTERM).
The runs write into a scratch directory, and an archive replaces the one in place only
once its JVM exited; a failed run names the part and its log, and changes nothing.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from confluent_kafka import Consumer, TopicPartition

from runtime.classdata import PARTS, archive_path, archives_dir
from runtime.environment import environment
from runtime.produce import new_producer, produce_records
from runtime.topics import ensure_topics, statefed_topics
from schema.catalogue import CATALOGUE
from tooling.broker import KafkaBroker
from tooling.config import ToolingConfig
from tooling.demodata import trickle
from tooling.processes import wait_until
from tooling.registry import SchemaRegistry

__all__ = ["ArchiveError", "main", "train"]

PARTITIONS = 2
PIPELINE_TIMEOUT_S = 240.0  # start-up, then a batch of every view on a busy machine
EXIT_TIMEOUT_S = 120.0  # a JVM writing ~200 MB of archive before it exits
_SCHEMA = '{"type": "record", "name": "Trained", "fields": [{"name": "n", "type": "long"}]}'


class ArchiveError(RuntimeError):
    """A training run did not end with its archive written; the message names the part."""


def train(directory: Path) -> list[Path]:
    """Write every part's archive into `directory`; returns their paths."""
    scratch = directory / "training"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    # no archive is mapped while one is written: the runs read from an empty directory
    with environment({"STATEFED_JVM_ARCHIVES": str(scratch / "none")}):
        broker = KafkaBroker(log_path=scratch / "broker.log", data_dir=scratch / "broker")
        with environment({"STATEFED_JVM_OPTIONS": _dump_options("kafka", scratch)}):
            broker.start()
        try:
            _train_spark(broker.bootstrap, scratch)
        finally:
            broker.stop(timeout_s=EXIT_TIMEOUT_S)
        with environment({"STATEFED_JVM_OPTIONS": _dump_options("registry", scratch)}):
            _train_registry(scratch)
    written = [_move_into_place(part, scratch, directory) for part in PARTS]
    shutil.rmtree(scratch, ignore_errors=True)
    return written


def _dump_options(part: str, scratch: Path) -> str:
    user = os.environ.get("STATEFED_JVM_OPTIONS", "")
    return f"{user} -XX:ArchiveClassesAtExit={archive_path(part, scratch)}".strip()


def _train_spark(bootstrap: str, scratch: Path) -> None:
    """`statefed pipeline` on the demo catalogue until every changelog has records."""
    ensure_topics(bootstrap, statefed_topics(PARTITIONS, CATALOGUE))
    spark_options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    env = {
        **os.environ,
        "STATEFED_BOOTSTRAP": bootstrap,
        "STATEFED_CHECKPOINT_DIR": str(scratch / "checkpoints"),
        "SPARK_SUBMIT_OPTS": f"{spark_options} -XX:ArchiveClassesAtExit="
        f"{archive_path('spark', scratch)}".strip(),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("STATEFED_CATALOGUE", None)  # the demo catalogue's queries, whatever is set
    log_path = scratch / "pipeline.log"
    with open(log_path, "wb") as log:
        command = [sys.executable, "-m", "tooling.cli", "pipeline"]
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            _feed_until_written(bootstrap, process, log_path)
        finally:
            _stop_group(process, log_path)


def _feed_until_written(bootstrap: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Produce the demo's trickle every second until every view's changelog has records."""
    rng = random.Random(7)
    tick = 0
    unwritten = {view.changelog_topic for view in CATALOGUE}
    producer = new_producer(bootstrap)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "statefed-classdata"})

    def every_changelog_written() -> bool:
        nonlocal tick
        if process.poll() is not None:
            raise ArchiveError(f"the pipeline exited with {process.returncode}: see {log}")
        for topic, records in trickle(tick, rng, int(time.time() * 1000)).items():
            produce_records(bootstrap, topic, records, producer)
        tick += 1
        unwritten.difference_update({t for t in unwritten if _has_records(consumer, t)})
        return not unwritten

    try:
        wait_until(every_changelog_written, PIPELINE_TIMEOUT_S, "every view's changelog", 1.0)
    finally:
        consumer.close()


def _has_records(consumer: Consumer, topic: str) -> bool:
    partitions = (TopicPartition(topic, p) for p in range(PARTITIONS))
    return any(consumer.get_watermark_offsets(tp, timeout=5.0)[1] > 0 for tp in partitions)


def _stop_group(process: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM the pipeline, then wait for its whole process group: the driver JVM exits
    after it, and writes its archive then."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(EXIT_TIMEOUT_S)
        wait_until(lambda: not _group_alive(process.pid), EXIT_TIMEOUT_S, "the driver JVM's exit")
    except (subprocess.TimeoutExpired, TimeoutError) as exc:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise ArchiveError(f"the pipeline did not exit: {exc} (its log: {log})") from None


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _train_registry(scratch: Path) -> None:
    with SchemaRegistry(scratch / "registry") as registry:
        subject = f"{registry.url}/subjects/statefed-classdata-value/versions"
        body = {"schema": _SCHEMA}
        httpx.post(subject, json=body, timeout=30.0, trust_env=False).raise_for_status()
        httpx.get(f"{subject}/latest", timeout=30.0, trust_env=False).raise_for_status()
        registry.stop(timeout_s=EXIT_TIMEOUT_S)


def _move_into_place(part: str, scratch: Path, directory: Path) -> Path:
    written, target = archive_path(part, scratch), archive_path(part, directory)
    if not written.is_file() or written.stat().st_size == 0:
        raise ArchiveError(
            f"the {part} JVM exited without writing its archive {written}: see the logs in "
            f"{scratch}"
        )
    os.replace(written, target)
    return target


def main() -> None:
    directory = archives_dir(ToolingConfig.from_env(os.environ).jvm_archives)
    started = time.monotonic()
    try:
        written = train(directory)
    except ArchiveError as exc:
        sys.exit(f"statefed jvm-archives: {exc}")
    sizes = ", ".join(f"{p.name} {p.stat().st_size // 2**20} MB" for p in written)
    print(f"class-data archives in {directory} ({sizes}), {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
