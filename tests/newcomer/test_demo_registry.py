"""`statefed demo` with a catalogue of one's own that reads Avro values: the demo runs a
Schema Registry too, waits for the view's subject, and the orders a producer writes with
Confluent's Avro serializer (which registers the schema with its first record) are
answered through the gateway. The demo stops the registry with everything else.

The demo serves fixed places (port 8100, Kafka on 9092, the registry on 8081): the lock of
`demo_places` keeps it from running beside the other newcomer tests' demos.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.newcomer.shell import Output, demo_places, start, stop
from tooling.processes import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

BIN = Path(sys.executable).parent
START_S = 480.0  # the registry, the broker, nodes and gateway; the pipeline after the subject
STOP_S = 120.0
ANSWER_S = 120.0
GATEWAY = "http://127.0.0.1:8100/graphql"
REGISTRY = "http://127.0.0.1:8081/apis/ccompat/v7"
CATALOGUE = """\
from schema import FieldType, ValueField, ValueFormat, View, ViewKind

CATALOGUE = [
    View(
        name="last_order",
        topic="orders",
        kind=ViewKind.LATEST,
        key_field="customer",
        type_name="LastOrder",
        point_field="lastOrder",
        many_field="lastOrders",
        value_fields=(ValueField("item"), ValueField("quantity", FieldType.INT)),
        value_format=ValueFormat.AVRO,
    ),
]
"""
ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "item", "type": "string"}, {"name": "quantity", "type": "int"}],
}
ORDERS = {f"c{i}": {"item": f"item-{i}", "quantity": i} for i in range(10)}


def _produce() -> None:
    """The orders, as a Python producer of Avro writes them (its schema registered by its
    first record), placed as Kafka's Java producer places keys."""
    with SchemaRegistryClient({"url": REGISTRY}) as client:
        serialize = AvroSerializer(client, json.dumps(ORDER))
        producer = Producer(
            {"bootstrap.servers": "127.0.0.1:9092", "partitioner": "murmur2_random"}
        )
        context = SerializationContext("orders", MessageField.VALUE)
        for customer, order in ORDERS.items():
            producer.produce("orders", serialize(order, context), customer.encode())
        assert producer.flush(30) == 0


def _answers() -> dict[str, object] | None:
    query = "query($c: [String!]!) { lastOrders(customers: $c) { customer item quantity } }"
    try:
        body = httpx.post(GATEWAY, json={"query": query, "variables": {"c": list(ORDERS)}}).json()
    except (httpx.HTTPError, ValueError):
        return None
    rows = (body.get("data") or {}).get("lastOrders") or []
    if None in rows or len(rows) != len(ORDERS):
        return None
    return {row["customer"]: {"item": row["item"], "quantity": row["quantity"]} for row in rows}


def test_the_demo_runs_a_registry_waits_for_the_subject_and_serves_avro_orders(
    tmp_path: Path,
) -> None:
    (tmp_path / "views.py").write_text(CATALOGUE)
    command = "STATEFED_CATALOGUE=views:CATALOGUE statefed demo"
    with demo_places(), start(["bash", "-c", command], tmp_path, BIN) as demo:
        assert demo.stdout is not None
        output = Output(demo.stdout)
        try:
            wait_until(
                lambda: any("waiting for subjects orders-value" in line for line in output.lines),
                START_S,
                lambda: f"the demo to wait for the subject:\n{output.tail()}",
                1.0,
            )
            _produce()
            wait_until(
                lambda: any(line.startswith("GraphiQL: ") for line in output.lines),
                START_S,
                lambda: f"the demo to print the GraphiQL URL:\n{output.tail()}",
                1.0,
            )
            answered = wait_until(_answers, ANSWER_S, "every order to be answered", 1.0)
        finally:
            stopped = stop(demo, signal.SIGINT, STOP_S)
            output.finish()
    assert stopped, f"the demo outlived Ctrl-C by {STOP_S} s:\n{output.tail()}"
    assert answered == ORDERS
    assert any("Schema Registry" in line and "stopped" in line for line in output.lines), (
        output.tail()
    )
