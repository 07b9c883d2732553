"""The pipeline status board, and its reader against the real embedded broker."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from gateway.status import PipelineStatusReader, StatusBoard
from runtime.topics import ensure_topics
from schema import ViewStatus, encode_status
from tooling.broker import EmbeddedBroker
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


def test_reader_follows_the_tail_of_the_status_topic(broker: EmbeddedBroker) -> None:
    topic = unique("gw_status")
    ensure_topics(broker.bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def publish(record: ViewStatus) -> None:
        producer.produce(topic, key=record.view.encode(), value=encode_status(record))
        producer.flush(10)  # one batch each, so the broker's end offset is right

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


def test_reader_waits_for_a_topic_created_later(broker: EmbeddedBroker) -> None:
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
