"""Pipeline status records: from Spark progress events, and read back from the topic."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql.streaming.listener import StreamingQueryProgress

from pipeline import status
from pipeline.status import StatusPoller, ViewTracker, new_progress, source_offsets
from pipeline.statuslog import StatusPublisher, read_last_statuses
from runtime.topics import ensure_topics
from schema import PIPELINE_TOPIC, ViewStatus
from tooling.broker import KafkaBroker


def _progress(batch: int, dropped: list[int], end: str, ran: bool = True) -> StreamingQueryProgress:
    """A progress as Spark reports it (only the fields the status reads matter); `ran`
    False is what Spark reports at a restart for the batch it is about to run."""
    operator = {
        "operatorName": "stateStoreSave",
        **dict.fromkeys(["numRowsTotal", "numRowsUpdated", "numRowsRemoved"], 0),
        **dict.fromkeys(["allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"], 0),
        "memoryUsedBytes": 0,
        "numShufflePartitions": 2,
        "numStateStoreInstances": 2,
    }
    source = {
        "description": "KafkaV2[Subscribe[words]]",
        "startOffset": None,
        "endOffset": end,
        "latestOffset": end,
        "numInputRows": 1,
        "inputRowsPerSecond": 1.0,
        "processedRowsPerSecond": 1.0,
    }
    doc: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "runId": str(uuid.uuid4()),
        "name": "statefed.v",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "batchId": batch,
        "batchDuration": 10,
        "durationMs": {"triggerExecution": 10, **({"addBatch": 5} if ran else {})},
        "stateOperators": [{**operator, "numRowsDroppedByWatermark": d} for d in dropped],
        "sources": [source],
        "sink": {"description": "ForeachBatchSink", "numOutputRows": 0},
    }
    return StreamingQueryProgress.fromJson(doc)


class Collected:
    """A publisher that keeps what it is given."""

    def __init__(self) -> None:
        self.statuses: list[ViewStatus] = []

    def publish(self, status: ViewStatus) -> None:
        self.statuses.append(status)

    def close(self) -> None:
        """Nothing to release."""


class Query:
    """What a query reports of its progress: the newest, and a window of recent ones."""

    def __init__(self, *progress: StreamingQueryProgress, keep: int = 100) -> None:
        self.progress = list(progress)
        self.keep = keep
        self.recent_reads = 0

    @property
    def lastProgress(self) -> StreamingQueryProgress | None:
        return self.progress[-1] if self.progress else None

    @property
    def recentProgress(self) -> list[StreamingQueryProgress]:
        self.recent_reads += 1
        return self.progress[-self.keep :]


def test_source_offsets_are_the_kafka_sources_of_the_topic() -> None:
    assert source_offsets('{"words": {"1": 3, "0": 5}}', "words") == {0: 5, 1: 3}
    assert source_offsets('{"other": {"0": 1}}', "words") == {}
    assert source_offsets(None, "words") == {}
    with pytest.raises(ValueError, match=r"no \{topic"):
        source_offsets("[1]", "words")


def test_a_tracker_continues_the_late_total_it_started_from() -> None:
    tracker = ViewTracker("v", "words", late_dropped=5, clock=lambda: 1234)
    first = tracker.on_progress(_progress(7, [2, 1], '{"words": {"0": 4, "1": 9}}'))
    assert first == ViewStatus("v", 7, 1234, 8, {0: 4, 1: 9})
    assert tracker.on_progress(_progress(8, [], '{"words": {"0": 4, "1": 9}}')).late_dropped == 8
    assert tracker.last_batch == 8


def test_new_progress_is_every_batch_after_the_last_one_published() -> None:
    query = Query()
    assert new_progress(query, None) == []
    query.progress += [_progress(b, [], "{}") for b in (3, 4)]
    assert [p.batchId for p in new_progress(query, None)] == [3, 4]  # all of this run
    assert new_progress(query, 4) == []
    reads = query.recent_reads
    query.progress.append(_progress(5, [], "{}"))
    assert [p.batchId for p in new_progress(query, 4)] == [5]
    assert query.recent_reads == reads  # one new batch: lastProgress was enough
    query.progress += [_progress(b, [], "{}") for b in (6, 7, 8)]
    assert [p.batchId for p in new_progress(query, 5)] == [6, 7, 8]


def test_a_batch_reported_before_it_ran_is_not_taken_for_the_batch() -> None:
    query = Query(_progress(5, [0], "{}"), _progress(6, [], "{}", ran=False))
    assert [p.batchId for p in new_progress(query, None)] == [5]
    assert new_progress(query, 5) == []
    ran = _progress(6, [1], "{}")
    query.progress += [ran, _progress(7, [0], "{}")]
    assert new_progress(query, 5) == [ran, query.progress[-1]]


def test_the_poller_publishes_each_batch_once_in_order() -> None:
    published = Collected()
    poller = StatusPoller(published)
    query = Query(_progress(0, [], '{"words": {"0": 0}}'))
    poller.watch(query, ViewTracker("v", "words", clock=lambda: 1))
    poller.poll()
    query.progress += [
        _progress(1, [1], '{"words": {"0": 2}}'),
        _progress(2, [0], '{"words": {"0": 5}}'),
    ]
    poller.poll()
    poller.poll()
    assert published.statuses == [
        ViewStatus("v", 0, 1, 0, {0: 0}),
        ViewStatus("v", 1, 1, 1, {0: 2}),
        ViewStatus("v", 2, 1, 1, {0: 5}),
    ]
    poller.stop()  # never started: nothing to join


def test_a_status_that_could_not_be_made_or_published_is_made_again_at_the_next_poll() -> None:
    """Real-Time Mode reads its changelog's ends for each status: while the broker does
    not answer, that batch's status must come at the next poll, its late rows counted once,
    not be skipped for the next batch's."""
    published = Collected()
    poller = StatusPoller(published)
    answers: list[dict[int, int] | Exception] = [KafkaException(KafkaError(1)), {0: 3}]

    def ends() -> dict[int, int]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    query = Query(_progress(4, [2], '{"words": {"0": 9}}'))
    tracker = ViewTracker("v", "words", late_dropped=1, clock=lambda: 1, changelog_offsets=ends)
    poller.watch(query, tracker)
    with pytest.raises(KafkaException):
        poller.poll()
    assert published.statuses == [] and tracker.last_batch is None
    poller.poll()
    assert published.statuses == [ViewStatus("v", 4, 1, 3, {0: 9}, changelog_offsets={0: 3})]
    assert (tracker.last_batch, tracker.late_dropped) == (4, 3)


