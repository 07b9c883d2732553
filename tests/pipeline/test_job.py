"""The streaming job against the real broker and a real Spark session."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from pipeline import PipelineConfig, QueryFailedError, SourceError, start_queries
from pipeline.records import REASON_BAD_UTF8, REASON_EMPTY_KEY, REASON_NO_KEY
from pipeline.sink import BatchProducer
from pipeline.starting import start_initialized
from schema import View
from tests.pipeline.support import (
    PARTITIONS,
    ChangelogReader,
    DeadLetterReader,
    Record,
    StatusReader,
    end_offsets_of,
    pipeline_config,
    produce,
    produce_records,
)
from tooling.broker import KafkaBroker, free_port
from tooling.processes import wait_until


def _words(n: int, vocabulary: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    # skewed, like real keys: a few hot words and a long tail
    return rng.choices(vocabulary, weights=[1 / (i + 1) for i in range(len(vocabulary))], k=n)


def test_counts_are_exact_partitioned_and_survive_a_restart(
    spark: SparkSession, broker: KafkaBroker, count_view: View, tmp_path: Path
) -> None:
    config = pipeline_config(broker, tmp_path / "checkpoints")
    vocabulary = [f"w{i}" for i in range(60)] + ["kafka", "straße", "日本"]
    truth: Counter[str] = Counter()
    first = _words(3000, vocabulary, seed=1)
    produce(broker.bootstrap, count_view.topic, (w.encode() for w in first))
    truth.update(first)
    changelog = ChangelogReader(broker.bootstrap, count_view.changelog_topic)
    try:
        with start_queries(spark, config, [count_view]) as running:
            assert len(running.queries) == 2  # the view, and dead letters of its topic
            changelog.wait_for(truth)
            more = _words(1000, vocabulary, seed=2)
            produce(broker.bootstrap, count_view.topic, (w.encode() for w in more))
            truth.update(more)
            changelog.wait_for(truth)
            running.check()

        # stopped; what arrives now is read after a restart from the same checkpoints
        later = [*_words(2000, vocabulary, seed=3), "brand-new"]
        produce(broker.bootstrap, count_view.topic, (w.encode() for w in later))
        truth.update(later)
        with start_queries(spark, config, [count_view]) as running:
            changelog.wait_for(truth)
            running.check()
        assert not changelog.misplaced, changelog.misplaced[:10]
        # a double-counted replay would have shown a count above the truth at some point
        assert {k: v for k, v in changelog.highest.items() if v > truth[k]} == {}
        assert changelog.latest["kafka"].last_event_ms > 0
    finally:
        changelog.close()


def test_after_a_restart_every_status_names_what_the_earlier_run_wrote(
    spark: SparkSession, broker: KafkaBroker, count_view: View, tmp_path: Path
) -> None:
    """The earlier run's last status may never have been published (its driver killed
    after the batch committed) or be out of a gateway's reach: a status of the next run
    names every changelog partition written before it, and nothing not yet written."""
    config = pipeline_config(broker, tmp_path / "checkpoints")
    vocabulary = [f"w{i}" for i in range(60)]  # every partition of the changelog
    produce(broker.bootstrap, count_view.topic, (w.encode() for w in vocabulary))
    changelog = ChangelogReader(broker.bootstrap, count_view.changelog_topic)
    statuses = StatusReader(broker.bootstrap, [count_view.name])
    try:
        with start_queries(spark, config, [count_view]) as running:
            changelog.wait_for(Counter(vocabulary))
            running.check()
        written = end_offsets_of(broker.bootstrap, count_view.changelog_topic)
        assert all(written.values()), written
        # one record: the restarted run writes one changelog partition only
        ((partition, offset),) = produce_records(
            broker.bootstrap, count_view.topic, [Record(b"w0", b"1")]
        )
        with start_queries(spark, config, [count_view]) as running:
            ends = {partition: offset + 1}
            statuses.wait_for_offsets(count_view.name, ends)
            running.check()
        after = end_offsets_of(broker.bootstrap, count_view.changelog_topic)
    finally:
        changelog.close()
        statuses.close()
    restarted = [s for s in statuses.statuses if s.source_offsets.get(partition, 0) > offset]
    assert restarted
    for status in restarted:
        assert {p: status.changelog_offsets.get(p, 0) >= e for p, e in written.items()} == (
            dict.fromkeys(written, True)
        ), (status, written)
        assert all(o <= after[p] for p, o in status.changelog_offsets.items()), (status, after)
    assert restarted[-1].changelog_offsets == after


def test_bad_records_go_to_the_dead_letter_topic_and_the_rest_still_counts(
    spark: SparkSession, broker: KafkaBroker, count_view: View, tmp_path: Path
) -> None:
    config = pipeline_config(broker, tmp_path / "checkpoints")
    good = ["alpha", "beta", "alpha", "gamma", "alpha"]
    bad = [None, b"\xff\xfe not utf-8", b""]
    produce(broker.bootstrap, count_view.topic, [good[0].encode(), *bad])
    produce(broker.bootstrap, count_view.topic, (w.encode() for w in good[1:]))
    changelog = ChangelogReader(broker.bootstrap, count_view.changelog_topic)
    letters = DeadLetterReader(broker.bootstrap, count_view.topic)
    try:
        with start_queries(spark, config, [count_view]) as running:
            changelog.wait_for(Counter(good))

            def all_letters() -> bool:
                letters.poll()
                return len(letters.letters) >= len(bad)

            wait_until(all_letters, 60, "three dead letters", interval_s=0)
            running.check()
    finally:
        changelog.close()
        letters.close()
    reasons = {letter.key: letter.reason for letter in letters.letters}
    assert reasons == {None: REASON_NO_KEY, bad[1]: REASON_BAD_UTF8, b"": REASON_EMPTY_KEY}
    for letter in letters.letters:
        assert letter.topic == count_view.topic
        assert 0 <= letter.partition < PARTITIONS
        assert letter.offset >= 0
        assert letter.value == b"1"
        assert letter.timestamp_ms is not None and letter.timestamp_ms > 0


def test_a_failed_delivery_stops_the_query_and_the_restart_loses_nothing(
    spark: SparkSession, broker: KafkaBroker, count_view: View, tmp_path: Path
) -> None:
    config = pipeline_config(broker, tmp_path / "checkpoints")
    vocabulary = [f"v{i}" for i in range(12)]
    truth = Counter(vocabulary)
    produce(broker.bootstrap, count_view.topic, (w.encode() for w in vocabulary))
    nobody = f"127.0.0.1:{free_port()}"

    def unreachable(config: PipelineConfig, client_id: str) -> BatchProducer:
        return BatchProducer(nobody, client_id, timeout_s=1.0)

    with start_queries(spark, config, [count_view], producer=unreachable) as running:

        def failed() -> bool:
            try:
                running.check()
            except QueryFailedError as exc:
                assert f"statefed.{count_view.name}" in str(exc)
                assert "DeliveryError" in str(exc)
                return True
            return False

        wait_until(failed, 60, "the view's query to fail", interval_s=0.2)

    # the batch that failed was not committed: the restart computes and delivers it
    changelog = ChangelogReader(broker.bootstrap, count_view.changelog_topic)
    try:
        with start_queries(spark, config, [count_view]) as running:
            changelog.wait_for(truth)
            running.check()
    finally:
        changelog.close()
    assert max(changelog.highest.values()) == 1


def test_the_queries_read_with_sparks_kafka_source(
    spark: SparkSession, broker: KafkaBroker, count_view: View, tmp_path: Path
) -> None:
    config = pipeline_config(broker, tmp_path / "checkpoints")
    produce(broker.bootstrap, count_view.topic, [b"kafka"])
    with start_queries(spark, config, [count_view]) as running:

        def described() -> str | None:
            progress = running.queries[0].lastProgress
            return progress["sources"][0]["description"] if progress else None

        description = wait_until(described, 60, "the view query's first progress")
        running.check()
    assert description.startswith("KafkaV2"), description
    assert count_view.topic in description


def test_a_topic_the_broker_does_not_have_is_named_with_the_settings_to_check(
    spark: SparkSession, broker: KafkaBroker, count_view: View, tmp_path: Path
) -> None:
    config = pipeline_config(broker, tmp_path / "checkpoints")
    missing = dataclasses.replace(count_view, topic=f"{count_view.topic}.missing")
    with pytest.raises(SourceError) as failure:
        start_queries(spark, config, [missing])
    message = str(failure.value)
    assert f"view {missing.name} reads topic {missing.topic}" in message
    assert "STATEFED_BOOTSTRAP" in message and broker.bootstrap in message
    assert not [q for q in spark.streams.active if q.name == f"statefed.{missing.name}"]


class _BrokenSource(DataSource):
    """A source that fails while Spark initializes it, as a refused setting would."""

    @classmethod
    def name(cls) -> str:
        return "statefed_test_broken"

    def schema(self) -> str:
        return "value binary"

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        raise ValueError("this source cannot start")


def test_a_query_that_dies_while_starting_is_retried_then_named(
    spark: SparkSession, tmp_path: Path
) -> None:
    spark.dataSource.register(_BrokenSource)
    raw = spark.readStream.format(_BrokenSource.name()).load()
    writer = raw.writeStream.foreachBatch(lambda batch, batch_id: None).option(
        "checkpointLocation", str(tmp_path / "cp")
    )
    with pytest.raises(QueryFailedError, match=r"query statefed\.broken failed to start 2 times"):
        start_initialized(writer.queryName("statefed.broken"), "statefed.broken", attempts=2)
    assert not [q for q in spark.streams.active if q.name == "statefed.broken"]
