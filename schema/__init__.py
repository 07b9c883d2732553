"""The statefed contract: view catalogue, partitioner, key codec and record formats."""

from schema.changelog import DEADLETTER_TOPIC, CountRow, decode_count, encode_count
from schema.keycodec import MAX_UINT, KeyPart, pack, prefix, unpack
from schema.membership import (
    DEAD_AFTER_HEARTBEATS,
    MEMBERS_TOPIC,
    MemberRecord,
    NodeState,
    PartitionStatus,
    Role,
    decode_member,
    encode_member,
)
from schema.partitioner import murmur2, partition_for
from schema.views import CATALOGUE, View, ViewKind, view_by_name

__all__ = [
    "CATALOGUE",
    "DEADLETTER_TOPIC",
    "DEAD_AFTER_HEARTBEATS",
    "MAX_UINT",
    "MEMBERS_TOPIC",
    "CountRow",
    "KeyPart",
    "MemberRecord",
    "NodeState",
    "PartitionStatus",
    "Role",
    "View",
    "ViewKind",
    "decode_count",
    "decode_member",
    "encode_count",
    "encode_member",
    "murmur2",
    "pack",
    "partition_for",
    "prefix",
    "unpack",
    "view_by_name",
]
