"""Writes through the `produce` mutation: the Kafka producer and the rules a write must keep."""
