"""`statefed topics` against a real Kafka broker: the printed plan, the created topics'
configs (as far as the broker reports them) and the checks of existing topics.

Each test has its own broker: the plan includes the fixed topics (statefed.members, ...),
which the shared broker's other tests create without configs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from runtime.topics import ensure_topics, topic_plan
from schema import CATALOGUE, MEMBERS_TOPIC, View
from tooling.broker import KafkaBroker
from tooling.cli import main

# every view kind, on topics no other test uses
VIEWS: tuple[View, ...] = tuple(
    dataclasses.replace(v, name=f"tt_{v.name}", topic=f"tt-{v.topic}") for v in CATALOGUE
)
CATALOGUE_SPEC = f"{__name__}:VIEWS"
LINE = re.compile(
    r"^(create|exists ok|exists differs) +(\S+) \((\w+)\): partitions=(\d+) replication=(\d+) "
    r"cleanup\.policy=(\S+) retention\.ms=(\d+|cluster default) min\.insync\.replicas=(\d+)$"
)


@pytest.fixture
def kafka() -> Iterator[KafkaBroker]:
    with KafkaBroker() as running:
        yield running


def _run(kafka: KafkaBroker, *args: str) -> None:
    main(["topics", "--bootstrap", kafka.bootstrap, "--catalogue", CATALOGUE_SPEC, *args])


def _create(kafka: KafkaBroker, topic: str, config: dict[str, str]) -> None:
    """`topic` made beforehand with 2 partitions and `config`, as another client would."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1, config=config)]).values():
        future.result(10)


def _plan_lines(out: str) -> dict[str, tuple[str, ...]]:
    lines = {}
    for line in out.splitlines():
        match = LINE.match(line)
        if match:
            lines[match.group(2)] = match.groups()
    return lines


