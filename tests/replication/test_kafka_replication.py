"""A replicated Kafka losing a broker: 3 KRaft brokers, every statefed topic replicated 3
ways with min.insync.replicas 2, and the broker leading the membership topic SIGKILLed
under produce and query load, then started again with its data.

Writes go two ways, both acks=all: the gateway's `produce` mutation (each acknowledged
write read back with its `atLeast` token) and a producer of the package's own
(`runtime.produce`, whose delivery reports are the truth of the query load). With two
brokers of three left every partition keeps an in-sync majority, so no acknowledged
write may be lost: every token becomes visible, and once the load stops every count
equals the acknowledged writes of its key exactly. Reads are answered from the nodes'
stores throughout, and the pipeline, the nodes and the gateway ride through the leader
elections without exiting, the pipeline publishing its status meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from runtime.topics import create_planned, inspect_plan, topic_plan
from schema import View, load_catalogue
from tests.chaos.conftest import MAX_LAG, ChaosCluster, P, words
from tests.chaos.invariants import (
    above_truth,
    answered_share,
    promised_regressions,
    protocol_problems,
)
from tests.chaos.load import Answer, QueryLoad, TruthProducer, wait_counts_equal
from tests.replication.tokenwrites import TokenWrites
from tooling.broker import KafkaBroker, KafkaCluster
from tooling.config import ToolingConfig
from tooling.localcluster import LocalCluster
from tooling.processes import poll_client, wait_until

pytestmark = pytest.mark.timeout(420)

REPLICATION = 3
MIN_ISR = 2
RATE_PER_S = 100  # words the package's producer writes per second
WARM_S = 3.0  # load on the stable cluster before the kill
# the longest the broker stays dead: the pipeline must publish a status by then. It first
# waits out the broker's 9 s session and its own 10 s offset lookup; on a busy 2-core
# machine a batch then took 6 s, and one clean-clone run saw no status by 30 s
DEAD_S = 60.0
MIN_DEAD_S = 30.0  # and the shortest: past Kafka's 9 s broker session timeout and the
# pipeline's 10 s offset-lookup timeout that follows it, with room on a busy machine (at
# 22 s one clean-clone run answered only 98.4% of the reads while the broker was away)
SETTLE_S = 2.0  # load once the restarted broker is in sync again
LOAD_MAX_S = 180.0  # a bound on the load loops, far above the scenario's length
CONFIRM_S = 60.0  # how long tokens are read back after the writers stopped
STATUS = "{ cluster { views { name statusUpdatedAt } } }"


class ReplicatedKafka:
    """The broker of the cluster: `KafkaCluster` whose start also creates every statefed
    topic replicated `REPLICATION` ways with min.insync.replicas `MIN_ISR`, as `statefed
    topics` does (the launcher's own `ensure_topics` leaves existing topics alone)."""

    def __init__(self, cluster: KafkaCluster, catalogue: list[View]) -> None:
        self.cluster = cluster
        self.plan = topic_plan(catalogue, P, REPLICATION, MIN_ISR)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def start(self) -> None:
        self.cluster.start()
        create_planned(self.bootstrap, inspect_plan(self.bootstrap, self.plan))

    def stop(self) -> None:
        self.cluster.stop()


@dataclass
class Replicated:
    local: LocalCluster
    kafka: ReplicatedKafka


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicated]:
    base = Path(tmp_path_factory.mktemp("replication"))
    env = {
        **os.environ,
        "STATEFED_STANDBY_REPLICAS": "1",
        "STATEFED_GATEWAY_MAX_LAG": str(MAX_LAG),
        "STATEFED_GATEWAY_PRODUCE": "true",
        "STATEFED_GATEWAY_PRODUCE_RATE": "10000",  # the writers' pace decides, not a limit
    }
    catalogue = list(load_catalogue(ToolingConfig.from_env(env).catalogue))
    kafka = ReplicatedKafka(KafkaCluster(size=3, log_dir=base), catalogue)
    with LocalCluster(base, partitions=P, env=env, progress=print, broker=kafka) as local:
        local.start_all(("n1", "n2"))
        yield Replicated(local, kafka)


@dataclass
class Timeline:
    """When each step of the fault happened (monotonic seconds), and to which broker."""

    victim: int = 0
    led: int = 0  # partitions the victim led when it was killed
    killed: float = 0.0
    elected: float = 0.0  # no partition led by the victim or by nobody any more
    status: float | None = None  # the first pipeline status after the election
    starting: float = 0.0  # the broker asked to start again
    restarted: float = 0.0  # ... and serving
    in_sync: float = 0.0  # every replica of every partition in its ISR again
    stopped: float = 0.0  # the load stopped

    def window(self, name: str) -> tuple[float, float]:
        return {"dead": (self.killed, self.restarted), "back": (self.restarted, self.stopped)}[name]


