"""The node process (stores, materializer, membership, subgraph) and the local tooling.

Public names resolve lazily (PEP 562): Spark's Python workers import `node.pipeline`,
and must not pay for strawberry, plyvel and uvicorn, which the node process needs.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ChangeBatch",
    "EmbeddedBroker",
    "LevelDBStore",
    "LocalCluster",
    "ManagedProcess",
    "Materializer",
    "MembershipPublisher",
    "NodeApp",
    "NodeConfig",
    "NodeError",
    "NotOwnerError",
    "PartitionRegistry",
    "PartitionStore",
    "StandbyReplicator",
    "build_subgraph",
    "ensure_topics",
    "produce_keys",
    "produce_records",
    "run_node",
    "statefed_topics",
]

_HOMES = {
    "ChangeBatch": "node.store",
    "EmbeddedBroker": "node.broker",
    "LevelDBStore": "node.store",
    "LocalCluster": "node.localcluster",
    "ManagedProcess": "node.processes",
    "Materializer": "node.materializer",
    "MembershipPublisher": "node.membership",
    "NodeApp": "node.app",
    "NodeConfig": "node.config",
    "NodeError": "node.errors",
    "NotOwnerError": "node.errors",
    "PartitionRegistry": "node.partitions",
    "PartitionStore": "node.store",
    "StandbyReplicator": "node.standby",
    "build_subgraph": "node.subgraph",
    "ensure_topics": "node.topics",
    "produce_keys": "node.produce",
    "produce_records": "node.produce",
    "run_node": "node.server",
    "statefed_topics": "node.topics",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'node' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)
