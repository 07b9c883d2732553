"""The gateway's and a node's `/metrics` text, with their per-request histograms observed,
parses into the families they exported before those histograms stopped taking locks (then
prometheus_client `Histogram`s): the same names, types, sample suffixes and label names."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics import GatewayMetrics
from node.changelog.partitions import PartitionRegistry
from node.serve.metrics import NodeMetrics
from runtime.metrics import exposition
from schema import CATALOGUE

Families = dict[str, tuple[str, list[str], list[str]]]
_HISTOGRAM = ["_bucket", "_count", "_sum"]


def _families(text: bytes) -> Families:
    """Each family's type, sample name suffixes and label names (`le` left out)."""
    found: Families = {}
    for family in text_string_to_metric_families(text.decode()):
        suffixes = sorted({s.name.removeprefix(family.name) for s in family.samples})
        labels = sorted({name for s in family.samples for name in s.labels} - {"le"})
        found[family.name] = (family.type, suffixes, labels)
    return found


def _histogram(name: str, labels: list[str]) -> Families:
    """A histogram family as prometheus_client exports it, `_created` a gauge apart."""
    return {name: ("histogram", _HISTOGRAM, labels), f"{name}_created": ("gauge", [""], labels)}


def test_the_gateway_exports_the_families_it_did() -> None:
    metrics = GatewayMetrics()
    for seconds in (0.0004, 0.003, 0.2, 30.0):
        metrics.executed(("query", "wordCount"), seconds)
        metrics.node_answered("node-1", seconds)
        metrics.coalesced(3)
    metrics.refused("BAD_REQUEST")
    metrics.node_failed("node-1", "timeout")
    assert _families(exposition(metrics.registry)) == {
        **_histogram("statefed_gateway_request_duration_seconds", ["operation", "root_field"]),
        **_histogram("statefed_gateway_node_call_duration_seconds", ["node"]),
        **_histogram("statefed_gateway_coalesced_lookups", []),
        **_histogram("statefed_gateway_event_loop_lag_seconds", []),
        "statefed_gateway_errors": ("counter", ["_total"], ["code"]),
        "statefed_gateway_errors_created": ("gauge", [""], ["code"]),
        "statefed_gateway_node_call_failures": ("counter", ["_total"], ["node", "reason"]),
        "statefed_gateway_node_call_failures_created": ("gauge", [""], ["node", "reason"]),
    }


def test_a_node_exports_the_families_it_did() -> None:
    metrics = NodeMetrics(PartitionRegistry("n"), CATALOGUE)
    metrics.answered(0.001)
    metrics.answered(0.3)
    # no partition held: the per-copy gauges and the store errors have no samples yet
    empty: tuple[str, list[str], list[str]] = ("gauge", [], [])
    assert _families(exposition(metrics.registry)) == {
        **_histogram("statefed_node_request_duration_seconds", []),
        "statefed_node_applied_offset": empty,
        "statefed_node_end_offset": empty,
        "statefed_node_view_lag_records": empty,
        "statefed_node_lag_records": empty,
        "statefed_node_restoring": empty,
        "statefed_node_restore_done_records": empty,
        "statefed_node_restore_target_records": empty,
        "statefed_node_store_failing": empty,
        "statefed_node_lag_unknown": empty,
        "statefed_node_store_reads": ("counter", ["_total"], []),
        "statefed_node_store_errors": ("counter", [], []),
        "statefed_node_state": ("gauge", [""], ["state"]),
    }


def test_the_histograms_count_every_observation_in_one_bucket() -> None:
    metrics = NodeMetrics(PartitionRegistry("n"), CATALOGUE)
    for seconds in (0.0001, 0.0007, 0.0007, 0.2, 9.0):
        metrics.answered(seconds)
    (family,) = [
        f
        for f in text_string_to_metric_families(exposition(metrics.registry).decode())
        if f.name == "statefed_node_request_duration_seconds"
    ]
    values = {(s.name, s.labels.get("le")): s.value for s in family.samples}
    name = family.name
    assert values[(f"{name}_bucket", "0.0005")] == 1
    assert values[(f"{name}_bucket", "0.001")] == 3
    assert values[(f"{name}_bucket", "0.25")] == 4
    assert values[(f"{name}_bucket", "5.0")] == 4
    assert values[(f"{name}_bucket", "+Inf")] == values[(f"{name}_count", None)] == 5
    assert values[(f"{name}_sum", None)] == sum((0.0001, 0.0007, 0.0007, 0.2, 9.0))