def test_the_last_status_of_each_view_is_read_back_across_chunks(broker: KafkaBroker) -> None:
    ensure_topics(broker.bootstrap, {PIPELINE_TOPIC: 1})
    tag = uuid.uuid4().hex[:8]
    a, b, never = f"a_{tag}", f"b_{tag}", f"never_{tag}"
    with StatusPublisher(broker.bootstrap) as publisher:
        for batch in range(3):
            publisher.publish(ViewStatus(a, batch, 10, batch * 2, {0: batch}))
        for batch in range(1500):  # more than one backwards chunk after a's last record
            publisher.publish(ViewStatus(b, batch, 20, 1, {}))
    found = read_last_statuses(broker.bootstrap, [a, b, never])
    assert found == {a: ViewStatus(a, 2, 10, 4, {0: 2}), b: ViewStatus(b, 1499, 20, 1, {})}
    assert read_last_statuses(broker.bootstrap, []) == {}


class _ElectingEnds:
    """`ChangelogEnds` of a topic whose partition leaders are still being elected: the
    first `failures` reads fail as a broker answers then, with `error`."""

    reads = 0
    closed = 0

    def __init__(self, kafka: object, topic: str) -> None:
        self.topic = topic

    def __call__(self) -> dict[int, int]:
        type(self).reads += 1
        if type(self).reads <= self.failures:
            raise KafkaException(KafkaError(self.error, "Broker: Not leader for partition"))
        return {0: 7, 1: 0}

    def close(self) -> None:
        type(self).closed += 1

    failures = 2
    error = KafkaError.NOT_LEADER_FOR_PARTITION


def test_the_changelog_ends_at_start_are_read_again_while_leaders_are_elected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read right after the topics were created, a partition may have no leader yet: the
    pipeline asked once and failed to start (seen in CI)."""
    monkeypatch.setattr(status, "ChangelogEnds", _ElectingEnds)
    monkeypatch.setattr(_ElectingEnds, "reads", 0)
    monkeypatch.setattr(_ElectingEnds, "closed", 0)
    assert status.changelog_ends("127.0.0.1:9", "statefed.v.changelog") == {0: 7, 1: 0}
    assert (_ElectingEnds.reads, _ElectingEnds.closed) == (3, 1)


def test_the_changelog_ends_at_start_give_up_on_a_lasting_or_other_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(status, "ChangelogEnds", _ElectingEnds)
    monkeypatch.setattr(_ElectingEnds, "reads", 0)
    monkeypatch.setattr(_ElectingEnds, "failures", 1_000_000)
    with pytest.raises(KafkaException):
        status.changelog_ends("127.0.0.1:9", "statefed.v.changelog", timeout_s=0.3)
    reads = _ElectingEnds.reads
    assert 2 <= reads <= 5  # asked every 0.1 s until the deadline
    monkeypatch.setattr(_ElectingEnds, "error", KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        status.changelog_ends("127.0.0.1:9", "statefed.v.changelog", timeout_s=30)
    assert _ElectingEnds.reads == reads + 1  # not asked again
