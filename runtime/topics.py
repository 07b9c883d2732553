"""Creating, checking and describing the topics statefed uses.

Input topics and changelog topics of one view have the same partition count; the
partition count of a topic is always read from topic metadata. A broker that cannot be
reached (or refuses the client) is a `KafkaConnectionError` naming the settings to check.

`topic_plan` says what every topic should be (partitions, replication, configs) as data;
`inspect_plan` compares it with what the cluster has, and `create_planned` creates the
missing topics. `statefed topics` prints the inspection, one line per topic.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ClusterMetadata,
    ConfigResource,
    NewTopic,
    ResourceType,
    TopicMetadata,
)

from runtime.kafka import ErrorTrap, KafkaConnectionError, KafkaSettings
from schema import (
    CATALOGUE,
    DEADLETTER_TOPIC,
    MEMBERS_TOPIC,
    PIPELINE_TOPIC,
    View,
)

__all__ = [
    "DEADLETTER_RETENTION_MS",
    "TopicCheck",
    "TopicError",
    "TopicSpec",
    "admin_config",
    "broker_answers",
    "create_planned",
    "ensure_topics",
    "inspect_plan",
    "partition_count",
    "statefed_topics",
    "topic_plan",
]

# Dead letters are kept for someone to look at, not read back: a week, then deleted.
DEADLETTER_RETENTION_MS = 7 * 24 * 3600 * 1000
_COMPACT, _DELETE, _COMPACT_DELETE = "compact", "delete", "compact,delete"
_REPLICATION_OPTION = "--replication-factor / STATEFED_TOPICS_REPLICATION_FACTOR"
_MIN_ISR_OPTION = "--min-insync-replicas / STATEFED_TOPICS_MIN_INSYNC_REPLICAS"
_METADATA_POLL_S = 0.05  # between metadata requests while a created topic is not shown


class TopicError(RuntimeError):
    """A topic cannot be created, or exists unlike statefed needs it; the message names the
    topic and how to fix it."""


@dataclass(frozen=True)
class TopicSpec:
    """One topic as statefed wants it. `configs` holds only what statefed sets; every
    other topic config (e.g. an input topic's retention) is the cluster's default."""

    name: str
    role: str  # input, changelog, members, status or deadletter
    partitions: int
    replication: int
    configs: Mapping[str, str] = field(default_factory=dict)
    views: tuple[str, ...] = ()  # the views reading (input) or writing (changelog) it

    @property
    def cleanup_policy(self) -> str:
        return self.configs.get("cleanup.policy", _DELETE)


@dataclass(frozen=True)
class TopicCheck:
    """A planned topic next to what the cluster has: `action` is `create`, `exists ok` or
    `exists differs`; `problems` make the plan unusable, `notes` are warnings."""

    spec: TopicSpec
    action: str
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def line(self) -> str:
        """One line for the plan: action, topic, partitions, replication, configs."""
        spec = self.spec
        retention = spec.configs.get("retention.ms", "cluster default")
        isr = spec.configs.get("min.insync.replicas", "cluster default")
        return (
            f"{self.action:<14} {spec.name} ({spec.role}): partitions={spec.partitions} "
            f"replication={spec.replication} cleanup.policy={spec.cleanup_policy} "
            f"retention.ms={retention} min.insync.replicas={isr}"
        )


def statefed_topics(partitions: int, catalogue: Iterable[View] = CATALOGUE) -> dict[str, int]:
    """Every topic statefed needs, with its partition count."""
    topics: dict[str, int] = {MEMBERS_TOPIC: 1, DEADLETTER_TOPIC: 1, PIPELINE_TOPIC: 1}
    for view in catalogue:
        topics[view.topic] = partitions
        topics[view.changelog_topic] = partitions
    return topics


def topic_plan(
    catalogue: Iterable[View], partitions: int, replication: int, min_isr: int | None = None
) -> list[TopicSpec]:
    """Every topic statefed needs as it should be created; `min_isr` None means one less
    than `replication`, at least 1."""
    if partitions < 1 or replication < 1:
        raise TopicError(
            f"partitions and replication must be >= 1, got {partitions}, {replication}"
        )
    isr = max(1, replication - 1) if min_isr is None else min_isr
    if not 1 <= isr <= replication:
        raise TopicError(
            f"min.insync.replicas {isr} must be in 1..{replication} (the replication factor): "
            f"set {_MIN_ISR_OPTION}"
        )
    common = {"min.insync.replicas": str(isr)}
    inputs: dict[str, list[str]] = {}
    changelogs = []
    for view in catalogue:
        inputs.setdefault(view.topic, []).append(view.name)
        configs = {**common, **_changelog_configs(view)}
        changelogs.append(
            TopicSpec(
                view.changelog_topic, "changelog", partitions, replication, configs, (view.name,)
            )
        )
    plan = [
        TopicSpec(topic, "input", partitions, replication, common, tuple(views))
        for topic, views in inputs.items()
    ]
    return [
        *plan,
        *changelogs,
        TopicSpec(MEMBERS_TOPIC, "members", 1, replication, {**common, "cleanup.policy": _COMPACT}),
        # key = view name; the pipeline reads each view's last status back at start (its
        # running late-dropped total), so age must not delete it: compacted, not deleted
        TopicSpec(PIPELINE_TOPIC, "status", 1, replication, {**common, "cleanup.policy": _COMPACT}),
        TopicSpec(
            DEADLETTER_TOPIC,
            "deadletter",
            1,
            replication,
            {**common, "cleanup.policy": _DELETE, "retention.ms": str(DEADLETTER_RETENTION_MS)},
        ),
    ]


def _changelog_configs(view: View) -> dict[str, str]:
    # A changelog is the state a node restores from: compacted, so every key's newest
    # record stays however old. Windows past the view's retention are gone from the view,
    # so their records may go too (by record time, i.e. when the pipeline wrote them).
    if view.window is not None:
        return {"cleanup.policy": _COMPACT_DELETE, "retention.ms": str(view.window.retention_ms)}
    # HISTORY: a View declares no retention, so every event is kept (compact only)
    return {"cleanup.policy": _COMPACT}


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


def broker_answers(kafka: str | KafkaSettings, timeout_s: float = 5.0) -> bool:
    """Whether the cluster answers a metadata request within `timeout_s`."""
    try:
        _metadata(KafkaSettings.of(kafka), timeout_s)
    except KafkaConnectionError:
        return False
    return True


def inspect_plan(
    kafka: str | KafkaSettings, plan: Sequence[TopicSpec], timeout_s: float = 15.0
) -> list[TopicCheck]:
    """`plan` against the cluster: which topics exist, and how they differ.

    A changelog (or input) topic still to be created gets the partition count of its
    view's existing input (or changelog) topic. Raises TopicError when the cluster has
    fewer brokers than the replication factor asks.
    """
    settings = KafkaSettings.of(kafka)
    admin, metadata = _metadata(settings, timeout_s)
    _require_brokers(settings.bootstrap, len(metadata.brokers), plan)
    existing = {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if topic.error is None and topic.partitions
    }
    replicas = {
        name: min(len(p.replicas) for p in metadata.topics[name].partitions.values())
        for name in existing
    }
    plan = _follow_existing_counts(plan, existing)
    configs = _describe(admin, [s.name for s in plan if s.name in existing], timeout_s)
    checks = []
    for spec in plan:
        if spec.name not in existing:
            checks.append(TopicCheck(spec, "create"))
            continue
        problems, notes = _compare(spec, existing[spec.name], replicas[spec.name], configs)
        problems += _pair_problems(spec, plan, existing)
        action = "exists ok" if not problems and not notes else "exists differs"
        checks.append(TopicCheck(spec, action, tuple(problems), tuple(notes)))
    return checks


def _require_brokers(bootstrap: str, brokers: int, plan: Sequence[TopicSpec]) -> None:
    asked = max((spec.replication for spec in plan), default=1)
    if asked > brokers:
        raise TopicError(
            f"replication factor {asked} needs at least {asked} brokers, but {bootstrap} has "
            f"{brokers}: set {_REPLICATION_OPTION} to {brokers} or less"
        )


def _follow_existing_counts(
    plan: Sequence[TopicSpec], existing: Mapping[str, int]
) -> list[TopicSpec]:
    """Missing input or changelog topics take the partition count of the existing other one."""
    changelog_of = {s.views[0]: s.name for s in plan if s.role == "changelog"}
    input_of = {view: s.name for s in plan if s.role == "input" for view in s.views}
    followed = []
    for spec in plan:
        partners = []
        if spec.role == "changelog":
            partners = [input_of[spec.views[0]]]
        elif spec.role == "input":
            partners = [changelog_of[view] for view in spec.views]
        counts = {existing[p] for p in partners if p in existing}
        if spec.name not in existing and len(counts) == 1:
            spec = dataclasses.replace(spec, partitions=counts.pop())
        followed.append(spec)
    return followed


def _pair_problems(
    spec: TopicSpec, plan: Sequence[TopicSpec], existing: Mapping[str, int]
) -> list[str]:
    if spec.role != "changelog" or spec.name not in existing:
        return []
    view = spec.views[0]
    source = next(s.name for s in plan if s.role == "input" and view in s.views)
    if source not in existing or existing[source] == existing[spec.name]:
        return []
    return [
        f"view {view}: input topic {source} has {existing[source]} partitions but changelog "
        f"{spec.name} has {existing[spec.name]}; they must be equal (a key's input and "
        f"changelog partition are the same): delete {spec.name} and run `statefed topics` "
        f"again, which creates it with {existing[source]} partitions (the pipeline rewrites "
        "it from its checkpoint only if you also delete the view's checkpoint)"
    ]


def _compare(
    spec: TopicSpec,
    partitions: int,
    replication: int,
    configs: Mapping[str, Mapping[str, str]],
) -> tuple[list[str], list[str]]:
    problems, notes = [], []
    if partitions != spec.partitions:
        notes.append(f"has {partitions} partitions (asked {spec.partitions}); kept as is")
    if replication < spec.replication:
        notes.append(f"has replication factor {replication} (asked {spec.replication})")
    have = configs.get(spec.name, {})
    isr = have.get("min.insync.replicas", "")
    if isr.isdigit() and int(isr) > replication:
        problems.append(
            f"min.insync.replicas is {isr} but the topic has {replication} replica(s): every "
            "write that waits for the replicas (acks=all) fails; fix it with `kafka-configs.sh "
            f"--alter --entity-type topics --entity-name {spec.name} --add-config "
            f"min.insync.replicas={replication}`"
        )
    for key, want in spec.configs.items():
        problem, note = _config_difference(spec, key, want, have.get(key), have)
        problems += [problem] if problem else []
        notes += [note] if note else []
    return problems, notes


def _config_difference(
    spec: TopicSpec, key: str, want: str, got: str | None, have: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(problem, note) of one config of an existing topic, whose configs are `have`."""
    if got is None:
        return None, f"{key}: the broker does not report it (asked {want})"
    deletes = _DELETE in _policies(have.get("cleanup.policy", _DELETE))
    if key == "retention.ms" and spec.role == "changelog" and deletes:
        return _retention_difference(spec, want, got)
    if key != "cleanup.policy":
        return None, None if got == want else f"{key} is {got} (asked {want}); kept as is"
    if _policies(got) == _policies(want):
        return None, None
    added, missing = _policies(got) - _policies(want), _policies(want) - _policies(got)
    if _COMPACT in missing or _DELETE in added:
        return (
            f"cleanup.policy is {got}, not {want}: on real Kafka a {spec.role} topic that "
            "deletes by age loses the state it holds once retention passes; fix it with "
            f"`kafka-configs.sh --alter --entity-type topics --entity-name {spec.name} "
            f"--add-config cleanup.policy=[{want}]`",
            None,
        )
    return None, f"cleanup.policy is {got} (asked {want}); kept as is"


def _retention_difference(spec: TopicSpec, want: str, got: str) -> tuple[str | None, str | None]:
    """A windowed changelog's retention: shorter than the view's, windows it still serves
    go from Kafka (a restore or a new standby would miss them)."""
    if got == want:
        return None, None
    if got.lstrip("-").isdigit() and want.isdigit() and 0 <= int(got) < int(want):
        return (
            f"retention.ms is {got}, shorter than the view's {want}: windows the view still "
            "serves leave the changelog, and a store rebuilt from it misses them; fix it with "
            f"`kafka-configs.sh --alter --entity-type topics --entity-name {spec.name} "
            f"--add-config retention.ms={want}`",
            None,
        )
    return None, f"retention.ms is {got} (asked {want}); kept as is"


def _policies(value: str) -> set[str]:
    return {p.strip() for p in value.split(",")}


def _describe(
    admin: AdminClient, topics: Sequence[str], timeout_s: float
) -> dict[str, dict[str, str]]:
    """Each topic's configs as the broker reports them (a broker may report none)."""
    if not topics:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    described: dict[str, dict[str, str]] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items():
        try:
            entries = future.result(timeout_s)
        except Exception:  # a broker without DescribeConfigs: every config "not reported"
            continue
        described[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    return described


def create_planned(
    kafka: str | KafkaSettings, checks: Sequence[TopicCheck], timeout_s: float = 15.0
) -> None:
    """Create the topics `checks` plan to create, with their configs."""
    new = [
        NewTopic(c.spec.name, c.spec.partitions, c.spec.replication, config=dict(c.spec.configs))
        for c in checks
        if c.action == "create"
    ]
    if new:
        settings = KafkaSettings.of(kafka)
        _create(AdminClient(admin_config(settings)), settings.bootstrap, new, timeout_s)


def ensure_topics(
    kafka: str | KafkaSettings, topics: dict[str, int], timeout_s: float = 15.0
) -> dict[str, int]:
    """Create the missing ones of `topics` (replication 1, the cluster's default configs:
    not compacted on a Kafka as shipped); existing topics are left as they are. Returns
    the existing ones whose partition count differs from the one asked, with their own.
    For tests and the local broker (`statefed broker`): production topics come from
    `statefed topics` (`topic_plan`)."""
    settings = KafkaSettings.of(kafka)
    admin, metadata = _metadata(settings, timeout_s)
    missing = [NewTopic(t, n, 1) for t, n in topics.items() if t not in metadata.topics]
    if missing:
        _create(admin, settings.bootstrap, missing, timeout_s)
    existing = {t: len(metadata.topics[t].partitions) for t in topics if t in metadata.topics}
    return {t: n for t, n in existing.items() if n != topics[t]}


def _create(admin: AdminClient, bootstrap: str, new: list[NewTopic], timeout_s: float) -> None:
    """Create `new` and return once the broker's metadata shows each with its partitions."""
    for topic, future in admin.create_topics(new, request_timeout=timeout_s).items():
        try:
            future.result(timeout_s)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise TopicError(f"creating topic {topic} on {bootstrap} failed: {exc}") from exc
    _await_metadata(admin, bootstrap, [t.topic for t in new], timeout_s)


def _await_metadata(
    admin: AdminClient, bootstrap: str, topics: Sequence[str], timeout_s: float
) -> None:
    """Wait until the metadata a client gets shows every one of `topics` with partitions.
    A creation is answered once the controller has it, and a broker may answer metadata
    without the topic for a moment after: a part started right after (a node reading the
    partition count) would find the topic missing."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            seen = admin.list_topics(timeout=max(0.1, deadline - time.monotonic())).topics
        except KafkaException:  # no metadata within the time left: nothing shown yet
            seen = {}
        hidden = [t for t in topics if not _has_partitions(seen.get(t))]
        if not hidden:
            return
        if time.monotonic() >= deadline:
            raise TopicError(
                f"topics {', '.join(hidden)} were created on {bootstrap}, but its metadata "
                f"showed no partitions of them within {timeout_s} s: check the brokers' "
                "logs, then run the command again (it leaves existing topics as they are)"
            )
        time.sleep(_METADATA_POLL_S)


def _has_partitions(topic: TopicMetadata | None) -> bool:
    return topic is not None and topic.error is None and bool(topic.partitions)


def partition_count(kafka: str | KafkaSettings, topic: str, timeout_s: float = 10.0) -> int:
    """The partition count of `topic` from the broker's metadata: KafkaConnectionError when
    the cluster does not answer, TopicError when the topic is not there."""
    settings = KafkaSettings.of(kafka)
    # Ask for all topics: a metadata request naming a missing topic makes a broker with
    # auto.create.topics.enable (Kafka's default) create it, with its default partition
    # count, and a count made up that way would route keys wrong.
    _, metadata = _metadata(settings, timeout_s)
    found = metadata.topics.get(topic)
    if found is None or not _has_partitions(found):
        raise TopicError(
            f"topic {topic} has no partitions on {settings.bootstrap}: create it first "
            "(`statefed broker` creates every statefed topic; against your own Kafka, run "
            "`statefed topics`)"
        )
    return len(found.partitions)
