"""Writes through the gateway: the produce mutation is off unless switched on, an eventTime
that would move the pipeline's watermark (a year ahead) or that every window has forgotten
is refused before anything is written, and each principal has its own rate."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from gateway.cluster.consistency import Token
from gateway.config import GatewayConfig
from gateway.model.errors import RateLimitedError
from gateway.model.timestamps import from_ms
from gateway.writes.policy import RateLimiter
from gateway.writes.producer import EventProducer
from runtime.topics import ensure_topics
from schema import DEMO_DOMAIN, WORD_COUNTS, View, partition_for
from tests.gateway.fakes import FakeNode, Model, codes, running_gateway
from tests.security.recording import Produced, RecordingProducer
from tooling.broker import KafkaBroker

P = 2
NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the gateway's clock in these tests
YEAR_MS = 365 * 86_400_000
WINDOWED = next(v for v in DEMO_DOMAIN if v.window is not None)  # host_access_per_minute
assert WINDOWED.window is not None
RETENTION_MS = WINDOWED.window.retention_ms
PRODUCE = """mutation($t: String!, $k: String!, $at: DateTime) {
  produce(topic: $t, key: $k, eventTime: $at) { topic partition offset token }
}"""


class Clock:
    """The gateway's clock, moved by the test."""

    def __init__(self, now_ms: int = NOW_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def gateway(
    config: GatewayConfig,
    catalogue: tuple[View, ...] = (WORD_COUNTS, *DEMO_DOMAIN),
    producer: EventProducer | None = None,
    clock: Callable[[], int] | None = None,
) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    """The gateway over one fake node holding every partition of `catalogue`."""
    node = FakeNode("n0", Model(), range(P), P, catalogue)
    return running_gateway(
        [node], P, config, catalogue=catalogue, producer=producer, clock=clock or Clock()
    )


async def produce(
    http: httpx.AsyncClient, topic: str, key: str, at_ms: int | None = None
) -> dict[str, Any]:
    at = None if at_ms is None else from_ms(at_ms).isoformat()
    variables = {"t": topic, "k": key, "at": at}
    response = await http.post("/graphql", json={"query": PRODUCE, "variables": variables})
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def produced(config: GatewayConfig, *writes: tuple[str, int | None]) -> list[dict[str, Any]]:
    """The answers to producing to (topic, eventTime) in turn, through a recording producer."""

    async def scenario() -> list[dict[str, Any]]:
        async with gateway(config, producer=RecordingProducer()) as http:
            return [await produce(http, topic, "k", at) for topic, at in writes]

    return asyncio.run(scenario())


ON = GatewayConfig(produce=True)


def test_produce_is_off_by_default_and_says_which_variable_turns_it_on() -> None:
    producer = RecordingProducer()

    async def scenario() -> dict[str, Any]:
        async with gateway(GatewayConfig(), producer=producer) as http:
            return await produce(http, "words", "kafka")

    body = asyncio.run(scenario())
    assert codes(body) == ["PRODUCE_DISABLED"]
    assert "STATEFED_GATEWAY_PRODUCE=true" in body["errors"][0]["message"]
    assert producer.snapshot() == []


def high_watermark(bootstrap: str, topic: str, partition: int, timeout_s: float = 30.0) -> int:
    """The partition's end offset as a fetch reports it (the embedded broker's ListOffsets
    LATEST is wrong): read to the end, then the fetch's cached high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"hw-{uuid.uuid4().hex}", "log_level": 3}
    )
    tp = TopicPartition(topic, partition, 0)
    consumer.assign([tp])
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            consumer.consume(100, 0.5)
            high = consumer.get_watermark_offsets(tp, cached=True)[1]
            position = consumer.position([tp])[0].offset
            if high >= 0 and position >= high:
                return int(high)
        raise AssertionError(f"no fetch of {topic}[{partition}] reported a high watermark")
    finally:
        consumer.close()


def test_an_event_a_year_ahead_is_refused_and_never_reaches_the_topic(
    broker: KafkaBroker,
) -> None:
    tag = uuid.uuid4().hex[:8]
    view = dataclasses.replace(WINDOWED, name=f"t{tag}_per_minute", topic=f"t{tag}.pageviews")
    ensure_topics(broker.bootstrap, {view.topic: P})
    config = GatewayConfig(bootstrap=broker.bootstrap, produce=True)
    clock = Clock(int(time.time() * 1000))  # the broker stamps nothing: any clock would do
    key = "graphql.org"

    async def scenario() -> list[dict[str, Any]]:
        async with gateway(config, catalogue=(view,), clock=clock) as http:
            return [
                await produce(http, view.topic, key),
                await produce(http, view.topic, key, clock.now_ms + YEAR_MS),
                await produce(http, view.topic, key),
            ]

    before, ahead, after = asyncio.run(scenario())
    assert codes(ahead) == ["BAD_USER_INPUT"]
    message = ahead["errors"][0]["message"]
    assert "STATEFED_GATEWAY_PRODUCE_MAX_AHEAD_MS" in message and "300000 ms ahead" in message
    assert ahead["data"] is None
    first, last = before["data"]["produce"], after["data"]["produce"]
    partition = partition_for(key, P)
    assert first["partition"] == last["partition"] == partition
    # offsets of a partition are consecutive: nothing was written between the two writes
    # (offsets are Longs: strings of decimal digits)
    first_offset, last_offset = int(first["offset"]), int(last["offset"])
    assert last_offset == first_offset + 1
    assert high_watermark(broker.bootstrap, view.topic, partition) == last_offset + 1


class FarProducer(RecordingProducer):
    """A RecordingProducer whose partitions hold more records than a 32-bit Int counts."""

    async def produce(self, topic: str, key: str, value: bytes, timestamp_ms: int) -> Token:
        token = await super().produce(topic, key, value, timestamp_ms)
        return dataclasses.replace(token, offset=token.offset + 2**40)


def test_an_offset_past_32_bits_is_answered_as_a_long() -> None:
    async def scenario() -> dict[str, Any]:
        async with gateway(ON, producer=FarProducer()) as http:
            return await produce(http, "words", "kafka")

    body = asyncio.run(scenario())
    assert "errors" not in body, body  # an Int would fail the field after the write
    produced = body["data"]["produce"]
    assert produced["offset"] == str(2**40)  # a Long: a string of decimal digits
    assert produced["token"] == f"words:{produced['partition']}:{2**40}"


def test_an_event_within_the_bound_ahead_is_taken() -> None:
    (body,) = produced(ON, ("pageviews", NOW_MS + ON.produce_max_ahead_ms))
    assert "errors" not in body, body


def test_an_event_older_than_the_topics_windows_keep_is_refused() -> None:
    too_old = NOW_MS - RETENTION_MS - 1
    refused, kept = produced(ON, ("pageviews", too_old), ("pageviews", too_old + 1))
    assert codes(refused) == ["BAD_USER_INPUT"]
    message = refused["errors"][0]["message"]
    assert WINDOWED.name in message and f"retention {RETENTION_MS} ms" in message
    assert "errors" not in kept, kept


def test_a_topic_without_windowed_views_takes_any_past_event() -> None:
    (body,) = produced(ON, ("words", NOW_MS - 10 * YEAR_MS))
    assert "errors" not in body, body


def test_the_bound_ahead_is_configurable() -> None:
    config = GatewayConfig(produce=True, produce_max_ahead_ms=0)
    ahead, now = produced(config, ("words", NOW_MS + 1), ("words", NOW_MS))
    assert codes(ahead) == ["BAD_USER_INPUT"]
    assert "errors" not in now, now


PRODUCE_VALUE = """mutation($t: String!, $k: String!, $v: JSON, $at: DateTime) {
  produce(topic: $t, key: $k, value: $v, eventTime: $at) { offset }
}"""


def produced_values(
    *writes: tuple[dict[str, Any], int | None],
) -> tuple[list[dict[str, Any]], list[Produced]]:
    """The answers to producing each (value, eventTime) to `pageviews` (whose views read the
    event time from the value's `timestamp`), and what reached the producer."""
    producer = RecordingProducer()

    async def scenario() -> list[dict[str, Any]]:
        async with gateway(ON, producer=producer) as http:
            answers = []
            for value, at_ms in writes:
                at = None if at_ms is None else from_ms(at_ms).isoformat()
                variables = {"t": "pageviews", "k": "graphql.org", "v": value, "at": at}
                body = {"query": PRODUCE_VALUE, "variables": variables}
                answers.append((await http.post("/graphql", json=body)).json())
            return answers

    answers = asyncio.run(scenario())
    return answers, producer.snapshot()


def test_an_event_time_in_the_value_is_bounded_as_event_time_is() -> None:
    assert WINDOWED.event_time_field == "timestamp"
    answers, written = produced_values(
        ({"timestamp": NOW_MS + YEAR_MS, "path": "/"}, None),
        ({"timestamp": NOW_MS - RETENTION_MS - 1, "path": "/"}, None),
        ({"timestamp": NOW_MS - 1000, "path": "/"}, None),
    )
    ahead, too_old, taken = answers
    assert codes(ahead) == ["BAD_USER_INPUT"]
    assert "STATEFED_GATEWAY_PRODUCE_MAX_AHEAD_MS" in ahead["errors"][0]["message"]
    assert codes(too_old) == ["BAD_USER_INPUT"]
    assert "errors" not in taken, taken
    # only the write within the bounds reached Kafka, stamped with the value's time
    assert [(w.timestamp_ms, orjson.loads(w.value)) for w in written] == [
        (NOW_MS - 1000, {"timestamp": NOW_MS - 1000, "path": "/"})
    ]


def test_an_event_time_given_twice_must_agree_and_be_whole_milliseconds() -> None:
    answers, written = produced_values(
        ({"timestamp": NOW_MS - 1000}, NOW_MS),
        ({"timestamp": "2026-01-01T00:00:00Z"}, None),
        ({"timestamp": 1.5}, None),
        ({"timestamp": float(NOW_MS)}, NOW_MS),
    )
    differ, text, fraction, agree = answers
    assert codes(differ) == ["BAD_USER_INPUT"]
    message = differ["errors"][0]["message"]
    assert f"value.timestamp {NOW_MS - 1000}, eventTime {NOW_MS} ms" in message
    for refused in (text, fraction):
        assert codes(refused) == ["BAD_USER_INPUT"]
        assert "value.timestamp is the event time" in refused["errors"][0]["message"]
    assert "errors" not in agree, agree
    assert [(w.timestamp_ms, orjson.loads(w.value)) for w in written] == [
        (NOW_MS, {"timestamp": NOW_MS})
    ]


def test_the_limiter_gives_each_principal_its_own_bucket_and_refills_with_time() -> None:
    clock = Clock()
    limiter = RateLimiter(3, clock)
    for _ in range(3):
        limiter.take("alice")
    with pytest.raises(RateLimitedError) as refused:
        limiter.take("alice")
    assert refused.value.extensions() == {"code": "RATE_LIMITED", "limit": 3, "retryAfterMs": 334}
    assert "STATEFED_GATEWAY_PRODUCE_RATE" in str(refused.value)
    for _ in range(3):  # bob is not limited by what alice did
        limiter.take("bob")
    clock.now_ms += 334  # one token back for alice
    limiter.take("alice")
    with pytest.raises(RateLimitedError):
        limiter.take("alice")
    clock.now_ms += 10_000  # a quiet spell refills to the burst, not beyond
    for _ in range(3):
        limiter.take("alice")
    with pytest.raises(RateLimitedError):
        limiter.take("alice")


def test_a_principal_over_its_rate_is_refused_with_a_retry_hint_and_nothing_written() -> None:
    producer = RecordingProducer()
    clock = Clock()
    config = GatewayConfig(produce=True, produce_rate=2)

    async def scenario() -> list[dict[str, Any]]:
        async with gateway(config, producer=producer, clock=clock) as http:
            answers = [await produce(http, "words", f"k{i}") for i in range(3)]
            clock.now_ms += 500  # one token back
            answers.append(await produce(http, "words", "k3"))
            return answers

    first, second, third, later = scenario_answers = asyncio.run(scenario())
    assert [codes(a) for a in scenario_answers] == [[], [], ["RATE_LIMITED"], []]
    extensions = third["errors"][0]["extensions"]
    assert extensions == {"code": "RATE_LIMITED", "limit": 2, "retryAfterMs": 500}
    assert "'anonymous'" in third["errors"][0]["message"]
    assert [r.key for r in producer.snapshot()] == ["k0", "k1", "k3"]
    assert first["data"] and second["data"] and later["data"]


def test_a_refused_write_spends_no_token() -> None:
    config = GatewayConfig(produce=True, produce_rate=1)
    refused, taken = produced(config, ("words", NOW_MS + 10 * YEAR_MS), ("words", None))
    assert codes(refused) == ["BAD_USER_INPUT"]
    assert "errors" not in taken, taken
