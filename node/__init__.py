"""The node process: LevelDB partition stores, the changelog materializer, standby copies,
membership, the GraphQL subgraph over the partitions this node holds, and the change feed
of what it applies (`/feed`)."""

from node.changelog.feed import ChangeFeed
from node.changelog.materializer import Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import NodeError, NotOwnerError
from node.replication.membership import MembershipPublisher
from node.replication.standby import StandbyReplicator
from node.serve.app import NodeApp
from node.serve.server import run_node
from node.storage.store import ChangeBatch, LevelDBStore, PartitionStore
from node.subgraph.schema import build_subgraph

__all__ = [
    "ChangeBatch",
    "ChangeFeed",
    "LevelDBStore",
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
    "run_node",
]
