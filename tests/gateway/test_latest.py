"""Latest views through the gateway: point and multi-key lookups grouped per owning node,
input order, null for unknown keys, typed value fields, partial results."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from gateway.config import GatewayConfig
from schema import EventRow, FieldType, ValueField, View, ViewKind, partition_for
from tests.gateway.fakes import (
    FULL,
    LAST_BOOKING,
    WORDS,
    Model,
    codes,
    fake_nodes,
    feed_for,
    post_query,
    running_gateway,
    to_iso,
)

P = 6
T0 = 1_700_000_000_000
CUSTOMERS = [f"c{i:02d}" for i in range(30)]


def bookings() -> Model:
    """Several bookings per customer, some out of order and some at equal event times."""
    truth = Model()
    for i, customer in enumerate(CUSTOMERS):
        for j in range(i % 4 + 1):
            event_ms = T0 + (j * 7919) % 5 * 1000  # not monotonic in j
            truth.add_event(
                LAST_BOOKING,
                EventRow(customer, event_ms, i % P, 10 * i + j, {"trip": f"trip-{i}-{j}"}),
            )
    return truth


def booking(truth: Model, customer: str) -> dict[str, Any] | None:
    event = truth.latest(LAST_BOOKING, customer)
    if event is None:
        return None
    time = to_iso(event.event_ms).replace("Z", "+00:00")
    return {"customer": customer, "trip": event.fields["trip"], "eventTime": time}


MANY = "query($c: [String!]!) { lastBookings(customers: $c) { customer trip eventTime } }"


@pytest.mark.parametrize("node_count", [1, 3])
def test_many_keys_are_one_request_per_owning_node_in_input_order(node_count: int) -> None:
    truth = bookings()
    nodes = fake_nodes(truth, P, node_count, FULL)
    asked = ["c07", "nobody", "c03", "c07", "c21", "c00", *CUSTOMERS[10:20], "zz"]

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            return (await post_query(http, MANY, {"c": asked}))[1]

    body = asyncio.run(scenario())
    assert "errors" not in body
    assert body["data"]["lastBookings"] == [booking(truth, c) for c in asked]
    owners = {n.node_id for n in nodes for c in asked if partition_for(c, P) in n.held}
    assert [n.requests for n in nodes] == [int(n.node_id in owners) for n in nodes]
    assert all(set(n.fields_asked) <= {"_entities"} for n in nodes)
    assert all(set(n.entities_asked) <= {LAST_BOOKING.type_name} for n in nodes)
    assert sorted(k for n in nodes for k in n.keys_asked) == sorted(set(asked))


def test_point_and_many_lookups_of_one_request_share_node_requests() -> None:
    truth = bookings()
    nodes = fake_nodes(truth, P, 3, FULL)
    query = """{ a: lastBooking(customer: "c01") { trip }
                 b: lastBooking(customer: "nobody") { trip }
                 c: lastBookings(customers: ["c02", "c03", "c04"]) { customer }
                 w: wordCount(word: "c01") { count } }"""

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            return (await post_query(http, query))[1]

    body = asyncio.run(scenario())
    assert body["data"]["a"] == {"trip": booking(truth, "c01")["trip"]}  # type: ignore[index]
    assert body["data"]["b"] is None
    assert body["data"]["c"] == [{"customer": c} for c in ("c02", "c03", "c04")]
    assert body["data"]["w"] is None
    per_node = [n.entities_asked.count(LAST_BOOKING.type_name) for n in nodes]
    assert all(count <= 1 for count in per_node)
    assert sum(n.entities_asked.count(WORDS.type_name) for n in nodes) == 1


SENSORS = View(
    name="sensor_latest",
    topic="sensors",
    kind=ViewKind.LATEST,
    key_field="sensor",
    type_name="SensorReading",
    point_field="reading",
    many_field="readings",
    event_time_field="at",
    value_fields=(
        ValueField("celsius", FieldType.FLOAT),
        ValueField("ok", FieldType.BOOLEAN),
        ValueField("seq", FieldType.INT),
        ValueField("from", FieldType.STRING),  # a Python keyword as a field name
    ),
)


def test_a_view_of_its_own_with_typed_and_missing_value_fields() -> None:
    truth = Model()
    truth.add_event(SENSORS, EventRow("s1", T0, 0, 1, {"celsius": 21.5, "ok": True, "seq": 7}))
    truth.add_event(SENSORS, EventRow("s2", T0, 0, 2, {"celsius": 3, "from": "roof"}))
    nodes = fake_nodes(truth, P, 2, (SENSORS,))
    query = '{ readings(sensors: ["s1", "s2", "s3"]) { sensor celsius ok seq from eventTime } }'

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=(SENSORS,)) as http:
            return (await post_query(http, query))[1]

    body = asyncio.run(scenario())
    time = to_iso(T0).replace("Z", "+00:00")
    assert body["data"]["readings"] == [
        {"sensor": "s1", "celsius": 21.5, "ok": True, "seq": 7, "from": None, "eventTime": time},
        {
            "sensor": "s2",
            "celsius": 3.0,
            "ok": None,
            "seq": None,
            "from": "roof",
            "eventTime": time,
        },
        None,
    ]


BAD = [
    ('{ lastBooking(customer: "") { trip } }', "BAD_USER_INPUT"),
    ('{ lastBookings(customers: ["c01", ""]) { trip } }', "BAD_USER_INPUT"),
    ("{ lastBooking { trip } }", "GRAPHQL_VALIDATION_FAILED"),
    ('{ lastBooking(customer: "c01") { nope } }', "GRAPHQL_VALIDATION_FAILED"),
]


@pytest.mark.parametrize(("query", "code"), BAD)
def test_bad_lookups_are_errors_with_codes(query: str, code: str) -> None:
    nodes = fake_nodes(bookings(), P, 3, FULL)

    async def scenario() -> tuple[int, dict[str, Any]]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            return await post_query(http, query)

    status, body = asyncio.run(scenario())
    assert status == 200 and codes(body) == [code]
    assert sum(n.requests for n in nodes) == 0


def test_a_node_answering_nonsense_is_a_protocol_error_for_its_partitions_only() -> None:
    truth = bookings()
    nodes = fake_nodes(truth, P, 3, FULL)
    broken = nodes[0]

    def nonsense(request: httpx.Request) -> httpx.Response:
        representations = orjson.loads(request.content)["variables"]["r"]
        wrong = [{"k": r["customer"], "t": "yesterday", "v0": "x"} for r in representations]
        return httpx.Response(200, content=orjson.dumps({"data": {"r": wrong}}))

    async def scenario() -> dict[str, Any]:
        config = GatewayConfig(retries=0)
        extra = {broken.url(): httpx.MockTransport(nonsense)}
        async with running_gateway(nodes, P, config, feed_for(nodes, P), extra, FULL) as http:
            return (await post_query(http, MANY, {"c": CUSTOMERS}))[1]

    body = asyncio.run(scenario())
    bad = {partition_for(c, P) for c in CUSTOMERS} & broken.held
    assert sorted(e["extensions"]["partition"] for e in body["errors"]) == sorted(bad)
    assert {e["extensions"]["reason"] for e in body["errors"]} == {"PROTOCOL_ERROR"}
    for customer, row in zip(CUSTOMERS, body["data"]["lastBookings"], strict=True):
        held_by_broken = partition_for(customer, P) in broken.held
        assert row == (None if held_by_broken else booking(truth, customer))
