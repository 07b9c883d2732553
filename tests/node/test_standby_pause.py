"""A node holding only standby copies, SIGSTOPped for twice the group session and resumed
(issue #26), under changelog writes and query load through a gateway with its cache:
no `maxLag: 0` answer is below any answer for its key received before it was asked, no
copy answers below what it answered before, and no count is above what was written.

Three node processes share a view of 2 partitions with one standby each: two own a
partition, and standby placement (node.replication.standby) puts a standby on the third, which then
holds standbys only. The writes go to the changelog directly, as the pipeline would."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from gateway.cluster.pipeline import StatusBoard
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from node.changelog.materializer import SESSION_TIMEOUT_MS
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow, View, encode_count, partition_for
from tests.chaos.invariants import (
    above_truth,
    copy_regressions,
    protocol_problems,
    stale_strict_reads,
)
from tests.chaos.load import QueryLoad
from tests.gateway.fakes import ServerThread
from tests.node.harness import node_config, settled, spawn_node, unique_count_view
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 2
KEYS = [f"sp-{i:02d}" for i in range(12)]
WRITE_PAUSE_S = 0.05  # the writer's pace, not a wait for a condition
PAUSE_S = 2 * SESSION_TIMEOUT_MS / 1000
SETTLE_S = 2.0  # load on the settled cluster after the resume


class ChangelogWriter:
    """Raises the count of one key at a time in the view's changelog, from a thread.
    `delivered()` is every count written or being written (an upper bound of what a copy
    can have applied: the chaos load's truth)."""

    def __init__(self, bootstrap: str, view: View) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self._view = view
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="changelog-writer", daemon=True)

    def start(self) -> ChangelogWriter:
        self._thread.start()
        return self

    def delivered(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def _run(self) -> None:
        step = 0
        while not self._stop.is_set():
            key = KEYS[step % len(KEYS)]
            step += 1
            with self._lock:
                self._counts[key] += 1
                row = CountRow(key, self._counts[key], int(time.time() * 1000))
            self._producer.produce(
                self._view.changelog_topic,
                key=key.encode(),
                value=encode_count(row),
                partition=partition_for(key, PARTITIONS),
            )
            self._producer.poll(0)
            self._stop.wait(WRITE_PAUSE_S)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(15) == 0, "changelog records not delivered"
        return self.delivered()


@dataclass
class Nodes:
    processes: dict[str, subprocess.Popen[bytes]]
    urls: dict[str, str]
    logs: dict[str, Path]

    def healths(self, http: httpx.Client) -> dict[str, dict[str, Any]]:
        found = {}
        for node_id, url in self.urls.items():
            try:
                found[node_id] = http.get(f"{url}/health", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                found[node_id] = {}
        return found

    def wait_settled(self, http: httpx.Client, timeout_s: float = 90.0) -> dict[str, Any]:
        """Settled (harness.settled, though one node owns nothing here), and each
        partition with a standby."""
        found: dict[str, Any] = {}

        def ready() -> bool:
            nonlocal found
            found = self.healths(http)
            if not settled(found.values(), PARTITIONS, every_node_active=False):
                return False
            copies = [c for h in found.values() for c in h["partitions"]]
            return {c["partition"] for c in copies if c["role"] == "STANDBY"} == set(
                range(PARTITIONS)
            )

        wait_until(ready, timeout_s, lambda: f"the nodes to settle: {found}")
        return found


@pytest.fixture
def nodes(broker: KafkaBroker, tmp_path: Path) -> Iterator[tuple[View, Nodes]]:
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, [view]))
    group = f"g-{view.name}"
    tag = uuid.uuid4().hex[:4]
    configs = {
        name: node_config(
            broker.bootstrap, tmp_path, f"{name}-{tag}", group, STATEFED_STANDBY_REPLICAS="1"
        )
        for name in ("a", "b", "c")
    }
    running = Nodes({}, {}, {})
    try:
        for config in configs.values():
            log = tmp_path / f"{config.node_id}.log"
            running.processes[config.node_id] = spawn_node(config, view, log)
            running.urls[config.node_id] = config.url
            running.logs[config.node_id] = log
        yield view, running
    finally:
        for process in running.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a paused one must be able to die
                process.kill()
                process.wait(10)


def test_a_node_holding_only_standbys_paused_for_twice_its_session_answers_nothing_stale(
    broker: KafkaBroker, nodes: tuple[View, Nodes]
) -> None:
    view, running = nodes
    with httpx.Client(trust_env=False) as http:
        healths = running.wait_settled(http)
    standby_only = [n for n, h in healths.items() if not h["active"] and h["standby"]]
    assert len(standby_only) == 1, healths
    paused = standby_only[0]
    config = GatewayConfig(bootstrap=broker.bootstrap, timeout_ms=3000, retries=2)
    app = GatewayApp(config, statuses=StatusBoard(), catalogue=(view,))
    writer = ChangelogWriter(broker.bootstrap, view).start()
    with ExitStack() as stack:
        server = stack.enter_context(ServerThread(app, lifespan="on"))
        http = stack.enter_context(httpx.Client(trust_env=False, timeout=10))
        url = f"{server.url}/graphql"
        wait_until(
            lambda: http.get(f"{server.url}/health").json()["routable"] == [0, 1],
            30,
            "the gateway to route both partitions",
        )
        loads = [QueryLoad(url, KEYS, PARTITIONS, writer, max_lag=m) for m in (None, 0)]
        stop = loads[0].stop
        loads[1].stop = stop

        async def run() -> None:
            await asyncio.gather(*(load.run(120.0) for load in loads))

        runner = threading.Thread(target=asyncio.run, args=(run(),), name="load")
        runner.start()
        try:
            stop.wait(1.0)  # load on the settled nodes first, not a wait for anything
            process = running.processes[paused]
            process.send_signal(signal.SIGSTOP)
            try:
                time.sleep(PAUSE_S)  # the freeze itself, not a wait for a condition
            finally:
                process.send_signal(signal.SIGCONT)
            running.wait_settled(http)
            stop.wait(SETTLE_S)  # load on the settled nodes again
        finally:
            stop.set()
            runner.join(60)
            writer.stop()
    assert not runner.is_alive(), "the query load did not stop"
    answers = [a for load in loads for a in load.answers]
    strict = [a for a in answers if a.max_lag == 0 and None not in a.keys.values()]
    roles = Counter(r[1] for a in answers for r in a.keys.values() if r is not None)
    print(
        f"standby-only {paused} paused {PAUSE_S:.0f} s: {len(answers)} answers, "
        f"{len(strict)} maxLag 0 answered; roles {dict(roles)}"
    )
    assert strict, "no maxLag 0 answer"
    for violations in (
        protocol_problems(answers),
        above_truth(answers),
        stale_strict_reads(answers),
        copy_regressions(answers),
    ):
        assert not violations, f"{len(violations)} violations, first: {violations[:10]}"
    # the paused node's lease lapsed and it rejoined: it is a member again, serving
    with httpx.Client(trust_env=False) as http:
        assert running.healths(http)[paused].get("state") == "RUNNING"
