"""The pipeline status board, and its reader against a real Kafka broker."""

from __future__ import annotations

import uuid

import orjson
from confluent_kafka import Producer

from gateway.cluster.pipeline import PipelineStatusReader, StatusBoard
from runtime.topics import ensure_topics
from schema import ViewStatus, encode_status
from tooling.broker import KafkaBroker
from tooling.processes import wait_until


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def status(view: str, batch: int, late: int = 0) -> ViewStatus:
    return ViewStatus(view, batch_id=batch, updated_ms=1_700_000_000_000 + batch, late_dropped=late)


def test_the_board_keeps_the_newest_record_of_each_view() -> None:
    board = StatusBoard()
    assert board.apply(encode_status(status("a", 1, late=5)))
    assert board.apply(encode_status(status("b", 1, late=1)))
    assert board.apply(encode_status(status("a", 0, late=2)))  # a restarted checkpoint
    assert not board.apply(b"{not json")
    assert not board.apply(None)
    assert board.get("a") == status("a", 0, late=2)
    assert board.get("b") == status("b", 1, late=1)
    assert board.get("c") is None


def test_reader_follows_the_tail_of_the_status_topic(broker: KafkaBroker) -> None:
    topic = unique("gw_status")
    ensure_topics(broker.bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def publish(record: ViewStatus) -> None:
        producer.produce(topic, key=record.view.encode(), value=encode_status(record))
        assert producer.flush(10) == 0  # delivered before the reader looks

    publish(status("early", 1, late=99))  # more than the tail back: never read
    for batch in range(1, 11):
        publish(status("busy", batch, late=batch))
    board = StatusBoard()
    reader = PipelineStatusReader(broker.bootstrap, board, tail_records=5, topic=topic)
    reader.start()
    try:
        wait_until(
            lambda: board.get("busy") == status("busy", 10, late=10), 20, "busy at batch 10", 0.02
        )
        assert board.get("early") is None
        publish(status("quiet", 1, late=3))
        publish(status("busy", 11, late=12))
        wait_until(
            lambda: board.get("busy") == status("busy", 11, late=12), 20, "busy at batch 11", 0.02
        )
        assert board.get("quiet") == status("quiet", 1, late=3)
    finally:
        reader.stop()
        producer.close()
    assert not reader.is_alive()


def test_reader_waits_for_a_topic_created_later(broker: KafkaBroker) -> None:
    topic = unique("gw_status_late")
    board = StatusBoard()
    reader = PipelineStatusReader(broker.bootstrap, board, tail_records=5, topic=topic)
    reader.start()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    try:
        ensure_topics(broker.bootstrap, {topic: 1})
        producer.produce(topic, key=b"v", value=encode_status(status("v", 1, late=4)))
        producer.flush(10)
        wait_until(lambda: board.get("v") is not None, 20, "the status of v", 0.02)
        assert board.get("v") == status("v", 1, late=4)
        assert reader.is_alive()
    finally:
        reader.stop()
        producer.close()
    assert not reader.is_alive()


def test_reader_follows_the_tail_of_the_dead_letter_topic(broker: KafkaBroker) -> None:
    topic, dead = unique("gw_status_dl"), unique("gw_deadletter")
    ensure_topics(broker.bootstrap, {topic: 1, dead: 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def reject(reason: str) -> None:
        value = orjson.dumps({"reason": reason, "topic": "words", "partition": 0, "offset": 1})
        producer.produce(dead, key=b"k", value=value)
        assert producer.flush(10) == 0  # delivered before the reader looks

    for n in range(8):
        reject(f"old {n}")
    board = StatusBoard()
    reader = PipelineStatusReader(
        broker.bootstrap, board, tail_records=3, topic=topic, deadletter_topic=dead
    )
    reader.start()
    try:
        wait_until(lambda: board.dead_letters().total == 8, 20, "8 dead letters counted", 0.02)
        assert [d["reason"] for d in board.dead_letters().recent] == ["old 7", "old 6", "old 5"]
        reject("new")
        wait_until(lambda: board.dead_letters().total == 9, 20, "the new dead letter", 0.02)
        assert board.dead_letters().recent[0]["reason"] == "new"
        producer.produce(topic, key=b"v", value=encode_status(status("v", 1, late=4)))
        producer.flush(10)
        wait_until(lambda: board.get("v") is not None, 20, "a status beside them", 0.02)
    finally:
        reader.stop()
        producer.close()
