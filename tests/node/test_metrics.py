"""A node's `/metrics`, read from its partition registry at scrape time."""

from __future__ import annotations

from node.changelog.partitions import PartitionRegistry
from node.serve.metrics import NodeMetrics
from schema import CATALOGUE, Role
from tests.node.memory_store import MemoryStore

ERRORS = "statefed_node_store_errors_total"


def test_a_held_partitions_store_errors_are_exported_at_0_before_the_first() -> None:
    """`increase()` takes a series' first sample as its start: a counter that appeared with
    a partition's first failed write would show no increase for it."""
    registry = PartitionRegistry("n1")
    metrics = NodeMetrics(registry, CATALOGUE)
    registry.attach(0, MemoryStore(), Role.ACTIVE, {})
    registry.attach(1, MemoryStore(), Role.STANDBY, {})
    assert metrics.registry.get_sample_value(ERRORS, {"partition": "0"}) == 0
    assert metrics.registry.get_sample_value(ERRORS, {"partition": "1"}) == 0
    registry.record_store_error(0, "disk full")
    registry.detach(0)  # the count of a partition let go stays
    assert metrics.registry.get_sample_value(ERRORS, {"partition": "0"}) == 1
    assert metrics.registry.get_sample_value(ERRORS, {"partition": "2"}) is None


def test_a_copys_lag_unknown_while_the_broker_does_not_answer_is_a_gauge() -> None:
    """A broker outage leaves the lag gauges at their last values: this one tells."""
    registry = PartitionRegistry("n1")
    metrics = NodeMetrics(registry, CATALOGUE)
    registry.attach(0, MemoryStore(), Role.ACTIVE, {})
    copy = {"partition": "0", "role": "ACTIVE"}
    assert metrics.registry.get_sample_value("statefed_node_lag_unknown", copy) == 0
    registry.set_broker_unreachable_since(1_700_000_000_000)
    assert metrics.registry.get_sample_value("statefed_node_lag_unknown", copy) == 1
    registry.set_broker_unreachable_since(None)
    assert metrics.registry.get_sample_value("statefed_node_lag_unknown", copy) == 0