def _configs(kafka: KafkaBroker, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    (future,) = futures.values()
    return {k: e.value for k, e in future.result(10).items()}


def _existing(kafka: KafkaBroker) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    return {name: len(t.partitions) for name, t in topics.items() if t.partitions}


def test_dry_run_prints_every_topic_and_creates_none(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(kafka, "--partitions", "4", "--replication-factor", "1", "--dry-run")
    out = capsys.readouterr().out
    lines = _plan_lines(out)
    plan = topic_plan(VIEWS, 4, 1)
    assert set(lines) == {spec.name for spec in plan}
    for spec in plan:
        action, _, role, partitions, replication, policy, retention, isr = lines[spec.name]
        assert action == "create"
        assert (role, int(partitions), int(replication)) == (spec.role, spec.partitions, 1)
        assert policy == spec.configs.get("cleanup.policy", "delete")
        assert retention == spec.configs.get("retention.ms", "cluster default")
        assert isr == "1"
    windowed = next(v for v in VIEWS if v.window is not None)
    assert windowed.window is not None
    assert lines[windowed.changelog_topic][5:7] == (
        "compact,delete",
        str(windowed.window.retention_ms),
    )
    assert "dry run: nothing was created" in out
    assert not set(lines) & set(_existing(kafka))


def test_created_topics_carry_the_planned_configs(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(kafka, "--partitions", "3", "--replication-factor", "1")
    out = capsys.readouterr().out
    plan = topic_plan(VIEWS, 3, 1)
    assert f"created {len(plan)} topic(s)" in out
    assert "created, but" not in out  # Kafka reports every config it was given
    existing = _existing(kafka)
    for spec in plan:
        assert existing[spec.name] == spec.partitions
        configs = _configs(kafka, spec.name)
        assert {k: configs.get(k) for k in spec.configs} == dict(spec.configs), spec.name
    _run(kafka, "--partitions", "3", "--replication-factor", "1")  # a second run changes nothing
    again = _plan_lines(capsys.readouterr().out)
    assert {line[0] for line in again.values()} == {"exists ok"}


def test_a_views_input_and_changelog_with_different_partition_counts_are_refused(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    view = VIEWS[0]
    ensure_topics(kafka.bootstrap, {view.topic: 4, view.changelog_topic: 3})
    with pytest.raises(SystemExit, match="problem"):
        _run(kafka, "--partitions", "4", "--replication-factor", "1")
    out = capsys.readouterr().out
    assert (
        f"input topic {view.topic} has 4 partitions but changelog {view.changelog_topic} has 3"
        in out
    )
    assert f"delete {view.changelog_topic}" in out
    assert MEMBERS_TOPIC not in _existing(kafka)  # nothing was created


def test_a_missing_changelog_takes_the_partition_count_of_the_existing_input(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    view = VIEWS[0]
    ensure_topics(kafka.bootstrap, {view.topic: 5})
    _run(kafka, "--partitions", "2", "--replication-factor", "1")
    lines = _plan_lines(capsys.readouterr().out)
    assert lines[view.changelog_topic][0] == "create" and lines[view.changelog_topic][3] == "5"
    assert _existing(kafka)[view.changelog_topic] == 5


def test_a_changelog_that_is_not_compacted_is_refused(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    view = VIEWS[0]
    _create(kafka, view.changelog_topic, {"cleanup.policy": "delete"})
    with pytest.raises(SystemExit, match="nothing was created"):
        _run(kafka, "--partitions", "2", "--replication-factor", "1")
    out = capsys.readouterr().out
    assert f"exists differs {view.changelog_topic}" in out
    assert "cleanup.policy is delete, not compact" in out and "loses the state" in out


@pytest.mark.parametrize(
    ("windowed", "config", "problem"),
    [
        (False, {"cleanup.policy": "compact,delete"}, "cleanup.policy is compact,delete, not"),
        (
            True,
            {"cleanup.policy": "compact,delete", "retention.ms": "60000"},
            "retention.ms is 60000, shorter than the view's",
        ),
        (False, {"min.insync.replicas": "2"}, "min.insync.replicas is 2 but the topic has 1"),
    ],
    ids=["deleted by age", "shorter retention", "more in-sync replicas than replicas"],
)
def test_a_changelog_that_would_lose_state_or_refuse_writes_is_refused(
    kafka: KafkaBroker,
    capsys: pytest.CaptureFixture[str],
    windowed: bool,
    config: dict[str, str],
    problem: str,
) -> None:
    """Warnings before: a compacted changelog also deleted by age, a windowed one kept for
    less than the view's retention (both lose state a restore needs), and one whose writes
    all fail (acks=all with fewer replicas than min.insync.replicas)."""
    view = next(v for v in VIEWS if (v.window is not None) is windowed)
    _create(kafka, view.changelog_topic, config)
    with pytest.raises(SystemExit, match="nothing was created"):
        _run(kafka, "--partitions", "2", "--replication-factor", "1")
    out = capsys.readouterr().out
    assert f"exists differs {view.changelog_topic}" in out
    assert problem in out and "kafka-configs.sh --alter" in out


def test_a_windowed_changelog_compacted_but_not_deleted_is_only_a_warning(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    view = next(v for v in VIEWS if v.window is not None)
    compacted = {"cleanup.policy": "compact", "retention.ms": "60000"}  # never deletes by age
    _create(kafka, view.changelog_topic, compacted)
    _run(kafka, "--partitions", "2", "--replication-factor", "1")
    out = capsys.readouterr().out
    assert f"exists differs {view.changelog_topic}" in out
    assert "warning: cleanup.policy is compact (asked compact,delete); kept as is" in out
    assert "warning: retention.ms is 60000" in out
    assert MEMBERS_TOPIC in _existing(kafka)


def test_a_replication_factor_above_the_broker_count_is_refused(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STATEFED_TOPICS_REPLICATION_FACTOR", raising=False)
    with pytest.raises(SystemExit) as raised:
        _run(kafka, "--dry-run")  # the default, 3
    message = str(raised.value)
    assert "replication factor 3 needs at least 3 brokers" in message and "has 1" in message
    assert "--replication-factor" in message and "STATEFED_TOPICS_REPLICATION_FACTOR" in message
    assert not _plan_lines(capsys.readouterr().out)


def test_a_topic_another_client_creates_between_the_check_and_the_creation_is_checked(
    kafka: KafkaBroker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client auto-creating a changelog (the broker's defaults: deleted by age) just after
    statefed topics looked: Kafka answers TOPIC_ALREADY_EXISTS and keeps that topic; the
    command said it created everything and exited 0."""
    from runtime import topics

    view = VIEWS[0]
    create = topics.create_planned

    def first_another_client(kafka_: object, checks: object, timeout_s: float = 15.0) -> None:
        _create(kafka, view.changelog_topic, {"cleanup.policy": "delete"})
        create(kafka_, checks, timeout_s)  # type: ignore[arg-type]

    monkeypatch.setattr(topics, "create_planned", first_another_client)
    with pytest.raises(SystemExit, match="another client may have created them first"):
        _run(kafka, "--partitions", "2", "--replication-factor", "1")
    out = capsys.readouterr().out
    assert f"created, but exists differs {view.changelog_topic}" in out
    assert "cleanup.policy is delete, not compact" in out
