"""Kafka's real Java producer, for tests that must see where it puts a key.

statefed places a key with `schema.keytypes`; whether that is where Kafka's Java producer
puts it can only be shown by the producer itself. `tests/java/KeyProducer.java` writes
records keyed by one key type's Java serializer with the default partitioner (the edge
cases of the type first, then seeded random keys; each value is the key's Java text).
Here it is compiled, run (one process per topic, all at once, each owned by its handle and
killed if it outlives the deadline or the test fails) and what it wrote is read back in
one consumer pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from schema import KeyType, RecordKey
from tooling.broker import kafka_jars

__all__ = ["JAVA_TIMEOUT_S", "SOURCE", "Record", "compile_key_producer", "produce", "read_all"]

SOURCE = Path(__file__).parent / "java" / "KeyProducer.java"
JAVA_TIMEOUT_S = 120.0
READ_TIMEOUT_S = 60.0
_OUTPUT_SHOWN = 3000  # characters of a failed tool's output a failure message quotes
_Running = dict[str, tuple[subprocess.Popen[bytes], Path]]


@dataclass(frozen=True)
class Record:
    """One record as read back: the key's bytes, the value (the key's Java text) and the
    partition Kafka's Java producer put it on."""

    key: bytes
    value: str
    partition: int


def _tool(name: str) -> str:
    """`name` from the PATH; running KeyProducer needs the JDK (javac), not only a JRE."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"no `{name}` on the PATH: install a JDK 17 (openjdk-17-jdk-headless)")
    return found


def compile_key_producer(classes: Path) -> None:
    """Compile KeyProducer.java into `classes` against the kafka-clients and Jackson jars
    `make kafka` fetched (those alone: javac reads less than with every jar of the broker)."""
    (clients,) = kafka_jars().glob("kafka-clients-*.jar")
    jackson = sorted(kafka_jars().glob("jackson-*.jar"))
    classpath = os.pathsep.join(str(jar) for jar in (clients, *jackson))
    command = [_tool("javac"), "--release", "17", "-encoding", "UTF-8"]  # not the locale's
    command += ["-d", str(classes), "-cp", classpath, str(SOURCE)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=JAVA_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"javac {SOURCE.name} did not finish in {JAVA_TIMEOUT_S} s")
    if done.returncode != 0:
        output = done.stderr[-_OUTPUT_SHOWN:]
        pytest.fail(f"javac {SOURCE.name} exited with {done.returncode}: {output}")


def _command(
    classes: Path, bootstrap: str, topic: str, key_type: KeyType | RecordKey, count: int
) -> list[str]:
    """KeyProducer's command for one topic; its classpath is Kafka's jars and their deps.
    A small heap and the quick compiler only: each run is short, most of it JVM start-up."""
    jvm = [_tool("java"), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    classpath = f"{classes}{os.pathsep}{kafka_jars()}/*"
    arguments = [bootstrap, topic, key_type.value, str(count)]
    return [*jvm, "-cp", classpath, "KeyProducer", *arguments]


def produce(
    classes: Path,
    bootstrap: str,
    topics: Mapping[str, KeyType | RecordKey],
    count: int,
    timeout_s: float = JAVA_TIMEOUT_S,
) -> None:
    """Write `count` keys of its key type into each of `topics` with KeyProducer (compiled
    into `classes`), one process per topic, all at once (their start-ups overlap). Output
    goes to a file per topic in `classes`, so no full pipe can stall a producer."""
    running: _Running = {}
    try:
        for topic, key_type in topics.items():
            log = classes / f"{topic}.log"
            with log.open("wb") as out:
                command = _command(classes, bootstrap, topic, key_type, count)
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            running[topic] = process, log
        _wait_for(running, time.monotonic() + timeout_s, timeout_s)
    finally:
        for process, _ in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def _wait_for(running: _Running, deadline: float, timeout_s: float) -> None:
    """Fail naming the first producer that exits non-zero or is not done by `deadline`."""
    for topic, (process, log) in running.items():
        try:
            code = process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            ended = f"did not finish in {timeout_s} s" if code is None else f"exited {code}"
            output = log.read_text(errors="replace").strip()[-_OUTPUT_SHOWN:]
            pytest.fail(f"KeyProducer for {topic} {ended}: {output}")


def read_all(bootstrap: str, topics: list[str], partitions: int) -> dict[str, list[Record]]:
    """Every record of `topics` (of `partitions` each), read from the beginning to the end
    offsets each partition had before reading: one consumer, all partitions assigned."""
    settings = {"bootstrap.servers": bootstrap, "log_level": 0}
    # a group id only because the client insists; nothing is committed for it
    settings |= {"group.id": "tests-javaproducer", "enable.auto.commit": False}
    consumer = Consumer(settings)
    try:
        remaining = _end_offsets(consumer, topics, partitions)
        consumer.assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(partitions)]
        )
        return _consume(consumer, remaining, {topic: [] for topic in topics})
    finally:
        consumer.close()


def _end_offsets(
    consumer: Consumer, topics: list[str], partitions: int
) -> dict[tuple[str, int], int]:
    """The end offset of every partition of `topics` that holds records."""
    ends = {}
    for topic in topics:
        for partition in range(partitions):
            _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if end > 0:
                ends[(topic, partition)] = end
    return ends


def _consume(
    consumer: Consumer, remaining: dict[tuple[str, int], int], read: dict[str, list[Record]]
) -> dict[str, list[Record]]:
    """Poll into `read` until every partition of `remaining` is read to its end offset."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while remaining:
        if time.monotonic() > deadline:
            pytest.fail(f"not read to the end in {READ_TIMEOUT_S} s: {remaining}")
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is not None:
                pytest.fail(f"reading {message.topic()} failed: {message.error()}")
            topic, partition, offset = _place(message)
            value = message.value() or b""
            read[topic].append(Record(message.key() or b"", value.decode(), partition))
            end = remaining.get((topic, partition))
            if end is not None and offset + 1 >= end:
                del remaining[(topic, partition)]
    return read


def _place(message: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a consumed record (only an error lacks them)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None, message
    return topic, partition, offset
