"""The produce mutation's refusals, which never reach Kafka: switched off, a topic no view
reads, an empty key, a value that is no JSON object, a topic read with typed keys or registry
values. (Writes themselves are shown on the
real broker in tests/e2e/test_read_your_writes.py.)"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from gateway.config import GatewayConfig
from schema import KeyType, ValueFormat
from tests.gateway.fakes import FULL, WORDS, FakeNode, Model, codes, post_query, running_gateway
from tests.orders import ORDER_VIEWS
from tests.security.recording import RecordingProducer

P = 2
PRODUCE = """mutation($t: String!, $k: String!, $v: JSON) {
  produce(topic: $t, key: $k, value: $v) { token }
}"""


def produce(config: GatewayConfig, **variables: Any) -> dict[str, Any]:
    node = FakeNode("n1", Model.of_counts({}), range(P), P)

    async def scenario() -> dict[str, Any]:
        async with running_gateway([node], P, config=config) as http:
            return (await post_query(http, PRODUCE, variables))[1]

    return asyncio.run(scenario())


def test_a_switched_off_mutation_says_so() -> None:
    body = produce(GatewayConfig(), t="words", k="kafka")  # off by default
    assert codes(body) == ["PRODUCE_DISABLED"]
    assert "STATEFED_GATEWAY_PRODUCE" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    ("variables", "problem"),
    [
        ({"t": "nope", "k": "kafka"}, "no view reads topic 'nope'"),
        ({"t": "words", "k": ""}, "empty"),
        ({"t": "words", "k": "kafka", "v": [1, 2]}, "JSON object"),
    ],
)
def test_a_write_no_view_could_read_is_refused(variables: dict[str, Any], problem: str) -> None:
    body = produce(GatewayConfig(produce=True), **variables)
    assert codes(body) == ["BAD_USER_INPUT"]
    assert problem in body["errors"][0]["message"]


@pytest.mark.parametrize(
    "change",
    [{"key_type": KeyType.LONG}, {"value_format": ValueFormat.AVRO}],
    ids=["long keys", "avro values"],
)
def test_a_topic_read_with_typed_keys_or_registry_values_is_refused(change: dict[str, Any]) -> None:
    view = dataclasses.replace(WORDS, **change)
    node = FakeNode("n1", Model.of_counts({}), range(P), P)

    async def scenario() -> dict[str, Any]:
        config = GatewayConfig(produce=True)
        async with running_gateway([node], P, config=config, catalogue=(view,)) as http:
            return (await post_query(http, PRODUCE, {"t": "words", "k": "1"}))[1]

    body = asyncio.run(scenario())
    assert codes(body) == ["BAD_USER_INPUT"]
    assert "writes string keys and JSON values only" in body["errors"][0]["message"]


def test_an_event_time_outside_the_years_utc_holds_is_refused() -> None:
    mutation = """mutation($e: DateTime) {
      produce(topic: "words", key: "kafka", eventTime: $e) { token }
    }"""
    node = FakeNode("n1", Model.of_counts({}), range(P), P)

    async def scenario() -> dict[str, Any]:
        async with running_gateway([node], P, config=GatewayConfig(produce=True)) as http:
            return (await post_query(http, mutation, {"e": "0001-01-01T00:00:00+14:00"}))[1]

    body = asyncio.run(scenario())
    assert codes(body) == ["BAD_USER_INPUT"]
    assert "outside the years 1 to 9999 in UTC" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        # a time in the value past every date: named in milliseconds, not a traceback
        (
            'topic: "bookings", key: "c", value: {timestamp: 99999999999999999}',
            "eventTime 99999999999999999 ms since the epoch is more than",
        ),
        ('topic: "bookings", key: "c", eventTime: "1960-01-01T00:00:00Z"', "is not after 1970"),
        # a Kafka timestamp of 0 is "now" to the producer
        ('topic: "words", key: "k", eventTime: "1970-01-01T00:00:00Z"', "is not after 1970"),
        (
            'topic: "words", key: "k", value: {n: 123456789012345678901234567890}',
            "value cannot be written as JSON: Integer exceeds 64-bit range",
        ),
        # over the producer's message.max.bytes, under the request body's limit: never sent
        (
            f'topic: "words", key: "k", value: {{s: "{"x" * 1_000_050}"}}',
            "larger than the 1000000 the gateway's producer sends",
        ),
    ],
)
def test_a_write_no_view_could_use_or_the_producer_would_refuse_is_refused(
    arguments: str, problem: str
) -> None:
    node = FakeNode("n1", Model.of_counts({}), range(P), P)

    async def scenario() -> dict[str, Any]:
        config = GatewayConfig(produce=True)
        async with running_gateway([node], P, config=config, catalogue=FULL) as http:
            return (await post_query(http, f"mutation {{ produce({arguments}) {{ token }} }}"))[1]

    body = asyncio.run(scenario())
    assert codes(body) == ["BAD_USER_INPUT"], body
    assert problem in body["errors"][0]["message"]


def test_a_topic_whose_typed_keys_are_made_of_its_values_fields_takes_writes() -> None:
    """A grouped view's key is its group fields' values (STATUS_LINES: a record of a status
    and an Int quantity): it reads no record key, so the mutation's string key suits it."""
    node = FakeNode("n1", Model.of_counts({}), range(P), P)
    producer = RecordingProducer()
    value = {"timestamp": 1_767_225_600_000, "status": "PAID", "quantity": 2, "amount": 5.0}

    async def scenario() -> dict[str, Any]:
        config = GatewayConfig(produce=True)
        async with running_gateway(
            [node], P, config=config, catalogue=ORDER_VIEWS, producer=producer
        ) as http:
            variables = {"t": "orders", "k": "c1", "v": value}
            return (await post_query(http, PRODUCE, variables))[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    assert [(r.topic, r.key) for r in producer.records] == [("orders", "c1")]
