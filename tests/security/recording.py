"""The gateway's producer seam for the security tests: records what the produce mutation
would have written, and writes nothing anywhere."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gateway.cluster.consistency import Token
from gateway.writes.producer import EventProducer
from schema import partition_for

__all__ = ["Produced", "RecordingProducer"]

P = 2


@dataclass(frozen=True)
class Produced:
    topic: str
    key: str
    value: bytes
    timestamp_ms: int


class RecordingProducer(EventProducer):
    """An EventProducer that keeps each event in `records` (thread-safe: a gateway under
    uvicorn runs in another thread than the test) and answers the offset it would have."""

    def __init__(self) -> None:
        super().__init__("unused:9092", 1.0)
        self.records: list[Produced] = []
        self._recorded = threading.Lock()

    async def produce(self, topic: str, key: str, value: bytes, timestamp_ms: int) -> Token:
        with self._recorded:
            self.records.append(Produced(topic, key, value, timestamp_ms))
            offset = len(self.records) - 1
        return Token(topic, partition_for(key, P), offset)

    def close(self) -> None:
        pass

    def snapshot(self) -> list[Produced]:
        with self._recorded:
            return list(self.records)
