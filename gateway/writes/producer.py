"""The producer behind the `produce` mutation: one event to an input topic, acknowledged.

Created on the first write (nothing is opened before one is asked for) and closed with
the gateway. Records are partitioned like every statefed producer's (`runtime.produce`), so
the event's key lands where the views expect it. A
thread serves librdkafka's delivery reports and hands them to the waiting coroutine.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from gateway.cluster.consistency import Token
from gateway.model.errors import ProduceError
from runtime.kafka import KafkaSettings
from runtime.produce import max_bytes, producer_config

__all__ = ["EventProducer"]

log = logging.getLogger(__name__)

_POLL_S = 0.05


class EventProducer:
    """Writes single events and returns where they landed as a consistency `Token`."""

    def __init__(self, kafka: str | KafkaSettings, timeout_s: float) -> None:
        self.kafka = KafkaSettings.of(kafka)
        self.bootstrap = self.kafka.bootstrap
        self.timeout_s = timeout_s
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False  # by `close`: no producer starts again

    async def produce(self, topic: str, key: str, value: bytes, timestamp_ms: int) -> Token:
        """Write one record and wait for the broker's acknowledgement; ProduceError when it
        is not acknowledged within the timeout."""
        loop = asyncio.get_running_loop()
        delivered: asyncio.Future[Token] = loop.create_future()

        def on_delivery(error: KafkaError | None, message: Message) -> None:
            if error is not None:  # the broker's address and error text are for the log
                log.warning("producing to topic %s on %s failed: %s", topic, self.bootstrap, error)
                failure = ProduceError(_failed(topic, error))
                loop.call_soon_threadsafe(_settle, delivered, failure)
            else:
                token = Token(topic, message.partition() or 0, message.offset() or 0)
                loop.call_soon_threadsafe(_settle, delivered, token)

        producer = self._started()
        try:
            producer.produce(
                topic, value, key.encode(), on_delivery=on_delivery, timestamp=timestamp_ms
            )
        except (BufferError, KafkaException) as exc:
            log.warning("producing to topic %s on %s failed: %s", topic, self.bootstrap, exc)
            reason = "the producer's queue is full" if isinstance(exc, BufferError) else "error"
            raise ProduceError(f"producing to topic {topic} failed ({reason}); retry") from exc
        return await delivered

    @property
    def max_record_bytes(self) -> int:
        """The largest record (key and value) the producer sends."""
        return max_bytes(self.kafka, self._settings())

    def producer_config(self) -> dict[str, object]:
        """The librdkafka configuration of the producer behind the mutation."""
        return producer_config(self.kafka, self._settings())

    def _settings(self) -> dict[str, object]:
        return {
            "linger.ms": 0,  # one event at a time: do not wait for more
            "acks": "all",
            "message.timeout.ms": int(self.timeout_s * 1000),
            "log_level": 3,
        }

    def _started(self) -> Producer:
        with self._lock:
            if self._closed:  # a producer started now would have no thread to serve it
                raise ProduceError("the gateway is shutting down: write through another one")
            if self._producer is None:
                self._producer = Producer(self.producer_config())
                self._thread = threading.Thread(
                    target=self._serve, args=(self._producer,), name="statefed-produce"
                )
                self._thread.start()
            return self._producer

    def _serve(self, producer: Producer) -> None:
        while not self._stop.is_set():
            producer.poll(_POLL_S)

    def close(self) -> None:
        """Deliver what is queued (within the timeout), then stop; a write asked after
        this is refused at once."""
        with self._lock:
            producer, thread, self._producer = self._producer, self._thread, None
            self._closed = True
        if producer is None or thread is None:
            return
        producer.flush(self.timeout_s)
        self._stop.set()
        thread.join()


def _failed(topic: str, error: KafkaError) -> str:
    """What a client is told of a write the broker did not acknowledge. A timed-out write
    may still have landed (the broker wrote it, its answer did not come in time), so a
    blind retry may write it twice."""
    if error.code() == KafkaError._MSG_TIMED_OUT:
        return (
            f"producing to topic {topic} timed out: the event may have been written all the "
            "same; read the view before writing it again"
        )
    return f"producing to topic {topic} failed: {error.name()}"


def _settle(future: asyncio.Future[Token], outcome: Token | ProduceError) -> None:
    if future.done():  # the waiting request was cancelled
        return
    if isinstance(outcome, ProduceError):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
