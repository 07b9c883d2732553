"""The request extensions the gateway sends with a node query (node.graphql_http reads
them): `readStandby` (a bool: standby copies may answer) and `appliedAtLeast` (changelog
offsets the copies read must have applied first, see node.catchup)."""

from __future__ import annotations

__all__ = ["APPLIED_AT_LEAST", "READ_STANDBY"]

READ_STANDBY = "readStandby"
APPLIED_AT_LEAST = "appliedAtLeast"