def test_a_sigkilled_broker_loses_no_acknowledged_write_and_reads_keep_answering(
    replicated: Replicated,
) -> None:
    local, kafka = replicated.local, replicated.kafka
    gateway = local.gateway_url
    _check_replicated(kafka)
    chaos = ChaosCluster(local)
    chaos.wait_stable(gateway)
    asked, written = words("repl"), words("replw")[:20]
    truth = TruthProducer(local.bootstrap, "words", asked, RATE_PER_S).start()
    load = QueryLoad(gateway, asked, P, truth)
    writes = TokenWrites(gateway, written, load.stop)
    runner = threading.Thread(target=asyncio.run, args=(_loads(load, writes),), name="load")
    runner.start()
    timeline = Timeline()
    try:
        load.stop.wait(WARM_S)  # load on a stable cluster first, not a wait for anything
        _kill_and_restart(kafka, gateway, load.stop, timeline)
    finally:
        load.stop.set()
        runner.join(LOAD_MAX_S + CONFIRM_S)
        final = truth.stop()
    assert not runner.is_alive(), "the load did not stop"
    _report(load.answers, writes, timeline, final)
    _assert_parts_running(local)
    chaos.wait_stable(gateway)
    wait_counts_equal(gateway, asked, final, 90.0, what="acknowledged writes")
    # A gateway write that timed out in the election may still have landed (its outcome is
    # unknown to the writer): the topic itself is the truth of those keys, and it holds at
    # least every acknowledged write and at most every write attempted.
    landed = _records_per_key(local.bootstrap, "words", set(written))
    attempted = writes.counts + Counter(key for _sent, key, _why in writes.failed)
    lost = {k: (landed[k], n) for k, n in writes.counts.items() if landed[k] < n}
    assert not lost, f"(in the topic, acknowledged) of acknowledged writes lost: {lost}"
    extra = {k: (landed[k], n) for k, n in attempted.items() if landed[k] > n}
    # After a message timeout the idempotent producer bumps its epoch, and a record in
    # flight on another partition may then be written twice: librdkafka's known limit
    # (its issue 4953; only transactions rule it out). Without a timeout, never.
    timed_out = [why for _sent, _key, why in writes.failed if "_MSG_TIMED_OUT" in why]
    print(f"records beyond the writes attempted: {extra}; writes timed out: {len(timed_out)}")
    assert timed_out or not extra, f"(in the topic, attempted): more records: {extra}"
    wait_counts_equal(gateway, written, dict(landed), 90.0, what="acknowledged writes")
    for violations in (
        protocol_problems(load.answers),
        above_truth(load.answers),
        promised_regressions(load.answers),
    ):
        assert not violations, f"{len(violations)} violations, first: {violations[:10]}"
    assert not writes.problems, f"token reads: {writes.problems[:10]}"
    assert not writes.unconfirmed(), f"acknowledged, never visible: {writes.unconfirmed()[:10]}"
    for name in ("dead", "back"):
        answered, total = answered_share(load.answers, "point", *timeline.window(name))
        assert total and answered / total >= 0.99, f"broker {name}: {answered} of {total} answered"
    assert timeline.status is not None, (
        f"the pipeline published no status within {DEAD_S} s of the broker's death, after "
        f"the election {timeline.elected - timeline.killed:.1f} s after the kill: see "
        f"{local.base_dir / 'pipeline.log'}"
    )


async def _loads(load: QueryLoad, writes: TokenWrites) -> None:
    await asyncio.gather(load.run(LOAD_MAX_S), writes.run(LOAD_MAX_S, CONFIRM_S))


def _kill_and_restart(
    kafka: ReplicatedKafka, gateway: str, stop: threading.Event, timeline: Timeline
) -> None:
    """SIGKILL the broker leading the members topic, keep it dead while leaders move and
    the pipeline must go on publishing (`MIN_DEAD_S`, longer until a status came), start
    it again and wait until it is back in every partition's ISR. Runs on the test's
    thread: the broker is its child."""
    victim = _victim(kafka)
    timeline.victim = victim.node_id
    timeline.led = sum(1 for p in _leaders(kafka.bootstrap).values() if p[0] == victim.node_id)
    timeline.killed = time.monotonic()
    victim.kill()
    moved = "new leaders for the dead broker's partitions"
    wait_until(lambda: _leads_nothing(kafka.bootstrap, victim.node_id), DEAD_S, moved, 0.5)
    timeline.elected = time.monotonic()
    timeline.status = _wait_status(gateway, time.time() * 1000, timeline.killed + DEAD_S)
    stop.wait(max(0.0, timeline.killed + MIN_DEAD_S - time.monotonic()))  # the outage's length
    timeline.starting = time.monotonic()
    victim.start()
    timeline.restarted = time.monotonic()
    wait_until(lambda: _all_in_sync(kafka.bootstrap), 60, "every replica in sync again", 0.5)
    timeline.in_sync = time.monotonic()
    stop.wait(SETTLE_S)  # load on the whole cluster again, not a wait for anything
    timeline.stopped = time.monotonic()


