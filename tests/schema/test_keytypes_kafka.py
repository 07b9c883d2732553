"""Kafka's Java producer puts every key where `KeyType.partition` says it is.

statefed routes a key to the node of its partition from the key text alone, so the
partition it computes has to be the one the Java producer picked when it wrote the record,
or reads would go to a node that never holds the key. `KeyProducer.java` (run by
tests/javaproducer.py) writes 25,000 keys of each key type with the type's Java serializer
and the default partitioner into a topic of its own; one consumer pass reads all 100,000
records back and every record's partition is compared with
`KeyType.partition(KeyType.text(key), P)`.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

import pytest

from runtime.topics import ensure_topics, partition_count
from schema.keytypes import KeyType
from tests import javaproducer
from tests.javaproducer import Record
from tooling.broker import KafkaBroker

KEYS_PER_TYPE = 25_000
PARTITIONS = 6
SHOWN = 5  # mismatches a failure message names


@dataclass(frozen=True)
class ReadBack:
    """Every record of each key type's topic, and the partition count of the topics."""

    records: dict[KeyType, list[Record]]
    partitions: int


@pytest.fixture(scope="module")
def read_back(broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> ReadBack:
    """Each key type's records, produced by Java into a topic of its own, read back once."""
    run = uuid.uuid4().hex[:8]
    topics = {key_type: f"test-java-keys-{key_type.value}-{run}" for key_type in KeyType}
    ensure_topics(broker.bootstrap, {topic: PARTITIONS for topic in topics.values()})
    classes = tmp_path_factory.mktemp("keyproducer")
    javaproducer.compile_key_producer(classes)
    by_topic = {topic: key_type for key_type, topic in topics.items()}
    javaproducer.produce(classes, broker.bootstrap, by_topic, KEYS_PER_TYPE)
    partitions = partition_count(broker.bootstrap, topics[KeyType.STRING])
    read = javaproducer.read_all(broker.bootstrap, list(topics.values()), partitions)
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
