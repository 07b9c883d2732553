"""Nodes against a real Kafka broker, served by real uvicorn on loopback.

Each test has its own view (own changelog topic) and consumer group, so tests sharing
the session broker cannot disturb each other.
"""

from __future__ import annotations

import logging
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from node.errors import StoreError
from node.storage.store import ChangeBatch, LevelDBStore
from runtime.topics import ensure_topics, statefed_topics
from schema import MEMBERS_TOPIC, CountRow, NodeState, View, decode_member, partition_for
from tests.node.harness import (
    P,
    ThreadNode,
    node_config,
    produce_counts,
    produce_raw,
    spawn_node,
    unique_count_view,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def view(broker: KafkaBroker) -> View:
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    return view


def rows_for(keys: list[str], counts: dict[str, int]) -> list[CountRow]:
    """Every intermediate absolute count of each key, in order, as the pipeline emits them."""
    return [CountRow(k, n, 1_700_000_000_000 + n) for k in keys for n in range(1, counts[k] + 1)]


def running_with(node: ThreadNode, partitions: int) -> dict[str, Any] | None:
    health = node.health()
    ok = health["state"] == "RUNNING" and len(health["active"]) == partitions
    return health if ok else None


def test_node_materializes_serves_and_resumes_from_its_stored_offsets(
    broker: KafkaBroker, view: View, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="node.changelog.materializer")
    head_keys = [f"{uuid.uuid4().hex[:6]}-h{i}" for i in range(24)]
    head = {k: i % 5 + 1 for i, k in enumerate(head_keys)}
    written = produce_counts(broker.bootstrap, view, rows_for(head_keys, head))
    # an undecodable record is skipped, but its offset is applied
    bad_partition = partition_for(head_keys[0], P)
    produce_raw(broker.bootstrap, view, bad_partition, b"not json")
    written[bad_partition] += 1

    config = node_config(broker.bootstrap, tmp_path, "n1", f"g-{view.name}")
    node = ThreadNode(config, [view]).start()
    try:
        wait_until(lambda: running_with(node, P), 30, "n1 RUNNING with every partition")
        wait_until(lambda: node.counts(head_keys) == head, 15, "head counts")
        document = node.query("{ topWords(limit: 3) { word count } }")
        expected_top = sorted(head.items(), key=lambda kc: (-kc[1], kc[0]))[:3]
        assert document["data"]["topWords"] == [{"word": k, "count": c} for k, c in expected_top]
        freshness = {e["partition"]: e for e in document["extensions"]["freshness"]}
        assert sorted(freshness) == list(range(P))
        assert {
            p: e["appliedOffset"] for p, e in freshness.items() if e["appliedOffset"]
        } == written
        assert all(e["lag"] == 0 and e["node"] == "n1" for e in freshness.values())
    finally:
        node.stop()
    assert node.app.materializer is not None
    assert node.app.materializer.records_read == sum(written.values())

    # while n1 is down: mark one head key in its store (a re-read of the head would undo
    # it), and append a tail to the changelog
    marked = head_keys[1]
    with LevelDBStore(config.state_dir / f"partition-{partition_for(marked, P)}") as store:
        change = ChangeBatch()
        change.put_count(view.name, CountRow(marked, 999, 0))
        store.apply(change)
    tail_keys = [f"{uuid.uuid4().hex[:6]}-t{i}" for i in range(10)]
    tail = {k: 2 for k in tail_keys}
    tail_rows = [*rows_for(tail_keys, tail), CountRow(head_keys[2], 50, 0)]
    tail_written = produce_counts(broker.bootstrap, view, tail_rows)
    caplog.clear()

    # a new group has no committed offsets: only the stored offsets can skip the head
    restarted = node_config(broker.bootstrap, tmp_path, "n1", f"g2-{view.name}")
    node = ThreadNode(restarted, [view]).start()
    try:
        wait_until(lambda: running_with(node, P), 30, "restarted n1 RUNNING")
        expected = {**tail, head_keys[2]: 50, marked: 999, head_keys[3]: head[head_keys[3]]}
        wait_until(lambda: node.counts(list(expected)) == expected, 15, "tail counts")
        # restore progress: each partition caught up on exactly its tail, and says so
        progress = {
            p["partition"]: (p["restoring"], p["restoreDone"], p["restoreTotal"])
            for p in node.health()["partitions"]
        }
        assert progress == {
            p: (False, tail_written.get(p, 0), tail_written.get(p, 0)) for p in range(P)
        }
    finally:
        node.stop()
    assert node.app.materializer is not None
    assert node.app.materializer.records_read == len(tail_rows)
    restored = [r.getMessage() for r in caplog.records if " restored" in r.getMessage()]
    assert f"n1: restored {len(tail_rows)} records in" in "\n".join(restored), restored
    assert sum(" partition " in m for m in restored) == P, restored


def test_two_nodes_split_the_partitions_and_refuse_foreign_keys(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    keys = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(30)]
    counts = {k: 1 + i % 3 for i, k in enumerate(keys)}
    produce_counts(broker.bootstrap, view, rows_for(keys, counts))
    group = f"g-{view.name}"
    with ThreadNode(node_config(broker.bootstrap, tmp_path, "na", group), [view]).start() as a:
        wait_until(lambda: running_with(a, P), 30, "na RUNNING with every partition")
        with ThreadNode(node_config(broker.bootstrap, tmp_path, "nb", group), [view]).start() as b:

            def split() -> tuple[list[int], list[int]] | None:
                ha, hb = a.health(), b.health()
                if ha["state"] != "RUNNING" or hb["state"] != "RUNNING":
                    return None
                if sorted(ha["active"] + hb["active"]) != list(range(P)) or not hb["active"]:
                    return None
                return ha["active"], hb["active"]

            held_a, held_b = wait_until(split, 40, "na and nb to split the partitions")
            key_b = next(k for k in keys if partition_for(k, P) in held_b)
            key_a = next(k for k in keys if partition_for(k, P) in held_a)
            wait_until(
                lambda: b.counts([key_b]) == {key_b: counts[key_b]}, 15, "nb serving its key"
            )
            assert a.counts([key_a]) == {key_a: counts[key_a]}

            refused = a.query("query($w: String!) { wordCount(word: $w) { count } }", {"w": key_b})
            (error,) = refused["errors"]
            assert error["extensions"] == {
                "code": "NOT_OWNER",
                "view": view.name,
                "partition": partition_for(key_b, P),
                "node": "na",
            }
            top = a.query(
                "query($ps: [Int!]) { topWords(limit: 5, partitions: $ps) { word } }",
                {"ps": held_b},
            )
            assert top["errors"][0]["extensions"]["code"] == "NOT_OWNER"
            local = a.query("{ topWords(limit: 100) { word count } }")
            assert {row["word"] for row in local["data"]["topWords"]} == {
                k for k in keys if partition_for(k, P) in held_a
            }
        # nb left: na takes every partition over and answers nb's keys
        wait_until(lambda: running_with(a, P), 40, "na RUNNING with every partition again")
        wait_until(lambda: a.counts(keys) == counts, 15, "na serving every key")


def members_of(broker: KafkaBroker, node_id: str) -> list[bytes | None]:
    """Every value published to statefed.members under `node_id`, oldest first."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    members = TopicPartition(MEMBERS_TOPIC, 0, OFFSET_BEGINNING)
    try:
        consumer.assign([members])
        values: list[bytes | None] = []
        position = 0
        # read up to the high watermark of the latest fetch (heartbeats keep coming)
        while True:
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                position = (message.offset() or 0) + 1
                if message.key() == node_id.encode():
                    values.append(message.value())
            high = consumer.get_watermark_offsets(members, cached=True)[1]
            if 0 <= high <= position:
                return values
    finally:
        consumer.close()


def test_run_node_heartbeats_membership_and_leaves_cleanly_on_sigterm(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    node_log = tmp_path / "node.log"
    node_id = f"m-{uuid.uuid4().hex[:6]}"
    config = node_config(broker.bootstrap, tmp_path, node_id, f"g-{view.name}")
    process = spawn_node(config, view, node_log)
    try:
        with httpx.Client(base_url=config.url, timeout=5) as client:

            def running() -> bool:
                try:
                    health = client.get("/health").json()
                except httpx.TransportError:
                    assert process.poll() is None, node_log.read_text()
                    return False
                return health["state"] == "RUNNING" and len(health["active"]) == P

            wait_until(running, 40, f"{node_id} RUNNING")

        def heartbeats() -> list[Any] | None:
            records = [decode_member(v) for v in members_of(broker, node_id) if v is not None]
            running = [r for r in records if r.state is NodeState.RUNNING]
            return records if len(running) >= 3 else None

        records = wait_until(heartbeats, 15, "three RUNNING heartbeats", interval_s=0.3)
        last = records[-1]
        assert last.url == config.url
        assert last.heartbeat_interval_ms == 250
        assert last.active_partitions() == list(range(P))
        assert not any(p.restoring for p in last.partitions)
        stamps = [r.heartbeat_ms for r in records]
        assert stamps == sorted(stamps) and stamps[-1] > stamps[0]
        assert records[0].state is not NodeState.RUNNING  # published before it was ready

        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, node_log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    values = members_of(broker, node_id)
    assert values[-1] is None, "no tombstone after the last heartbeat"
    assert sorted(p.name for p in config.state_dir.iterdir()) == [
        f"partition-{p}" for p in range(P)
    ]
    assert "Traceback" not in node_log.read_text()


def test_a_store_that_cannot_open_stops_the_node(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    config = node_config(broker.bootstrap, tmp_path, "nf", f"g-{view.name}")
    # another process holding partition 0's LevelDB: the state dir is used twice
    with LevelDBStore(config.state_dir / "partition-0"):
        node = ThreadNode(config, [view]).start()
        try:
            node.thread.join(40)
            assert not node.thread.is_alive(), "the server kept running without its materializer"
        finally:
            node.stop()
    assert isinstance(node.app.failure, StoreError)
    assert "partition-0" in str(node.app.failure)
    status, health = node.app.health()
    assert (status, health["state"]) == (503, "FAILED")


def test_standby_copies_follow_the_other_node_and_take_over_with_only_the_tail(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    keys = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(30)]
    counts = {k: 1 + i % 3 for i, k in enumerate(keys)}
    produce_counts(broker.bootstrap, view, rows_for(keys, counts))
    group = f"g-{view.name}"
    with ThreadNode(node_config(broker.bootstrap, tmp_path, "sa", group), [view]).start() as a:
        wait_until(lambda: running_with(a, P), 30, "sa RUNNING with every partition")
        assert a.health()["standby"] == []  # one live node: no standbys
        with ThreadNode(node_config(broker.bootstrap, tmp_path, "sb", group), [view]).start() as b:

            def mirrored() -> tuple[list[int], list[int]] | None:
                ha, hb = a.health(), b.health()
                if ha["state"] != "RUNNING" or hb["state"] != "RUNNING" or not hb["active"]:
                    return None
                if sorted(ha["active"] + hb["active"]) != list(range(P)):
                    return None
                # with two nodes and one replica, each node is the standby of the other's partitions
                if ha["standby"] != hb["active"] or hb["standby"] != ha["active"]:
                    return None
                copies = ha["partitions"] + hb["partitions"]
                if any(c["restoring"] or c["lag"] for c in copies):
                    return None
                return ha["active"], hb["active"]

            _held_a, held_b = wait_until(
                mirrored, 60, "sa and sb to split and mirror the partitions"
            )
            key_b = next(k for k in keys if partition_for(k, P) in held_b)
            wait_until(
                lambda: b.counts([key_b]) == {key_b: counts[key_b]}, 15, "sb serving its key"
            )
            # sa holds key_b's partition as a standby: it answers only when asked to
            point = "query($w: String!) { wordCount(word: $w) { count } }"
            refused = a.query(point, {"w": key_b})
            assert refused["errors"][0]["extensions"]["code"] == "NOT_OWNER"
            standby = {
                "query": point,
                "variables": {"w": key_b},
                "extensions": {"readStandby": True},
            }

            def standby_count() -> dict[str, Any]:
                document: dict[str, Any] = a.client.post("/graphql", json=standby).json()
                return document

            # a newer count written while sb is active reaches sa's standby copy
            produce_counts(broker.bootstrap, view, [CountRow(key_b, 77, 0)])
            answered = wait_until(
                lambda: (d := standby_count())["data"]["wordCount"] == {"count": 77} and d,
                15,
                "sa's standby copy to apply the new count",
            )
            (fresh,) = answered["extensions"]["freshness"]
            assert (fresh["role"], fresh["node"], fresh["lag"]) == ("STANDBY", "sa", 0)
            roles = {
                (p.partition, p.role.value)
                for v in members_of(broker, "sa")[-1:]
                if v is not None
                for p in decode_member(v).partitions
            }
            assert {p for p, role in roles if role == "STANDBY"} == set(held_b)
            assert a.app.materializer is not None
            read_as_active = a.app.materializer.records_read
        # sb left: sa's standby copies become active and have no tail to catch up
        wait_until(lambda: running_with(a, P), 40, "sa RUNNING with every partition again")
        health = a.health()
        assert health["standby"] == []
        # (sa's own partitions were never revoked: their progress is still the first restore's)
        moved = [p for p in health["partitions"] if p["partition"] in held_b]
        assert moved and all(p["restoreTotal"] == 0 for p in moved), health
        assert a.app.materializer.records_read == read_as_active
        wait_until(lambda: a.counts(keys) == {**counts, key_b: 77}, 15, "sa serving every key")


def keys_in_every_partition(per_partition: int = 2) -> list[str]:
    keys: list[str] = []
    while any(sum(partition_for(k, P) == p for k in keys) < per_partition for p in range(P)):
        key = uuid.uuid4().hex[:8]
        if sum(partition_for(k, P) == partition_for(key, P) for k in keys) < per_partition:
            keys.append(key)
    return keys


def test_a_joining_node_takes_only_the_partitions_that_move_and_their_old_copies_keep_answering(
    broker: KafkaBroker, view: View, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="node.changelog.materializer")
    keys = keys_in_every_partition()
    counts = {k: 1 + i % 4 for i, k in enumerate(keys)}
    produce_counts(broker.bootstrap, view, rows_for(keys, counts))
    group = f"g-{view.name}"
    with ThreadNode(node_config(broker.bootstrap, tmp_path, "ca", group), [view]).start() as a:
        # what a read accepting no lag sends when the owner cannot answer: any copy, proved current
        current = {"topic": view.changelog_topic, "partitions": list(range(P)), "waitMs": 1000}
        lookup = {
            "query": "query($ws: [String!]!) { wordCounts(words: $ws) { word count } }",
            "variables": {"ws": keys},
            "extensions": {"readStandby": True, "readCurrent": current},
        }
        answers: list[dict[str, Any]] = []
        wait_until(lambda: running_with(a, P), 30, "ca RUNNING with every partition")
        with ThreadNode(node_config(broker.bootstrap, tmp_path, "cb", group), [view]).start() as b:

            def moved() -> list[int] | None:
                # a joins the group and partitions move to it meanwhile: ca answers every key
                answers.append(a.client.post("/graphql", json=lookup).json())
                ha, hb = a.health(), b.health()
                if ha["state"] != "RUNNING" or hb["state"] != "RUNNING" or not hb["active"]:
                    return None
                return (
                    list(hb["active"])
                    if sorted(ha["active"] + hb["active"]) == list(range(P))
                    else None
                )

            held_b = wait_until(moved, 60, "cb to take its partitions", 0.05)
        wait_until(lambda: running_with(a, P), 40, "ca RUNNING with every partition again")
    expected = [{"word": k, "count": counts[k]} for k in keys]
    wrong = [d for d in answers if d.get("errors") or d["data"]["wordCounts"] != expected]
    assert not wrong, f"{len(wrong)} of {len(answers)} answers of ca failed, first: {wrong[:1]}"
    standby = {
        e["partition"]
        for d in answers
        for e in d["extensions"]["freshness"]
        if e["role"] == "STANDBY"
    }
    assert standby == set(held_b), "the moved partitions' old copies answered as STANDBY copies"
    revoked = [r.getMessage() for r in caplog.records if "ca: partitions" in r.getMessage()]
    # cooperative: only the partitions that move are revoked (the last line is ca's shutdown)
    assert revoked[0] == f"node ca: partitions {list(range(P))} assigned", revoked
    assert revoked[1] == f"node ca: partitions {held_b} revoked ({held_b} kept as standby copies)"


def _proved_read(node: ThreadNode, asked: dict[str, Any]) -> dict[str, Any]:
    """The answer of `node` to `asked`, a read with `readCurrent`. The proof waits at most
    1 s (`node.reads.currency.MAX_WAIT_MS`); a copy that has not applied the write by then,
    as on a machine busy with other tests, refuses the read as not current (what a gateway
    asks another copy after), never answers without the write. So a refusal is read again."""

    def answered() -> dict[str, Any] | None:
        document: dict[str, Any] = node.client.post("/graphql", json=asked).json()
        if document.get("data") is not None:
            return document
        reasons = [e["extensions"].get("reason") for e in document.get("errors", [])]
        assert reasons == ["NOT_CURRENT"], document
        return None

    return wait_until(answered, 30, "the standby read proved current to be answered")


def test_a_standby_read_proved_current_holds_every_write_acknowledged_before_it(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    keys = keys_in_every_partition(1)
    produce_counts(broker.bootstrap, view, rows_for(keys, dict.fromkeys(keys, 1)))
    group = f"g-{view.name}"
    with ThreadNode(node_config(broker.bootstrap, tmp_path, "pa", group), [view]).start() as a:
        wait_until(lambda: running_with(a, P), 30, "pa RUNNING with every partition")
        with ThreadNode(node_config(broker.bootstrap, tmp_path, "pb", group), [view]).start() as b:

            def mirrored() -> list[int] | None:
                ha, hb = a.health(), b.health()
                if (
                    hb.get("state") != "RUNNING"
                    or not hb["active"]
                    or ha["standby"] != hb["active"]
                ):
                    return None
                return None if any(c["restoring"] for c in ha["partitions"]) else list(hb["active"])

            held_b = wait_until(mirrored, 60, "pa to hold pb's partitions as standby copies")
            key = next(k for k in keys if partition_for(k, P) in held_b)
            partition = partition_for(key, P)
            point = "query($w: String!) { wordCount(word: $w) { count } }"
            current = {"topic": view.changelog_topic, "partitions": [partition], "waitMs": 1000}
            asked = {
                "query": point,
                "variables": {"w": key},
                "extensions": {"readStandby": True, "readCurrent": current},
            }
            for n in range(2, 12):
                produce_counts(broker.bootstrap, view, [CountRow(key, n, 0)])  # acknowledged
                # asked right after: the proof waits for the write
                document = _proved_read(a, asked)
                assert document["data"] == {"wordCount": {"count": n}}, document
                (fresh,) = document["extensions"]["freshness"]
                assert (fresh["node"], fresh["role"]) == ("pa", "STANDBY")
        wait_until(lambda: running_with(a, P), 40, "pa RUNNING with every partition again")
