"""The membership record each node publishes to `statefed.members` (key = node id).

A node publishes on every change and every heartbeat; on clean shutdown it publishes a
tombstone (null value). Readers treat a record older than `DEAD_AFTER_HEARTBEATS`
heartbeat intervals as a dead node. Readers start a few heartbeats back in time
(offsets_for_times), not from the beginning: even compacted (as `statefed topics` creates
it), the topic keeps the last record of every node that died without a tombstone, and
compaction leaves the active segment alone.

In a cluster with a secret (STATEFED_CLUSTER_SECRET_FILE), a node signs each record and
tombstone in the Kafka header `MEMBER_SIGNATURE_HEADER` (`v1=<unix ms>.<hex HMAC>`, made
by runtime.trust); the value is unchanged, so a reader that checks no signature reads it
as before.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "DEAD_AFTER_HEARTBEATS",
    "MEMBERS_TOPIC",
    "MEMBER_SIGNATURE_HEADER",
    "MemberRecord",
    "NodeState",
    "PartitionStatus",
    "Role",
    "decode_member",
    "encode_member",
]

MEMBERS_TOPIC = "statefed.members"
MEMBER_SIGNATURE_HEADER = "statefed-signature"
DEAD_AFTER_HEARTBEATS = 3


class NodeState(enum.Enum):
    STARTING = "STARTING"
    REBALANCING = "REBALANCING"
    RESTORING = "RESTORING"
    RUNNING = "RUNNING"


class Role(enum.Enum):
    ACTIVE = "ACTIVE"
    STANDBY = "STANDBY"


@dataclass(frozen=True)
class PartitionStatus:
    """One partition copy a node holds: its role, applied and end offset (summed over the
    partition's changelog topics) and the lag between them; while `restoring`, the records
    restored so far of the `restore_total` it had to catch up on assignment (0 = not known
    yet); `lag_unknown_since_ms` while the broker does not answer the node (the end offset
    and so the lag are as of then); `store_error` while its store cannot be written (a
    full disk: applying is paused and retried). These fields are optional on the wire (absent = 0 /
    False / None)."""

    partition: int
    role: Role
    applied_offset: int
    end_offset: int
    restoring: bool = False
    restore_done: int = 0
    restore_total: int = 0
    lag_unknown_since_ms: int | None = None
    store_error: str | None = None

    @property
    def lag(self) -> int:
        return max(0, self.end_offset - self.applied_offset)


@dataclass(frozen=True)
class MemberRecord:
    node_id: str
    url: str
    state: NodeState
    heartbeat_ms: int
    heartbeat_interval_ms: int
    partitions: tuple[PartitionStatus, ...] = field(default_factory=tuple)
    # random per node process: a feed handshake names it, so a restarted node (a new
    # incarnation) admits none made for the process before it ("" from older nodes)
    incarnation: str = ""

    def active_partitions(self) -> list[int]:
        return sorted(p.partition for p in self.partitions if p.role is Role.ACTIVE)

    def standby_partitions(self) -> list[int]:
        return sorted(p.partition for p in self.partitions if p.role is Role.STANDBY)

    def is_alive(self, now_ms: int) -> bool:
        return now_ms - self.heartbeat_ms <= DEAD_AFTER_HEARTBEATS * self.heartbeat_interval_ms


def encode_member(record: MemberRecord) -> bytes:
    return orjson.dumps(
        {
            "node_id": record.node_id,
            "url": record.url,
            "state": record.state.value,
            "heartbeat_ms": record.heartbeat_ms,
            "heartbeat_interval_ms": record.heartbeat_interval_ms,
            "partitions": [
                {
                    "partition": p.partition,
                    "role": p.role.value,
                    "applied_offset": p.applied_offset,
                    "end_offset": p.end_offset,
                    "restoring": p.restoring,
                    "restore_done": p.restore_done,
                    "restore_total": p.restore_total,
                    **_optional("lag_unknown_since_ms", p.lag_unknown_since_ms),
                    "store_error": p.store_error,
                }
                for p in record.partitions
            ],
            "incarnation": record.incarnation,
        }
    )


def decode_member(value: bytes) -> MemberRecord:
    try:
        doc = orjson.loads(value)
        return MemberRecord(
            node_id=doc["node_id"],
            url=doc["url"],
            state=NodeState(doc["state"]),
            heartbeat_ms=int(doc["heartbeat_ms"]),
            heartbeat_interval_ms=int(doc["heartbeat_interval_ms"]),
            partitions=tuple(
                PartitionStatus(
                    partition=int(p["partition"]),
                    role=Role(p["role"]),
                    applied_offset=int(p["applied_offset"]),
                    end_offset=int(p["end_offset"]),
                    # added later: records of older nodes do not have them
                    restoring=bool(p.get("restoring", False)),
                    restore_done=int(p.get("restore_done", 0)),
                    restore_total=int(p.get("restore_total", 0)),
                    lag_unknown_since_ms=_int_or_none(p.get("lag_unknown_since_ms")),
                    store_error=_optional_text(p.get("store_error")),
                )
                for p in doc["partitions"]
            ),
            incarnation=str(doc.get("incarnation", "")),  # added later: older nodes lack it
        )
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"undecodable membership record {value[:200]!r}") from exc


def _optional(name: str, value: int | None) -> dict[str, int]:
    """`{name: value}`, or nothing when `value` is None: records stay as they were."""
    return {} if value is None else {name: value}


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)
