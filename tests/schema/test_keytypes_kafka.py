"""Kafka's Java producer puts every key where `KeyType.partition` says it is.

statefed routes a key to the node of its partition from the key text alone, so the
partition it computes has to be the one the Java producer picked when it wrote the record,
or reads would go to a node that never holds the key. `KeyProducer.java` (next to this
file) writes 25,000 keys of each key type with the type's Java serializer and the default
partitioner into a topic of its own; one consumer pass reads all 100,000 records back and
every record's partition is compared with `KeyType.partition(KeyType.text(key), P)`.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from runtime.topics import ensure_topics, partition_count
from schema.keytypes import KeyType
from tooling.broker import KafkaBroker, kafka_jars

KEYS_PER_TYPE = 25_000
PARTITIONS = 6
SOURCE = Path(__file__).with_name("KeyProducer.java")
JAVA_TIMEOUT_S = 120.0
READ_TIMEOUT_S = 60.0
SHOWN = 5  # mismatches a failure message names


@dataclass(frozen=True)
class Record:
    """One record as read back: the key's bytes, the value (the key's Java text) and the
    partition Kafka's Java producer put it on."""

    key: bytes
    value: str
    partition: int


@dataclass(frozen=True)
class ReadBack:
    """Every record of each key type's topic, and the partition count of the topics."""

    records: dict[KeyType, list[Record]]
    partitions: int


def _tool(name: str) -> str:
    """`name` from the PATH; the `kafka` tier needs the JDK (javac), not only a JRE."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"no `{name}` on the PATH: install a JDK 17 (openjdk-17-jdk-headless)")
    return found


def _compile(classes: Path) -> None:
    """Compile KeyProducer.java against the kafka-clients jar `make kafka` fetched (the
    jar alone: javac reads less than with every jar of the broker)."""
    (clients,) = kafka_jars().glob("kafka-clients-*.jar")
    command = [_tool("javac"), "--release", "17", "-encoding", "UTF-8"]  # not the locale's
    command += ["-d", str(classes), "-cp", str(clients)]
    try:
        done = subprocess.run(
            [*command, str(SOURCE)], capture_output=True, text=True, timeout=JAVA_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"javac {SOURCE.name} did not finish in {JAVA_TIMEOUT_S} s")
    if done.returncode != 0:
        pytest.fail(f"javac {SOURCE.name} exited with {done.returncode}: {done.stderr[-3000:]}")


def _producer(classes: Path, bootstrap: str, topic: str, key_type: KeyType) -> list[str]:
    """KeyProducer's command for one key type; its classpath is Kafka's jars and their deps.
    A small heap and the quick compiler only: each run is short, most of it JVM start-up."""
    jvm = [_tool("java"), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    classpath = f"{classes}{os.pathsep}{kafka_jars()}/*"
    arguments = [bootstrap, topic, key_type.value, str(KEYS_PER_TYPE)]
    return [*jvm, "-cp", classpath, "KeyProducer", *arguments]


def _produce_all(classes: Path, bootstrap: str, topics: dict[KeyType, str]) -> None:
    """Run one KeyProducer per key type at once (their start-ups overlap), each owned by
    its handle: waited for, and killed if it outlives JAVA_TIMEOUT_S or the test fails.
    Output goes to a file, so no full pipe can stall a producer."""
    running: dict[KeyType, tuple[subprocess.Popen[bytes], Path]] = {}
    try:
        for key_type, topic in topics.items():
            log = classes / f"{key_type.value}.log"
            with log.open("wb") as out:
                command = _producer(classes, bootstrap, topic, key_type)
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            running[key_type] = process, log
        _wait_for(running, time.monotonic() + JAVA_TIMEOUT_S)
    finally:
        for process, _ in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def _wait_for(
    running: dict[KeyType, tuple[subprocess.Popen[bytes], Path]], deadline: float
) -> None:
    """Fail naming the first producer that exits non-zero or is not done by `deadline`."""
    for key_type, (process, log) in running.items():
        try:
            code = process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            ended = f"did not finish in {JAVA_TIMEOUT_S} s" if code is None else f"exited {code}"
            output = log.read_text(errors="replace").strip()[-3000:]
            pytest.fail(f"KeyProducer {key_type.value} {ended}: {output}")


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


def _read_all(bootstrap: str, topics: list[str], partitions: int) -> dict[str, list[Record]]:
    """Every record of `topics`, read from the beginning to the end offsets of each
    partition as they were before reading: one consumer, all partitions assigned."""
    settings = {"bootstrap.servers": bootstrap, "log_level": 0}
    # a group id only because the client insists; nothing is committed for it
    settings |= {"group.id": "test-keytypes-kafka", "enable.auto.commit": False}
    consumer = Consumer(settings)
    try:
        remaining = _end_offsets(consumer, topics, partitions)
        consumer.assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(partitions)]
        )
        return _consume(consumer, remaining, {topic: [] for topic in topics})
    finally:
        consumer.close()


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


@pytest.fixture(scope="module")
def read_back(broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> ReadBack:
    """Each key type's records, produced by Java into a topic of its own, read back once."""
    run = uuid.uuid4().hex[:8]
    topics = {key_type: f"test-java-keys-{key_type.value}-{run}" for key_type in KeyType}
    ensure_topics(broker.bootstrap, {topic: PARTITIONS for topic in topics.values()})
    classes = tmp_path_factory.mktemp("keyproducer")
    _compile(classes)
    _produce_all(classes, broker.bootstrap, topics)
    partitions = partition_count(broker.bootstrap, topics[KeyType.STRING])
    read = _read_all(broker.bootstrap, list(topics.values()), partitions)
    return ReadBack({key_type: read[topic] for key_type, topic in topics.items()}, partitions)


