"""Disk faults of a node process on real LevelDB files, against a real Apache Kafka broker.

The test writes the changelog itself (as the pipeline would), so the truth is what it
wrote, and a reader thread queries the node all along: no count above what was written,
none lower than one answered before, every count exact at the end.

- A store file truncated while the node is stopped: at start the node finds the damage,
  moves the store aside and rebuilds that partition from offset 0 (restore progress in
  /health) while the other partitions answer.
- A store that reports corruption while applying (LevelDB's error injected into a real
  store, in a materializer in the test process): moved aside and rebuilt the same way.
- A full disk (a real tmpfs, filled by the test): the node pauses applying, keeps
  serving what it holds, shows the error in /health, never advances an offset past what
  its store holds; it resumes by itself when space returns, and a store stopped while
  the disk was full opens cleanly with exactly its offsets' rows.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import plyvel
import pytest

from node.changelog.materializer import Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.storage.changes import ChangeBatch, Stored
from node.storage.store import LevelDBStore
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow, NodeState, View, partition_for
from tests.node.disks import fill, small_disk
from tests.node.harness import P, node_config, produce_counts, spawn_node, unique_count_view
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(240)

QUERY = "query($ws: [String!]!) { wordCounts(words: $ws) { word count } }"


@pytest.fixture
def view(broker: KafkaBroker) -> View:
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    return view


def keys_by_partition(per_partition: int) -> dict[int, list[str]]:
    """`per_partition` fresh keys in each partition."""
    tag = uuid.uuid4().hex[:6]
    found: dict[int, list[str]] = {p: [] for p in range(P)}
    i = 0
    while any(len(keys) < per_partition for keys in found.values()):
        key = f"{tag}-{i}"
        keys = found[partition_for(key, P)]
        if len(keys) < per_partition:
            keys.append(key)
        i += 1
    return found


class Changelog:
    """What the test wrote to the changelog, in order per partition: the truth."""

    def __init__(self, bootstrap: str, view: View):
        self.bootstrap, self.view = bootstrap, view
        self.records: dict[int, list[CountRow]] = {p: [] for p in range(P)}
        # per key, the highest count handed to the producer: no answer may exceed it
        self.bound: dict[str, int] = {}

    def write(self, rows: list[CountRow]) -> None:
        for row in rows:  # raised before producing: an answer may see the row at once
            self.bound[row.key] = max(self.bound.get(row.key, 0), row.count)
        produce_counts(self.bootstrap, self.view, rows)
        for row in rows:
            self.records[partition_for(row.key, P)].append(row)

    def written(self) -> dict[int, int]:
        return {p: len(rows) for p, rows in self.records.items()}

    def state(self, partition: int, applied: int | None = None) -> dict[str, int]:
        """The counts of `partition` once its first `applied` records (default all) apply."""
        counts: dict[str, int] = {}
        for row in self.records[partition][:applied]:
            counts[row.key] = row.count
        return counts

    def final(self, keys: Iterable[str]) -> dict[str, int | None]:
        state = {k: c for p in range(P) for k, c in self.state(p).items()}
        return {k: state.get(k) for k in keys}


def rounds(keys: list[str], first: int, last: int) -> list[CountRow]:
    """Counts `first`..`last` of every key, interleaved round by round as a pipeline
    writes them, so that every prefix of a partition mixes keys."""
    return [CountRow(k, n, 1_700_000_000_000 + n) for n in range(first, last + 1) for k in keys]


@dataclass
class Answer:
    group: str
    sent: float
    received: float
    counts: dict[str, int | None] | None  # None: no answer (an error, or the node is down)
    error: str | None
    # the node's /health just before the query (None when it did not answer)
    health: dict[str, Any] | None
    bound: dict[str, int] = field(default_factory=dict)


class Reader:
    """Asks the node for each group of keys over and over from a thread, with /health
    before each round, recording every answer."""

    def __init__(self, url: str, groups: dict[str, list[str]], changelog: Changelog):
        self.groups, self.changelog = groups, changelog
        self.answers: list[Answer] = []
        self._client = httpx.Client(base_url=url, timeout=5, trust_env=False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._client.close()
        assert not self._thread.is_alive(), "the reader did not stop"

    def _run(self) -> None:
        while not self._stop.wait(0.005):  # a little air for the node on 2 cores
            health = self._health()
            for group, keys in self.groups.items():
                self.answers.append(self._ask(group, keys, health))

    def _health(self) -> dict[str, Any] | None:
        try:
            document: dict[str, Any] = self._client.get("/health").json()
        except (httpx.HTTPError, ValueError):
            return None
        return document

    def _ask(self, group: str, keys: list[str], health: dict[str, Any] | None) -> Answer:
        sent = time.monotonic()
        counts: dict[str, int | None] | None = None
        error = None
        try:
            document = self._client.post(
                "/graphql", json={"query": QUERY, "variables": {"ws": keys}}
            ).json()
            if document.get("errors"):
                error = document["errors"][0].get("extensions", {}).get("code", "no code")
            else:
                rows = document["data"]["wordCounts"]
                counts = {k: (r["count"] if r else None) for k, r in zip(keys, rows, strict=True)}
        except (httpx.HTTPError, ValueError) as exc:
            error = type(exc).__name__
        bound = {k: self.changelog.bound.get(k, 0) for k in keys}
        return Answer(group, sent, time.monotonic(), counts, error, health, bound)

    def answered(self, group: str) -> list[Answer]:
        return [a for a in self.answers if a.group == group and a.counts is not None]


def wrong_answers(answers: list[Answer]) -> list[str]:
    """Counts above what was written when the answer arrived, or below an earlier answer
    of the same key (one reader thread: answers are in real-time order)."""
    found: list[str] = []
    best: dict[str, int] = {}
    for a in answers:
        for key, count in (a.counts or {}).items():
            if count is None:
                continue
            if count > a.bound[key]:
                found.append(f"{key}: {count} > written {a.bound[key]} at {a.received:.2f}")
            if count < best.get(key, 0):
                found.append(f"{key}: {count} after {best[key]} at {a.received:.2f}")
            best[key] = max(best.get(key, 0), count)
    return found


class NodeProcess:
    """A node as its own process (`run_node`), logging to a file; stopped with SIGTERM."""

    def __init__(self, config: NodeConfig, view: View, log_path: Path):
        self.config, self.log_path = config, log_path
        self.process: subprocess.Popen[bytes] = spawn_node(config, view, log_path)
        self.client = httpx.Client(base_url=config.url, timeout=5, trust_env=False)

    def log(self) -> str:
        return self.log_path.read_text()

    def health(self) -> dict[str, Any] | None:
        try:
            document: dict[str, Any] = self.client.get("/health").json()
        except (httpx.HTTPError, ValueError):
            assert self.process.poll() is None, f"the node exited:\n{self.log()}"
            return None
        return document

    def counts(self, keys: list[str]) -> dict[str, int | None] | None:
        try:
            document = self.client.post(
                "/graphql", json={"query": QUERY, "variables": {"ws": keys}}
            ).json()
        except (httpx.HTTPError, ValueError):
            return None
        if document.get("errors"):
            return None
        rows = document["data"]["wordCounts"]
        return {k: (r["count"] if r else None) for k, r in zip(keys, rows, strict=True)}

    def running(self) -> dict[str, Any] | None:
        health = self.health()
        if health is None or health["state"] != "RUNNING" or len(health["active"]) != P:
            return None
        return health

    def healthy(self) -> dict[str, Any] | None:
        """/health once it shows no store error."""
        health = self.health()
        return health if health is not None and not health["storeErrors"] else None

    def stop(self) -> int:
        """SIGTERM, then the exit code (SIGKILL after 30 s: a failure of the test)."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


