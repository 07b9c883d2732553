"""The topic plan: what every topic should be, for every view kind (no broker)."""

from __future__ import annotations

import pytest

from runtime.topics import DEADLETTER_RETENTION_MS, TopicError, TopicSpec, topic_plan
from schema import CATALOGUE, DEADLETTER_TOPIC, MEMBERS_TOPIC, PIPELINE_TOPIC, ViewKind
from tests.orders import HOURLY_BASKETS
from tooling.config import ToolingConfig


def _by_name(plan: list[TopicSpec]) -> dict[str, TopicSpec]:
    names = [spec.name for spec in plan]
    assert len(names) == len(set(names)), f"a topic is planned twice: {names}"
    return {spec.name: spec for spec in plan}


EVERY_KIND = (*CATALOGUE, HOURLY_BASKETS)  # the built-in catalogue has no windowed aggregate


def test_the_catalogues_have_every_view_kind() -> None:
    assert {view.kind for view in EVERY_KIND} == set(ViewKind)


def test_changelogs_are_compacted_and_windowed_ones_expire_at_the_views_retention() -> None:
    plan = _by_name(topic_plan(EVERY_KIND, 6, 3))
    for view in EVERY_KIND:
        changelog = plan[view.changelog_topic]
        assert (changelog.role, changelog.partitions, changelog.replication) == ("changelog", 6, 3)
        if view.kind in (ViewKind.WINDOWED_COUNT, ViewKind.WINDOWED_AGGREGATE):
            assert view.window is not None
            assert changelog.configs["cleanup.policy"] == "compact,delete"
            assert changelog.configs["retention.ms"] == str(view.window.retention_ms)
        else:  # count and latest: one record per key; history: a View has no retention
            assert changelog.configs["cleanup.policy"] == "compact", view.kind
            assert "retention.ms" not in changelog.configs


def test_input_topics_are_planned_once_with_the_cluster_default_retention() -> None:
    plan = _by_name(topic_plan(CATALOGUE, 4, 2))
    inputs = {spec.name: spec for spec in plan.values() if spec.role == "input"}
    assert set(inputs) == {view.topic for view in CATALOGUE}
    shared = [v.name for v in CATALOGUE if v.topic == "pageviews"]
    assert inputs["pageviews"].views == tuple(shared) and len(shared) == 3
    for spec in inputs.values():
        assert (spec.partitions, spec.replication, spec.cleanup_policy) == (4, 2, "delete")
        assert "retention.ms" not in spec.configs and "cleanup.policy" not in spec.configs


def test_members_status_and_dead_letters() -> None:
    plan = _by_name(topic_plan(CATALOGUE, 6, 3))
    members, status, dead = plan[MEMBERS_TOPIC], plan[PIPELINE_TOPIC], plan[DEADLETTER_TOPIC]
    assert (members.partitions, members.configs["cleanup.policy"]) == (1, "compact")
    # the pipeline reads each view's last status back: compacted, never deleted by age
    assert (status.partitions, status.configs["cleanup.policy"]) == (1, "compact")
    assert (dead.partitions, dead.configs["cleanup.policy"]) == (1, "delete")
    assert dead.configs["retention.ms"] == str(DEADLETTER_RETENTION_MS)
    assert {spec.replication for spec in plan.values()} == {3}


@pytest.mark.parametrize(
    ("replication", "asked", "isr"), [(3, None, 2), (2, None, 1), (1, None, 1), (3, 3, 3)]
)
def test_min_insync_replicas_defaults_to_one_less_than_the_replication(
    replication: int, asked: int | None, isr: int
) -> None:
    plan = topic_plan(CATALOGUE, 6, replication, asked)
    assert {spec.configs["min.insync.replicas"] for spec in plan} == {str(isr)}


@pytest.mark.parametrize("isr", [0, 4])
def test_min_insync_replicas_outside_the_replication_is_refused(isr: int) -> None:
    with pytest.raises(TopicError, match="STATEFED_TOPICS_MIN_INSYNC_REPLICAS"):
        topic_plan(CATALOGUE, 6, 3, isr)


def test_the_options_are_read_from_the_environment() -> None:
    config = ToolingConfig.from_env({})
    assert (config.topics_replication, config.topics_min_isr) == (3, None)
    config = ToolingConfig.from_env(
        {"STATEFED_TOPICS_REPLICATION_FACTOR": "1", "STATEFED_TOPICS_MIN_INSYNC_REPLICAS": "1"}
    )
    assert (config.topics_replication, config.topics_min_isr) == (1, 1)
