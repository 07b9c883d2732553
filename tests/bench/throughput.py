"""Pipeline throughput: events/s the Spark pipeline turns into changelog records on local[2].

A burst of `throughput_events` words (Zipf-like over a fresh vocabulary) is produced as
fast as the producer can; a changelog consumer sums the latest absolute count of each
word of the burst until the sum equals the burst. Throughput = burst / (last count
seen - first record produced); the producer's own rate is reported beside it, since a
pipeline faster than the producer can only show the producer's rate.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition

from schema import decode_count
from tests.bench.dataset import bulk_producer
from tests.bench.report import Report, fmt_num
from tests.bench.session import BenchError, BenchSession

__all__ = ["NAME", "Burst", "count_burst", "measure", "produce_burst"]

NAME = "throughput"
TITLE = "Pipeline throughput into the changelog (Spark local[2])"
_TIMEOUT_S = 120.0


@dataclass
class Burst:
    events: int
    started: float = 0.0
    produced_at: float = 0.0
    progress: list[tuple[float, int]] = field(default_factory=list)  # (time, events counted)


def _consumer(session: BenchSession) -> Consumer:
    """A consumer positioned at the changelog's current end, before the burst starts."""
    topic = session.dataset.view.changelog_topic
    consumer = Consumer(
        {
            "bootstrap.servers": session.cluster.bootstrap,
            "group.id": f"bench-throughput-{time.time_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    # read from exactly the end of now (nothing of the burst exists yet)
    ends = [
        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(session.settings.partitions)
    ]
    consumer.assign([TopicPartition(topic, p, end) for p, end in enumerate(ends)])
    return consumer


def produce_burst(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], burst: Burst
) -> None:
    """Produce `records` (key, value) as fast as the producer can; times go to `burst`."""
    producer = bulk_producer(bootstrap)
    burst.started = time.monotonic()
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60.0)
    burst.produced_at = time.monotonic()


def count_burst(
    consumer: Consumer,
    burst: Burst,
    events_of: Callable[[bytes], int],
    timeout_s: float,
    prefix: bytes = b"",
    what: str = "the changelog",
) -> None:
    """Sum the events each key's latest changelog row counted (`events_of` its value), of
    the keys starting with `prefix`, until the sum equals the burst; progress goes to it."""
    latest: dict[bytes, int] = {}
    total = 0
    deadline = time.monotonic() + timeout_s
    while total < burst.events and time.monotonic() < deadline:
        for message in consumer.consume(5000, 0.1):
            key = message.key()
            value = message.value()
            if message.error() or key is None or value is None or not key.startswith(prefix):
                continue
            count = events_of(value)
            total += count - latest.get(key, 0)
            latest[key] = count
        if burst.progress and burst.progress[-1][1] == total:
            continue
        burst.progress.append((time.monotonic(), total))
    if total != burst.events:
        raise BenchError(
            f"{what} counted {total:,} of {burst.events:,} events after {timeout_s:.0f} s"
        )


def _burst_words(count: int, vocabulary: int, prefix: str) -> list[bytes]:
    """`count` Zipf-like words; the list holds references to `vocabulary` encoded words."""
    words = [f"{prefix}{rank:05d}".encode() for rank in range(1, vocabulary + 1)]
    weights = [1.0 / rank**1.1 for rank in range(1, vocabulary + 1)]
    return random.Random(0).choices(words, weights, k=count)


def measure(session: BenchSession, report: Report) -> None:
    """Produce one burst to the input topic and time it into the changelog."""
    section = report.section(NAME, TITLE)
    session.ensure_nodes(2)
    session.ensure_pipeline()
    settings = session.settings
    prefix = f"tp{time.time_ns() % 1_000_000}-"
    words = _burst_words(settings.throughput_events, settings.throughput_vocabulary, prefix)
    burst = Burst(len(words))
    consumer = _consumer(session)
    try:
        records = [(word, b"") for word in words]
        producing = threading.Thread(
            target=produce_burst,
            args=(session.cluster.bootstrap, session.dataset.view.topic, records, burst),
            daemon=True,
        )
        producing.start()
        count_of = lambda value: decode_count(value).count  # noqa: E731
        count_burst(consumer, burst, count_of, session.timeout_s(_TIMEOUT_S), prefix.encode())
        producing.join(30.0)
    finally:
        consumer.close()
    done = burst.progress[-1][0]
    rate = burst.events / (done - burst.started)
    producer_rate = burst.events / (burst.produced_at - burst.started)
    section.figures.update(
        events=burst.events,
        vocabulary=settings.throughput_vocabulary,
        seconds=round(done - burst.started, 2),
        events_per_s=round(rate),
        producer_events_per_s=round(producer_rate),
        after_producer_done_seconds=round(done - burst.produced_at, 2),
        changelog_updates=len(burst.progress),
    )
    table = section.table("what", "figure")
    table.add(
        "burst", f"{fmt_num(burst.events)} events over {settings.throughput_vocabulary:,} words"
    )
    table.add(
        "producer", f"{fmt_num(producer_rate)} events/s ({burst.produced_at - burst.started:.1f} s)"
    )
    table.add(
        "**first produced -> all counted in the changelog**",
        f"**{fmt_num(rate)} events/s** ({done - burst.started:.1f} s)",
    )
    table.add("changelog progress steps seen (about one per micro-batch)", len(burst.progress))
    table.add("last count after the producer finished", f"{done - burst.produced_at:.1f} s")
    section.notes.append(
        "The producer and Spark share the 2 cores; when the pipeline finishes within about "
        "one trigger (500 ms) of the producer, the figure is producer-bound (a lower bound)."
    )
