"""Creating and describing the topics statefed uses.

Input topics and changelog topics of one view have the same partition count; the
partition count of a topic is always read from topic metadata.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka.admin import AdminClient, NewTopic

from schema import CATALOGUE, DEADLETTER_TOPIC, MEMBERS_TOPIC, PIPELINE_TOPIC, View

__all__ = ["ensure_topics", "partition_count", "statefed_topics"]


def statefed_topics(partitions: int, catalogue: Iterable[View] = CATALOGUE) -> dict[str, int]:
    """Every topic statefed needs, with its partition count."""
    topics: dict[str, int] = {MEMBERS_TOPIC: 1, DEADLETTER_TOPIC: 1, PIPELINE_TOPIC: 1}
    for view in catalogue:
        topics[view.topic] = partitions
        topics[view.changelog_topic] = partitions
    return topics


def ensure_topics(bootstrap: str, topics: dict[str, int], timeout_s: float = 15.0) -> None:
    """Create the missing ones of `topics`; existing topics are left as they are."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=timeout_s).topics
    missing = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
    if not missing:
        return
    for topic, future in admin.create_topics(missing, request_timeout=timeout_s).items():
        try:
            future.result(timeout_s)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise RuntimeError(f"creating topic {topic} on {bootstrap} failed: {exc}") from exc


def partition_count(bootstrap: str, topic: str, timeout_s: float = 10.0) -> int:
    """The partition count of `topic` from the broker's metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Ask for all topics: a metadata request naming a missing topic makes brokers with
    # auto-creation (the embedded one) create it, with their default partition count.
    metadata = admin.list_topics(timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise RuntimeError(
            f"topic {topic} has no partitions on {bootstrap}: create it first (`statefed broker` "
            "creates every statefed topic; against your own Kafka, run `statefed topics`)"
        )
    return len(metadata.partitions)
