"""`ensure_topics` and `create_planned` return once the metadata a client gets shows what
they created: a broker may answer metadata without a topic for a moment after the
controller answered its creation, and a part started right after (a node reading the
partition count) would find it missing. Over an admin client stand-in (no broker) whose
metadata shows a created topic only from its third request after the creation."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from runtime import topics
from runtime.topics import TopicCheck, TopicError, TopicSpec, create_planned, ensure_topics

BOOTSTRAP = "127.0.0.1:9"


class LaggingAdmin:
    """Creates every topic at once, and shows a created one to the `hidden`-th metadata
    request after its creation on."""

    def __init__(self, hidden: int) -> None:
        self.hidden = hidden
        self.unanswered = False  # a request that does not show every created topic raises
        self.created: dict[str, int] = {}  # topic -> partitions
        self.requests_since: dict[str, int] = {}  # topic -> metadata requests since created

    def __call__(self, config: dict[str, Any]) -> LaggingAdmin:  # stands in for the class
        return self

    def create_topics(self, new: list[NewTopic], request_timeout: float) -> dict[str, Future[None]]:
        answers: dict[str, Future[None]] = {}
        for topic in new:
            self.created[topic.topic] = topic.num_partitions
            self.requests_since[topic.topic] = 0
            answers[topic.topic] = done = Future[None]()
            done.set_result(None)
        return answers

    def list_topics(self, timeout: float) -> SimpleNamespace:
        shown = {}
        for topic, partitions in self.created.items():
            self.requests_since[topic] += 1
            if self.shown(topic):
                shown[topic] = SimpleNamespace(
                    error=None, partitions=dict.fromkeys(range(partitions))
                )
        if self.unanswered and len(shown) < len(self.created):
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return SimpleNamespace(topics=shown)

    def shown(self, topic: str) -> bool:
        """Whether the last metadata request showed `topic`."""
        return self.requests_since.get(topic, 0) >= self.hidden

    def poll(self, timeout: float) -> int:
        return 0


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> LaggingAdmin:
    lagging = LaggingAdmin(hidden=3)
    monkeypatch.setattr(topics, "AdminClient", lagging)
    return lagging


def test_ensure_topics_returns_once_the_metadata_shows_the_created_topics(
    admin: LaggingAdmin,
) -> None:
    ensure_topics(BOOTSTRAP, {"t.words": 4, "t.hosts": 2})
    assert admin.shown("t.words") and admin.shown("t.hosts")
    assert topics.partition_count(BOOTSTRAP, "t.words") == 4


def test_create_planned_returns_once_the_metadata_shows_the_created_topics(
    admin: LaggingAdmin,
) -> None:
    spec = TopicSpec("t.changelog", "changelog", 6, 1, {"cleanup.policy": "compact"})
    create_planned(BOOTSTRAP, [TopicCheck(spec, "create")])
    assert admin.shown("t.changelog")


def test_a_created_topic_the_metadata_never_shows_is_an_error_naming_it(
    admin: LaggingAdmin,
) -> None:
    admin.hidden = 1_000_000
    with pytest.raises(TopicError, match=r"topics t\.words were created on 127\.0\.0\.1:9, but"):
        ensure_topics(BOOTSTRAP, {"t.words": 4}, timeout_s=0.3)


def test_metadata_requests_unanswered_after_a_creation_are_asked_again(
    admin: LaggingAdmin,
) -> None:
    admin.unanswered = True
    ensure_topics(BOOTSTRAP, {"t.words": 4})
    assert admin.shown("t.words")
