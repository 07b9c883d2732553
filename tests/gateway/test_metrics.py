"""The gateway's metric labels stay bounded: root fields from the schema, codes capped."""

from __future__ import annotations

import asyncio
import dataclasses

from graphql import OperationDefinitionNode, parse
from prometheus_client.parser import text_string_to_metric_families

from gateway.api.schema import build_schema
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.execute.labels import OperationLabels
from gateway.metrics import GatewayMetrics, known_error_codes
from runtime.metrics import bounded, exposition
from tests.gateway.fakes import WORDS, FakeNode, Model, client_for, feed_for


def _operation(text: str) -> OperationDefinitionNode:
    definition = parse(text).definitions[0]
    assert isinstance(definition, OperationDefinitionNode)
    return definition


def test_labels_are_the_operation_type_and_a_root_field_of_the_schema() -> None:
    labels = OperationLabels(build_schema()._schema)
    assert labels(_operation('{ wordCount(word: "a") { count } }')) == (
        "query",
        "wordCount",
    )
    assert labels(_operation("{ madeUp }")) == ("query", "other")
    two = "{ a: cluster { routingVersion } b: cluster { routingVersion } }"
    assert labels(_operation(two)) == ("query", "multiple")
    spread = "{ ...F } fragment F on Query { cluster { routingVersion } }"
    assert labels(_operation(spread)) == ("query", "other")


def test_error_codes_beyond_the_bound_count_as_other() -> None:
    metrics = GatewayMetrics()
    for i in range(100):
        metrics.refused(f"CODE_{i}")
    families = {
        f.name: f for f in text_string_to_metric_families(exposition(metrics.registry).decode())
    }
    codes = {
        s.labels["code"]
        for s in families["statefed_gateway_errors"].samples
        if s.name.endswith("_total")
    }
    assert len(codes) == 65 and "other" in codes
    known: set[str] = set()
    assert [bounded(v, known, limit=2) for v in ("a", "b", "c", "a")] == ["a", "b", "other", "a"]


def test_the_gateways_own_error_codes_are_exported_at_0_from_the_start() -> None:
    """`rate()` takes a series' first sample as its start: a counter that appeared with the
    first error of its code would show no rate for it."""
    codes = known_error_codes()
    assert {
        *("PARTITION_UNAVAILABLE", "CONSISTENCY_TIMEOUT", "ROUTING_NOT_READY", "FORBIDDEN"),
        *("GRAPHQL_PARSE_FAILED", "GRAPHQL_VALIDATION_FAILED", "BAD_USER_INPUT"),
        *("INTERNAL_SERVER_ERROR", "QUERY_TOO_COSTLY", "BAD_REQUEST"),
    } <= set(codes)
    metrics = GatewayMetrics()
    name = "statefed_gateway_errors_total"
    assert {
        c: metrics.registry.get_sample_value(name, {"code": c}) for c in codes
    } == dict.fromkeys(codes, 0.0)
    metrics.errors([{"extensions": {"code": "PARTITION_UNAVAILABLE"}}])
    assert metrics.registry.get_sample_value(name, {"code": "PARTITION_UNAVAILABLE"}) == 1


def test_routing_kept_through_a_broker_outage_is_a_gauge() -> None:
    """While the broker does not answer membership, nodes' lag gauges keep their last
    values and the routing table is kept: this gauge tells."""
    nodes = [FakeNode("n1", Model.of_counts({}), range(2), 2)]
    feed = feed_for(nodes, 2, (WORDS,))
    app = GatewayApp(GatewayConfig(), feed=feed, client=client_for(nodes), catalogue=(WORDS,))

    async def scenario() -> list[float | None]:
        await app.startup()
        try:
            seen = [app.metrics.registry.get_sample_value("statefed_gateway_routing_stale")]
            feed.publish(dataclasses.replace(feed.current, stale_since_ms=1_700_000_000_000))
            seen.append(app.metrics.registry.get_sample_value("statefed_gateway_routing_stale"))
            return seen
        finally:
            await app.shutdown()

    assert asyncio.run(scenario()) == [0, 1]