# some of the edge cases KeyProducer writes first: they reach the topics as these keys
EDGE_KEYS: dict[KeyType, list[str | int | float]] = {
    KeyType.STRING: ["é", "日本", "😀", "a\0b", "x" * 1000],
    KeyType.INT: [-(2**31), 2**31 - 1, 0, -1, 1],
    KeyType.LONG: [-(2**63), 2**63 - 1, 0, -1, 1],
    KeyType.DOUBLE: [-0.0, 0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308],
}


def _java_key(key_type: KeyType, text: str) -> str | int | float:
    """The key whose Java text (`String.valueOf`) is `text`: Python's float() reads Java's
    "NaN", "Infinity" and "4.9E-324" as Java meant them."""
    if key_type is KeyType.STRING:
        return text
    return float(text) if key_type is KeyType.DOUBLE else int(text)


@pytest.mark.parametrize("key_type", list(KeyType), ids=lambda k: k.value)
def test_every_record_java_produced_is_read_back(read_back: ReadBack, key_type: KeyType) -> None:
    assert read_back.partitions == PARTITIONS, f"the topics have {read_back.partitions} partitions"
    count = len(read_back.records[key_type])
    assert count == KEYS_PER_TYPE, f"{key_type.value}: read {count} of {KEYS_PER_TYPE} records"


@pytest.mark.parametrize("key_type", list(KeyType), ids=lambda k: k.value)
def test_the_edge_cases_are_among_the_keys(read_back: ReadBack, key_type: KeyType) -> None:
    """Random keys alone would miss them (and a misread source file would change them)."""
    texts = {key_type.text(key_type.deserialize(r.key)) for r in read_back.records[key_type]}
    missing = [key for key in EDGE_KEYS[key_type] if key_type.text(key) not in texts]
    assert not missing, f"{key_type.value}: no record has the key of {missing}"


@pytest.mark.parametrize("key_type", list(KeyType), ids=lambda k: k.value)
def test_each_key_reads_back_as_the_key_java_wrote(read_back: ReadBack, key_type: KeyType) -> None:
    """The partition check below trusts `deserialize`: the key must be the one Java meant."""
    records = read_back.records[key_type]
    wrong = []
    for record in records:
        ours, java = key_type.deserialize(record.key), _java_key(key_type, record.value)
        if key_type.text(ours) != key_type.text(java):  # texts: NaN and -0.0 compare right
            wrong.append((ours, java))
    assert not wrong, (
        f"{key_type.value}: {len(wrong)} of {len(records)} keys read back as other keys "
        f"than Java wrote; first (ours, Java's): {wrong[:SHOWN]}"
    )


@pytest.mark.parametrize("key_type", list(KeyType), ids=lambda k: k.value)
def test_every_key_is_on_the_partition_keytypes_computes(
    read_back: ReadBack, key_type: KeyType
) -> None:
    records = read_back.records[key_type]
    assert records, f"{key_type.value}: no records read back"
    wrong = []
    for record in records:
        key = key_type.deserialize(record.key)
        ours = key_type.partition(key_type.text(key), read_back.partitions)
        if ours != record.partition:
            wrong.append((key, record.partition, ours))
    assert not wrong, (
        f"{key_type.value}: {len(wrong)} of {len(records)} keys are not on the partition "
        f"KeyType.partition computes; first (key, Java's partition, ours): {wrong[:SHOWN]}"
    )
