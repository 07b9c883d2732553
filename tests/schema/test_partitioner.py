"""The partitioner must agree with Kafka's Java producer byte for byte."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema import murmur2, partition_for

# Kafka's own vectors: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
KAFKA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS.items())
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def _java_murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` transcribed line by line: a word at a time, masked at every
    step (the oracle for the partitioner's faster arithmetic)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail, whole = length % 4, length - length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.binary(max_size=64))
def test_murmur2_matches_the_java_code_step_by_step(data: bytes) -> None:
    assert murmur2(data) == _java_murmur2(data)


def test_partition_is_positive_murmur2_modulo_count() -> None:
    # toPositive(-973932308) = -973932308 & 0x7fffffff = 1173551340; 1173551340 % 6 = 0
    assert partition_for("21", 6) == (-973932308 & 0x7FFFFFFF) % 6
    assert all(0 <= partition_for(f"k{i}", 7) < 7 for i in range(1000))


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="partition count"):
        partition_for("kafka", 0)


def test_partition_matches_librdkafka_murmur2_random(broker) -> None:  # type: ignore[no-untyped-def]
    """A confluent-kafka producer with partitioner=murmur2_random puts keys where we say."""
    from confluent_kafka import Producer

    from runtime.topics import ensure_topics

    topic = "test-partitioner"
    ensure_topics(broker.bootstrap, {topic: 6})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    placed: dict[str, int] = {}

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        assert err is None, err
        placed[msg.key().decode()] = msg.partition()

    keys = [f"key-{i}" for i in range(200)] + ["kafka", "franz", "ünïcode-🦆"]
    for key in keys:
        producer.produce(topic, key=key.encode(), value=b"x", on_delivery=delivered)
    assert producer.flush(15) == 0
    assert placed == {key: partition_for(key, 6) for key in keys}