def _victim(kafka: ReplicatedKafka) -> KafkaBroker:
    leader = _leaders(kafka.bootstrap)[("statefed.members", 0)][0]
    return next(b for b in kafka.cluster.brokers if b.node_id == leader)


def _leaders(bootstrap: str) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    """(leader, replicas, in-sync replicas) of every partition of every topic."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {
        (name, p.id): (p.leader, list(p.replicas), list(p.isrs))
        for name, topic in metadata.topics.items()
        for p in topic.partitions.values()
    }


def _leads_nothing(bootstrap: str, node_id: int) -> bool:
    return all(leader not in (node_id, -1) for leader, _, _ in _leaders(bootstrap).values())


def _all_in_sync(bootstrap: str) -> bool:
    return all(len(isrs) == len(replicas) for _, replicas, isrs in _leaders(bootstrap).values())


def _check_replicated(kafka: ReplicatedKafka) -> None:
    """Every statefed topic (and the group offsets) replicated 3 ways, min ISR 2."""
    partitions = _leaders(kafka.bootstrap)
    names = [spec.name for spec in kafka.plan]
    for (topic, partition), (_, replicas, _) in partitions.items():
        if topic in names or topic == "__consumer_offsets":
            assert len(replicas) == REPLICATION, f"{topic}:{partition} has replicas {replicas}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    for resource, future in admin.describe_configs(resources).items():
        isr = future.result(10)["min.insync.replicas"].value
        assert isr == str(MIN_ISR), f"{resource.name}: min.insync.replicas {isr}"


def _wait_status(gateway: str, after_ms: float, until: float) -> float | None:
    """Wait until `until` (monotonic) for the pipeline to report a batch of `word_counts`
    after `after_ms` (wall clock); returns when (monotonic), or None if it did not."""

    def reported() -> bool:
        body = http.post(gateway, json={"query": STATUS}).json()
        views = body["data"]["cluster"]["views"]
        stamp = next(v["statusUpdatedAt"] for v in views if v["name"] == "word_counts")
        return bool(stamp) and _ms(stamp) > after_ms

    try:
        with poll_client(timeout_s=10.0) as http:
            wait_until(reported, until - time.monotonic(), "a pipeline status", 0.5)
    except TimeoutError:
        return None
    return time.monotonic()


def _ms(text: str) -> float:
    return datetime.fromisoformat(text).timestamp() * 1000


def _records_per_key(bootstrap: str, topic: str, keys: set[str]) -> Counter[str]:
    """How many records of each of `keys` `topic` holds, read from its start to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.time_ns()}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        found: Counter[str] = Counter()
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 60
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                partition, offset = message.partition(), message.offset()
                if message.error() is not None or partition is None or offset is None:
                    continue
                positions[partition] = offset + 1
                key = (message.key() or b"").decode()
                if key in keys:
                    found[key] += 1
        assert all(positions[p] >= ends[p] for p in ends), f"{topic} not read to its end"
        return found
    finally:
        consumer.close()


def _assert_parts_running(local: LocalCluster) -> None:
    for part in [local.pipeline, local.gateway, *local.nodes.values()]:
        assert part is not None, "a part was never started"
        assert part.running(), f"{part.name} exited:\n{part.log_tail()}"


def _report(
    answers: list[Answer], writes: TokenWrites, timeline: Timeline, final: dict[str, int]
) -> None:
    t = timeline
    print(
        f"\nbroker {t.victim} (leader of {t.led} partitions) SIGKILLed: new leaders after "
        f"{t.elected - t.killed:.1f} s, a pipeline status after "
        f"{'none' if t.status is None else f'{t.status - t.killed:.1f} s'}, started again "
        f"after {t.starting - t.killed:.1f} s (serving {t.restarted - t.starting:.1f} s later, "
        f"in sync {t.in_sync - t.restarted:.1f} s after that)"
    )
    for name in ("dead", "back"):
        start, end = t.window(name)
        answered, total = answered_share(answers, "point", start, end)
        roles = Counter(
            read[1] for a in answers if start <= a.sent <= end for read in a.keys.values() if read
        )
        print(f"broker {name} {end - start:.1f} s: {answered} of {total} point reads answered")
        print(f"  roles {dict(roles)}")
    lags = [writes.visible[i] - a.at for i, a in enumerate(writes.acked) if i in writes.visible]
    dead = [a for a in writes.acked if t.killed <= a.at <= t.restarted]
    failed_dead = [f for f in writes.failed if t.killed <= f[0] <= t.restarted]
    print(
        f"gateway writes: {len(writes.acked)} acknowledged ({len(dead)} while a broker was "
        f"dead), {len(writes.failed)} not ({len(failed_dead)} while dead); visible "
        f"{statistics.median(lags) if lags else 0:.2f} s (p50), {max(lags, default=0):.2f} s "
        f"(max) after the acknowledgement, {len(writes.unconfirmed())} never"
    )
    print(f"  failures: {Counter(f[2][:160] for f in writes.failed).most_common(3)}")
    print(f"producer writes: {sum(final.values())} acknowledged")
