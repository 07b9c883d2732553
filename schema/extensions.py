"""The request extensions the gateway sends with a node query (node.serve.graphql_http reads
them): `readStandby` (a bool: standby copies may answer), `appliedAtLeast` (changelog
offsets the copies read must have applied first, see node.reads.catchup) and `readCurrent`
(partitions whose copies the node must prove current first, see node.reads.currency)."""

from __future__ import annotations

__all__ = ["APPLIED_AT_LEAST", "READ_CURRENT", "READ_STANDBY"]

READ_STANDBY = "readStandby"
APPLIED_AT_LEAST = "appliedAtLeast"
READ_CURRENT = "readCurrent"
