"""Creating and describing the topics statefed uses.

Input topics and changelog topics of one view have the same partition count; the
partition count of a topic is always read from topic metadata. A broker that cannot be
reached (or refuses the client) is a `KafkaConnectionError` naming the settings to check.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from runtime.kafka import ErrorTrap, KafkaConnectionError, KafkaSettings
from schema import CATALOGUE, DEADLETTER_TOPIC, MEMBERS_TOPIC, PIPELINE_TOPIC, View

__all__ = ["admin_config", "ensure_topics", "partition_count", "statefed_topics"]


def statefed_topics(partitions: int, catalogue: Iterable[View] = CATALOGUE) -> dict[str, int]:
    """Every topic statefed needs, with its partition count."""
    topics: dict[str, int] = {MEMBERS_TOPIC: 1, DEADLETTER_TOPIC: 1, PIPELINE_TOPIC: 1}
    for view in catalogue:
        topics[view.topic] = partitions
        topics[view.changelog_topic] = partitions
    return topics


def admin_config(kafka: str | KafkaSettings) -> dict[str, Any]:
    """The topic admin client's librdkafka configuration."""
    return KafkaSettings.of(kafka).client()


def _metadata(kafka: KafkaSettings, timeout_s: float) -> tuple[AdminClient, ClusterMetadata]:
    """An admin client and the cluster's metadata; KafkaConnectionError if unreachable."""
    trap = ErrorTrap()
    config: dict[str, Any] = {**admin_config(kafka), "error_cb": trap, "logger": trap}
    admin = AdminClient(config)
    try:
        return admin, admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        admin.poll(0)  # serve the error events queued meanwhile (a TLS failure among them)
        cause = trap.error or exc
        raise KafkaConnectionError(
            f"no metadata from Kafka at {kafka.bootstrap} within {timeout_s} s ({cause}): "
            f"{kafka.hint(cause)}"
        ) from exc


def ensure_topics(
    kafka: str | KafkaSettings, topics: dict[str, int], timeout_s: float = 15.0
) -> None:
    """Create the missing ones of `topics`; existing topics are left as they are."""
    settings = KafkaSettings.of(kafka)
    admin, metadata = _metadata(settings, timeout_s)
    missing = [NewTopic(t, n, 1) for t, n in topics.items() if t not in metadata.topics]
    if not missing:
        return
    for topic, future in admin.create_topics(missing, request_timeout=timeout_s).items():
        try:
            future.result(timeout_s)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise RuntimeError(
                    f"creating topic {topic} on {settings.bootstrap} failed: {exc}"
                ) from exc


def partition_count(kafka: str | KafkaSettings, topic: str, timeout_s: float = 10.0) -> int:
    """The partition count of `topic` from the broker's metadata."""
    settings = KafkaSettings.of(kafka)
    # Ask for all topics: a metadata request naming a missing topic makes brokers with
    # auto-creation (the embedded one) create it, with their default partition count.
    _, metadata = _metadata(settings, timeout_s)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise RuntimeError(
            f"topic {topic} has no partitions on {settings.bootstrap}: create it first "
            "(`statefed broker` creates every statefed topic; against your own Kafka, run "
            "`statefed topics`)"
        )
    return len(found.partitions)
