"""The node process: LevelDB partition stores, the changelog materializer, standby copies,
membership, the GraphQL subgraph over the partitions this node holds, and the change feed
of what it applies (`/feed`)."""

from node.app import NodeApp
from node.config import NodeConfig
from node.errors import NodeError, NotOwnerError
from node.feed import ChangeFeed
from node.materializer import Materializer
from node.membership import MembershipPublisher
from node.partitions import PartitionRegistry
from node.server import run_node
from node.standby import StandbyReplicator
from node.store import ChangeBatch, LevelDBStore, PartitionStore
from node.subgraph import build_subgraph

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
