"""Writing micro-batches: records on the right partition, and no batch without all acks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession

from pipeline import DeliveryError, PipelineConfig, RecordTooLargeError
from pipeline.deadletter import KEPT_BYTES
from pipeline.job import sink_options
from pipeline.kinds import count
from pipeline.sink import BatchProducer
from pipeline.writers import ChangelogWriter, DeadLetterWriter
from schema import DEMO_DOMAIN, CountRow, View, partition_for
from tests.pipeline.support import PARTITIONS, ChangelogReader, DeadLetterReader
from tooling.broker import KafkaBroker, free_port
from tooling.processes import wait_until


def _rows(spark: SparkSession) -> DataFrame:
    data = [("kafka", 3, 1_700_000_000_123), ("franz", 1, 1_700_000_000_000)]
    return spark.createDataFrame(data, "key string, count long, last_event_ms long")


def test_a_batch_becomes_absolute_records_on_the_key_partition(
    spark: SparkSession, broker: KafkaBroker, count_view: View
) -> None:
    with BatchProducer(broker.bootstrap, "test-writer") as producer:
        ChangelogWriter(count_view, count.PLAN, producer, PARTITIONS)(_rows(spark), 0)
        # what read-your-writes waits for: past each acknowledged record (a fresh topic)
        assert producer.delivered(count_view.changelog_topic) == {
            partition_for("kafka", PARTITIONS): 1,
            partition_for("franz", PARTITIONS): 1,
        }
        assert producer.delivered("elsewhere") == {}
    changelog = ChangelogReader(broker.bootstrap, count_view.changelog_topic)
    try:

        def both() -> bool:
            changelog.poll()
            return len(changelog.latest) == 2

        wait_until(both, 30, "two changelog records", interval_s=0)
    finally:
        changelog.close()
    assert changelog.latest == {
        "kafka": CountRow("kafka", 3, 1_700_000_000_123),
        "franz": CountRow("franz", 1, 1_700_000_000_000),
    }
    assert not changelog.misplaced
    assert partition_for("kafka", PARTITIONS) != partition_for("franz", PARTITIONS)


def test_a_batch_fails_when_a_record_is_not_acknowledged(
    spark: SparkSession, count_view: View
) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    producer = BatchProducer(nobody, "test-writer-nobody", timeout_s=1.0)
    writer = ChangelogWriter(count_view, count.PLAN, producer, PARTITIONS)
    with pytest.raises(DeliveryError, match=f"view {count_view.name} batch 7: .* {nobody}"):
        writer(_rows(spark), 7)
    producer.close()


def test_a_rejected_record_fails_the_batch_and_the_next_batch_starts_clean(
    broker: KafkaBroker, count_view: View
) -> None:
    with BatchProducer(broker.bootstrap, "test-writer-bad", timeout_s=5.0) as producer:
        producer.send(count_view.changelog_topic, b"k", b"v", partition=PARTITIONS + 3)
        with pytest.raises(DeliveryError, match=f"partition {PARTITIONS + 3}"):
            producer.flush_or_raise("bad batch")
        producer.send(count_view.changelog_topic, b"k", b"v", partition=0)
        assert producer.flush_or_raise("good batch") == 1


def test_a_changelog_row_over_the_producers_limit_fails_naming_view_key_size_and_fix(
    spark: SparkSession, count_view: View
) -> None:
    # produce() refuses it at once: no broker needed
    producer = BatchProducer(f"127.0.0.1:{free_port()}", "test-writer-large", timeout_s=1.0)
    writer = ChangelogWriter(count_view, count.PLAN, producer, PARTITIONS)
    rows = spark.createDataFrame(
        [("k" * 1_100_000, 1, 1_700_000_000_000)], "key string, count long, last_event_ms long"
    )
    expected = (
        f"view {count_view.name} batch 3, key '{'k' * 100}': a record of 2200\\d+ bytes to "
        f"topic {count_view.changelog_topic} .* message.max.bytes is 1000000\\): raise the "
        f"topic's max.message.bytes and the pipeline's STATEFED_KAFKA_MESSAGE_MAX_BYTES"
    )
    with pytest.raises(RecordTooLargeError, match=expected):
        writer(rows, 3)
    producer.close()


def test_a_record_the_topic_refuses_as_too_large_is_not_a_delivery_error_to_replay(
    broker: KafkaBroker,
) -> None:
    """The producer's limit is above the topic's: the broker refuses the record, and no
    replay would deliver it, so the batch fails with RecordTooLargeError (the pipeline
    stops at once, naming the settings) rather than a DeliveryError it restarts for."""
    topic = f"test-writer-topic-limit-{free_port()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "2000"})])
    created[topic].result(10)
    with BatchProducer(broker.bootstrap, "test-writer-topic-limit", timeout_s=10.0) as producer:
        producer.send(topic, b"k", b"v" * 10_000, partition=0)
        with pytest.raises(RecordTooLargeError, match=f"batch 9: .* to topic {topic} "):
            producer.flush_or_raise("batch 9")
        producer.send(topic, b"k", b"v", partition=0)  # the next batch starts clean
        assert producer.flush_or_raise("batch 10") == 1


def test_sink_options_give_the_java_producer_the_record_limit_by_its_own_name() -> None:
    config = PipelineConfig.from_env({"STATEFED_KAFKA_MESSAGE_MAX_BYTES": "3000000"})
    options = sink_options(config, DEMO_DOMAIN[0])
    assert options["kafka.max.request.size"] == "3000000"
    assert "kafka.message.max.bytes" not in options
    assert "kafka.max.request.size" not in sink_options(PipelineConfig.from_env({}), DEMO_DOMAIN[0])


def test_a_dead_letter_of_a_record_over_the_limit_is_written_cut_saying_so(
    spark: SparkSession, broker: KafkaBroker, count_view: View
) -> None:
    value = b"v" * 2_000_000
    when = datetime(2026, 1, 2, tzinfo=UTC)
    batch = spark.createDataFrame(
        [(b"k", value, count_view.topic, 0, 5, when, "value is not a JSON object")],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, reason string",
    )
    letters = DeadLetterReader(broker.bootstrap, count_view.topic)
    try:
        with BatchProducer(broker.bootstrap, "test-writer-dead") as producer:
            DeadLetterWriter(count_view.topic, producer)(batch, 0)

        def written() -> bool:
            letters.poll()
            return bool(letters.letters)

        wait_until(written, 30, "the dead letter", interval_s=0)
    finally:
        letters.close()
    (letter,) = letters.letters
    assert (letter.key, letter.value) == (b"k", value[:KEPT_BYTES])
    assert (letter.value_size, letter.truncated, letter.offset) == (2_000_000, True, 5)
