"""The node process: LevelDB partition stores, the changelog materializer, standby copies,
membership, and the GraphQL subgraph over the partitions this node holds."""

from node.app import NodeApp
from node.config import NodeConfig
from node.errors import NodeError, NotOwnerError
from node.materializer import Materializer
from node.membership import MembershipPublisher
from node.partitions import PartitionRegistry
from node.server import run_node
from node.standby import StandbyReplicator
from node.store import ChangeBatch, LevelDBStore, PartitionStore
from node.subgraph import build_subgraph

__all__ = [
    "ChangeBatch",
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
