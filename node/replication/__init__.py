"""Copies of partitions beyond the one the materializer writes: membership and its
heartbeats, standby replicas, and the change feed socket gateways and peers subscribe to."""