def test_a_truncated_store_file_is_found_at_start_and_its_partition_rebuilt_while_the_others_serve(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    keys = keys_by_partition(20)
    damaged = 2
    others = [k for p, ks in keys.items() if p != damaged for k in ks]
    changelog = Changelog(broker.bootstrap, view)
    # a long history in the damaged partition, so that its rebuild takes a while
    changelog.write(rounds(keys[damaged], 1, 12000) + rounds(others, 1, 3))
    config = node_config(broker.bootstrap, tmp_path, "d1", f"g-{view.name}")
    node = NodeProcess(config, view, tmp_path / "d1-first.log")
    try:
        wait_until(node.running, 60, "d1 RUNNING with every partition")
        everything = others + keys[damaged]
        wait_until(lambda: node.counts(everything) == changelog.final(everything), 30, "counts")
    finally:
        assert node.stop() == 0, node.log()

    # while d1 is down: damage partition 2's store, and append a tail to the others
    store_dir = config.state_dir / f"partition-{damaged}"
    victim = max(
        [*store_dir.glob("*.log"), *store_dir.glob("*.ldb")], key=lambda f: f.stat().st_size
    )
    size = victim.stat().st_size
    with open(victim, "r+b") as file:
        file.truncate(size // 2)
    changelog.write(rounds(others, 4, 5))
    tail = {p: 2 * len(keys[p]) for p in range(P) if p != damaged}

    node = NodeProcess(config, view, tmp_path / "d1-second.log")
    groups = {"others": others, "damaged": keys[damaged]}
    try:
        with Reader(config.url, groups, changelog) as reader:
            health = wait_until(node.running, 90, "d1 RUNNING again")
            wait_until(
                lambda: node.counts(everything) == changelog.final(everything), 30, "exact counts"
            )
    finally:
        assert node.stop() == 0, node.log()

    # found at open, moved aside for inspection (truncated file and all), said so
    (aside,) = tmp_path.glob(f"d1/partition-{damaged}.damaged-*")
    assert (aside / victim.name).stat().st_size == size // 2
    log = node.log()
    assert f"partition {damaged}: partition store {store_dir} is damaged: {victim.name}" in log
    assert f"moved it aside to {aside} and rebuilding" in log
    (set_aside,) = health["storesSetAside"]
    assert (set_aside["partition"], set_aside["movedTo"]) == (damaged, str(aside))
    # the damaged partition restored all of its records from offset 0, the others their tail
    written = changelog.written()
    progress = {p["partition"]: (p["restoreDone"], p["restoreTotal"]) for p in health["partitions"]}
    assert progress == {p: (n, n) for p, n in {**tail, damaged: written[damaged]}.items()}

    # no answer wrong; the others answered while partition 2 was rebuilding, and always
    # once they first did; partition 2 refused (NOT_OWNER) until rebuilt, then exact
    assert wrong_answers(reader.answers) == []
    other_answers = [a for a in reader.answers if a.group == "others"]
    first = next(i for i, a in enumerate(other_answers) if a.counts is not None)
    assert [a.error for a in other_answers[first:] if a.counts is None] == []
    during_rebuild = [a for a in other_answers[first:] if _rebuilding(a.health, damaged)]
    assert during_rebuild, "no answer of the other partitions was seen during the rebuild"
    assert all(a.counts == changelog.final(others) for a in during_rebuild)
    damaged_answers = [a for a in reader.answers if a.group == "damaged"]
    assert {a.error for a in damaged_answers if a.error and a.health} <= {"NOT_OWNER"}
    final = changelog.final(keys[damaged])
    assert all(a.counts == final for a in reader.answered("damaged"))


def _rebuilding(health: dict[str, Any] | None, partition: int) -> bool:
    if health is None:
        return False
    copy = [c for c in health["partitions"] if c["partition"] == partition]
    return bool(copy) and copy[0]["restoring"]


class CorruptOnArming(LevelDBStore):
    """A real LevelDB store whose next write, once armed, fails as LevelDB reports a
    corrupt block."""

    def __init__(self, path: Path, armed: threading.Event):
        super().__init__(path, cache_mb=1)
        self.armed = armed

    def _write(self, db: plyvel.DB, batch: ChangeBatch) -> Stored:
        if self.armed.is_set():
            self.armed.clear()
            raise plyvel.CorruptionError(b"Corruption: block checksum mismatch (injected)")
        return super()._write(db, batch)


def test_a_store_found_corrupt_while_applying_is_set_aside_and_rebuilt(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    keys = keys_by_partition(10)
    damaged = 4
    changelog = Changelog(broker.bootstrap, view)
    changelog.write(rounds([k for ks in keys.values() for k in ks], 1, 5))
    config = node_config(broker.bootstrap, tmp_path, "c1", f"g-{view.name}")
    armed = threading.Event()

    def stores(partition: int) -> LevelDBStore:
        path = config.state_dir / f"partition-{partition}"
        return CorruptOnArming(path, armed) if partition == damaged else LevelDBStore(path)

    registry = PartitionRegistry("c1")
    materializer = Materializer(config, [view], registry, store_factory=stores)
    materializer.start()
    try:

        def status(partition: int) -> Any:
            return next(s for s in registry.statuses() if s.partition == partition)

        def caught_up() -> bool:
            if registry.state is not NodeState.RUNNING or len(registry.partitions()) != P:
                return False
            statuses = {s.partition: s for s in registry.statuses()}
            written = changelog.written()
            return all(
                not s.restoring and s.applied_offset == written[p] for p, s in statuses.items()
            )

        wait_until(caught_up, 60, "every partition applied")
        armed.set()
        changelog.write(rounds(keys[damaged], 6, 8))
        wait_until(lambda: registry.set_aside(), 30, "the damaged store set aside")
        wait_until(caught_up, 60, "every partition applied after the rebuild")
        (aside,) = registry.set_aside()
        assert aside.partition == damaged
        assert "block checksum mismatch (injected)" in aside.reason
        assert Path(aside.moved_to).name.startswith(f"partition-{damaged}.damaged-")
        assert Path(aside.moved_to, "CURRENT").is_file()  # the old store, whole
        # rebuilt from offset 0, with restore progress, to exactly what was written
        rebuilt = status(damaged)
        written = changelog.written()[damaged]
        assert (rebuilt.restore_done, rebuilt.restore_total) == (written, written)
        assert rebuilt.store_error is None
        found = registry.read(damaged, lambda s: s.get_many(view.name, keys[damaged]))
        assert found is not None
        assert {r.key: r.count for r in found[0] if r} == changelog.final(keys[damaged])
    finally:
        materializer.stop()
        materializer.close()


def test_a_full_disk_pauses_applying_and_the_node_resumes_exactly_when_space_returns(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    base = [k for ks in keys_by_partition(15).values() for k in ks]
    # written while the disk is full, once each: a record skipped instead of re-read
    # after the pause would leave its key unknown
    while_full = [keys_by_partition(100), keys_by_partition(100)]
    every = base + [k for ks in while_full for p in range(P) for k in ks[p]]
    changelog = Changelog(broker.bootstrap, view)
    changelog.write(rounds(base, 1, 3))
    with small_disk(tmp_path / "disk", 16) as disk:
        config = node_config(broker.bootstrap, disk, "f1", f"g-{view.name}")
        node = NodeProcess(config, view, tmp_path / "f1-first.log")
        try:
            wait_until(node.running, 60, "f1 RUNNING with every partition")
            with Reader(config.url, {"all": every}, changelog) as reader:
                wait_until(lambda: node.counts(every) == changelog.final(every), 30, "counts")
                rows = _once_each(while_full[0]) + rounds(base, 4, 10)
                paused = _fill_and_write(node, disk, changelog, rows, every)
                wait_until(lambda: len(_paused(reader)) >= 3, 30, "answers while paused")
                # space returns: the node resumes by itself, from where its stores stopped
                (disk / "filler").unlink()
                wait_until(
                    lambda: node.counts(every) == changelog.final(every), 60, "exact counts again"
                )
                health = wait_until(node.healthy, 30, "no store errors")
                applied = {c["partition"]: c["appliedOffset"] for c in health["partitions"]}
                assert applied == changelog.written()
            # served all along from what the stores held: never an error, never wrong;
            # while every store failed, what they held (the last such answer may come
            # after a store resumed)
            assert [a.error for a in reader.answers if a.counts is None] == []
            assert wrong_answers(reader.answers) == []
            assert all(_known(a.counts) == paused for a in _paused(reader)[:-1])

            # full again, and stopped while full: a clean exit, stores that open cleanly
            rows = _once_each(while_full[1]) + rounds(base, 11, 20)
            stopped = _fill_and_write(node, disk, changelog, rows, every)
        finally:
            assert node.stop() == 0, node.log()
        log = node.log()
        assert "applying it is paused and retried" in log and "takes writes again" in log
        assert "Traceback" not in log, log
        (disk / "filler").unlink()
        for partition in range(P):
            with LevelDBStore(config.state_dir / f"partition-{partition}") as store:
                offset = store.offsets()[view.changelog_topic]
                assert offset < changelog.written()[partition]  # not everything: it was full
                held = _held(store, view, every)
                assert held == changelog.state(partition, offset)  # exactly its offset's rows
                assert held == {k: c for k, c in stopped.items() if k in held}
        node = NodeProcess(config, view, tmp_path / "f1-second.log")
        try:
            wait_until(node.running, 60, "f1 RUNNING after the restart")
            wait_until(lambda: node.counts(every) == changelog.final(every), 30, "final counts")
        finally:
            assert node.stop() == 0, node.log()


def _once_each(keys: dict[int, list[str]]) -> list[CountRow]:
    """One record of each key, partitions interleaved."""
    return [CountRow(ks[i], 1, 1_700_000_000_001) for i in range(100) for ks in keys.values()]


def _held(store: LevelDBStore, view: View, keys: list[str]) -> dict[str, int]:
    rows = store.get_many(view.name, keys)
    return {row.key: row.count for row in rows if row is not None}


def _known(counts: dict[str, int | None] | None) -> dict[str, int]:
    return {k: c for k, c in (counts or {}).items() if c is not None}


def _paused(reader: Reader) -> list[Answer]:
    """The answers asked when /health showed a store error on every partition."""
    return [a for a in reader.answers if a.health and len(a.health["storeErrors"]) == P]


def _fill_and_write(
    node: NodeProcess, disk: Path, changelog: Changelog, rows: list[CountRow], keys: list[str]
) -> dict[str, int]:
    """Fill the disk and write `rows`; once every partition shows a disk-full error, check
    that applying stopped where each store is consistent with its offsets; returns the
    known counts of `keys` the node serves meanwhile."""
    fill(disk)
    changelog.write(rows)

    def every_partition_failing() -> dict[str, Any] | None:
        health = node.health()
        failing = {e["partition"] for e in (health or {}).get("storeErrors", [])}
        return health if failing == set(range(P)) else None

    health = wait_until(every_partition_failing, 30, "a store error on every partition")
    for error in health["storeErrors"]:
        assert error["error"].startswith("disk full: cannot write partition store ")
        assert " bytes free there)" in error["error"]
        copy = next(c for c in health["partitions"] if c["partition"] == error["partition"])
        assert copy["storeError"] == error["error"]
    assert health["state"] == "RUNNING"
    applied = {c["partition"]: c["appliedOffset"] for c in health["partitions"]}
    served = node.counts(keys)
    assert served is not None
    known = _known(served)
    for partition in range(P):
        assert applied[partition] < changelog.written()[partition]
        state = changelog.state(partition, applied[partition])
        assert {k: c for k, c in known.items() if partition_for(k, P) == partition} == state
    after = node.health()
    assert after is not None
    assert {c["partition"]: c["appliedOffset"] for c in after["partitions"]} == applied
    return known
