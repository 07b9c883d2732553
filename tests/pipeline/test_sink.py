"""What a batch producer reports as delivered, without a broker."""

from __future__ import annotations

from pipeline.sink import BatchProducer
from tooling.broker import free_port


def test_the_changelog_written_before_a_producer_counts_as_delivered() -> None:
    producer = BatchProducer(f"127.0.0.1:{free_port()}", "test-sink-resumed", timeout_s=1.0)
    try:
        assert producer.delivered("changelog") == {}  # a producer that never wrote
        producer.delivered_from("changelog", {0: 12, 1: 0, 2: 3})
        # an empty partition names nothing, as for a first run: no read waits on it
        assert producer.delivered("changelog") == {0: 12, 2: 3}
        producer.delivered_from("changelog", {0: 5, 2: 9})  # offsets only grow
        assert producer.delivered("changelog") == {0: 12, 2: 9}
        assert producer.delivered("elsewhere") == {}
    finally:
        producer.close()
