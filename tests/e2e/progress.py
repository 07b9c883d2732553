"""Waiting until the pipeline has processed what a test produced.

Spark's watermark advances per micro-batch, so which events a windowed view drops as
late depends on batch boundaries; tests that produce late events produce in rounds and
wait, between rounds, until every view over the topic reports (on `statefed.pipeline`)
source offsets past the round's last record.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition

from runtime.produce import Write
from schema import CATALOGUE, PIPELINE_TOPIC, View, ViewStatus, decode_status
from tooling.processes import wait_until


def needed_offsets(writes: Iterable[Write]) -> dict[int, int]:
    """Per partition, the next offset after the last record written there."""
    needed: dict[int, int] = {}
    for write in writes:
        needed[write.partition] = max(needed.get(write.partition, 0), write.offset + 1)
    return needed


class PipelineProgress:
    """Follows `statefed.pipeline` and keeps the newest status of each view of the
    `catalogue` the pipeline runs."""

    def __init__(self, bootstrap: str, catalogue: tuple[View, ...] = CATALOGUE) -> None:
        self._catalogue = catalogue
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "statefed-tests-progress",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        self._consumer.assign([TopicPartition(PIPELINE_TOPIC, 0, 0)])
        self.latest: dict[str, ViewStatus] = {}

    def _drain(self, timeout_s: float) -> None:
        for message in self._consumer.consume(1000, timeout_s):
            value = message.value()
            if message.error() is None and value:
                status = decode_status(value)
                self.latest[status.view] = status

    def _done(self, view: View, needed: dict[int, int]) -> bool:
        status = self.latest.get(view.name)
        if status is None:
            return False
        return all(status.source_offsets.get(p, 0) >= o for p, o in needed.items())

    def wait(self, topic: str, needed: dict[int, int], timeout_s: float = 90.0) -> None:
        """Wait until every view over `topic` has processed up to `needed`."""
        views = [v for v in self._catalogue if v.topic == topic]

        def done() -> bool:
            if all(self._done(v, needed) for v in views):
                return True
            self._drain(0.2)  # the poll waits here, consuming
            return False

        def seen() -> str:
            latest = {v.name: self.latest.get(v.name) for v in views}
            return f"the pipeline to reach {needed} on {topic}: {latest}"

        wait_until(done, timeout_s, seen, interval_s=0)

    def close(self) -> None:
        self._consumer.close()
