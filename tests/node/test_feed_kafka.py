"""The node's change feed (`/feed`) against a real Kafka broker and real uvicorn nodes.

Each test has its own view (own changelog topic) and consumer group. Changes are checked
against what was produced: the changelog record at each offset of a partition is known.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from node.replication import feedsocket
from runtime.topics import ensure_topics, statefed_topics
from runtime.trust import ClusterSecret
from schema import (
    DEMO_DOMAIN,
    CountRow,
    EventRow,
    View,
    ViewKind,
    encode_event,
    event_record_key,
    partition_for,
)
from schema.feed import Change
from tests.node.feedclient import open_feed
from tests.node.harness import (
    P,
    ThreadNode,
    node_config,
    produce_changelog,
    produce_counts,
    unique_count_view,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def view(broker: KafkaBroker) -> View:
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    return view


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.secret"
    path.write_bytes(base64.b64encode(os.urandom(48)) + b"\n")
    return path


def keys_in(partition: int, count: int, tag: str = "") -> list[str]:
    """`count` fresh keys of `partition`."""
    keys: list[str] = []
    while len(keys) < count:
        key = f"{tag}{uuid.uuid4().hex[:8]}"
        if partition_for(key, P) == partition:
            keys.append(key)
    return keys


def doc(row: CountRow) -> dict[str, Any]:
    return {"key": row.key, "count": row.count, "last_event_ms": row.last_event_ms}


def expected(view: View, rows: list[CountRow], first_offset: int) -> list[Change]:
    """The changes of `rows` written to one partition from `first_offset` on, one each."""
    return [Change(view.name, r.key, first_offset + i, doc(r)) for i, r in enumerate(rows)]


def running(node: ThreadNode, active: int) -> bool:
    health = node.health()
    return health["state"] == "RUNNING" and len(health["active"]) == active


def test_follows_from_zero_and_from_now_get_each_change_once_in_offset_order(
    broker: KafkaBroker, view: View, tmp_path: Path, secret_file: Path
) -> None:
    partition, topic = 2, view.changelog_topic
    head = [CountRow(k, 1, 1_700_000_000_000) for k in keys_in(partition, 30)]
    produce_counts(broker.bootstrap, view, head)
    config = node_config(
        broker.bootstrap, tmp_path, "f1", f"g-{view.name}",
        STATEFED_CLUSTER_SECRET_FILE=str(secret_file),
    )  # fmt: skip
    secret = ClusterSecret.read(secret_file)
    node = ThreadNode(config, [view]).start()
    feeds = contextlib.ExitStack()
    try:
        wait_until(lambda: running(node, P), 30, "f1 RUNNING with every partition")
        # unsigned, or without the feed's subprotocol: refused before any follow
        with pytest.raises(InvalidStatus) as refused:
            feeds.enter_context(open_feed(config))
        assert refused.value.response.status_code == 401
        assert b"UNAUTHENTICATED" in refused.value.response.body
        with pytest.raises(InvalidStatus) as refused:
            feeds.enter_context(open_feed(config, secret, subprotocol="graphql-transport-ws"))
        assert refused.value.response.status_code == 400

        feed = feeds.enter_context(open_feed(config, secret))
        feed.follow(1, partition, [view.name], **{"from": {topic: 0}})
        feed.wait_for("the head", lambda: feed.applied(1, topic) >= len(head))
        (following,) = feed.of(1, "following")
        assert following["from"] == {topic: 0} and following["role"] == "ACTIVE"
        assert following["applied"] == {topic: len(head)}
        assert feed.changes(1) == expected(view, head, 0)

        # from now: only what comes after; the follow from 0 goes on with the same
        feed.follow(2, partition, [view.name])
        feed.wait_for("following 2", lambda: bool(feed.of(2, "following")))
        assert feed.of(2, "following")[0]["from"] == {topic: len(head)}
        tail = [CountRow(head[0].key, 2, 1_700_000_000_001)]
        tail += [CountRow(k, 1, 1_700_000_000_002) for k in keys_in(partition, 5)]
        produce_counts(broker.bootstrap, view, tail)
        total = len(head) + len(tail)
        feed.wait_for(
            "the tail", lambda: min(feed.applied(1, topic), feed.applied(2, topic)) >= total
        )
        assert feed.changes(1) == expected(view, head + tail, 0)
        assert feed.changes(2) == expected(view, tail, len(head))
        assert feed.of(None, "error") == [] and feed.of(1, "error") == []

        # follows the node cannot serve are answered, naming why
        feed.follow(3, partition, ["no_such_view"])
        feed.follow(4, partition, [view.name], snapshot=True)
        feed.follow(1, partition, [view.name])
        feed.follow(5, P + 3, [view.name])
        feed.wait_for(
            "the answers", lambda: len(feed.of_type("error")) == 3 and bool(feed.of(5, "gone"))
        )
        assert view.name in feed.of(3, "error")[0]["message"]
        assert "names its limit" in feed.of(4, "error")[0]["message"]
        assert "follow 1 is running" in feed.of(1, "error")[0]["message"]
        # follows no copy of this catalogue takes say so; a clash of ids is the sender's
        assert [feed.of(n, "error")[0].get("refused") for n in (3, 4, 1)] == [True, True, None]
        assert feed.of(5, "gone")[0]["reason"] == "the node does not hold it"
    finally:
        feeds.close()
        node.stop()


def test_a_follow_older_than_the_ring_is_replayed_from_kafka_without_gap_or_duplicate(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    partition, topic = 4, view.changelog_topic
    # ~2,400 changes of ~300 bytes in memory each: more than a 1 MiB budget over 6 rings keeps
    keys = keys_in(partition, 1200)
    head = [CountRow(k, 1, 1_700_000_000_000) for k in keys]
    head += [CountRow(k, 2, 1_700_000_000_001) for k in keys]
    config = node_config(
        broker.bootstrap, tmp_path, "f2", f"g-{view.name}", STATEFED_NODE_FEED_BUFFER_MB="1"
    )
    node = ThreadNode(config, [view]).start()
    feeds = contextlib.ExitStack()
    try:
        wait_until(lambda: running(node, P), 60, "f2 RUNNING with every partition")
        feed = feeds.enter_context(open_feed(config))
        # a follow from now keeps the ring of the partition filled while the head comes
        feed.follow(9, partition, [view.name])
        feed.wait_for("following 9", lambda: bool(feed.of(9, "following")))
        produce_counts(broker.bootstrap, view, head)
        wait_until(
            lambda: node.app.feed.status(partition)[2][topic] >= len(head), 60, "the head applied"
        )
        generation, _seq = node.app.feed.end_seq(partition)
        first = node.app.feed.first(partition, generation, topic)
        assert first is not None and 0 < first < len(head), "the ring should have dropped some"
        feed.follow(1, partition, [view.name], keys=keys[:50], **{"from": {topic: 0}})
        feed.follow(2, partition, [view.name], **{"from": {topic: 0}})
        tail = [CountRow(k, 3, 1_700_000_000_002) for k in keys[:3]]
        produce_counts(broker.bootstrap, view, tail)
        total = len(head) + len(tail)
        feed.wait_for(
            "the replay and the ring",
            lambda: min(feed.applied(1, topic), feed.applied(2, topic)) >= total,
            60,
        )
        final = {k: doc(CountRow(k, 2, 1_700_000_000_001)) for k in keys}
        final.update({r.key: doc(r) for r in tail})
        by_offset = {i: doc(r) for i, r in enumerate(head + tail)}
        records = head + tail
        for follow_id, wanted in ((1, keys[:50]), (2, keys)):
            changes = feed.changes(follow_id)
            # one change per changelog record of the keys followed, however the replay
            # chunked and the node batched them: no gap, no duplicate, in offset order
            mine = set(wanted)
            assert [c.offset for c in changes] == [
                i for i, r in enumerate(records) if r.key in mine
            ], "a change was missed, came twice or out of order"
            assert all(c.row == by_offset[c.offset] for c in changes)
            assert {c.key: c.row for c in changes} == {k: final[k] for k in wanted}
        # the changes below the ring's first offset can only have come from Kafka
        assert any(c.offset < first for c in feed.changes(2))
    finally:
        feeds.close()
        node.stop()


def test_a_follow_of_a_partition_applied_unfollowed_replays_each_change_once_from_kafka(
    broker: KafkaBroker, view: View, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="node.replication.feedsocket")
    partition, topic = 5, view.changelog_topic
    # one change per changelog record
    head = [CountRow(k, 1, 1_700_000_000_000) for k in keys_in(partition, 40)]
    produce_counts(broker.bootstrap, view, head)
    config = node_config(broker.bootstrap, tmp_path, "f5", f"g-{view.name}")
    node = ThreadNode(config, [view]).start()
    feeds = contextlib.ExitStack()
    try:
        wait_until(lambda: running(node, P), 30, "f5 RUNNING with every partition")
        # applied with nobody following: the ring holds none of it, from the applied offset on
        assert node.app.feed.status(partition)[2] == {topic: len(head)}
        generation, _seq = node.app.feed.end_seq(partition)
        assert node.app.feed.first(partition, generation, topic) == len(head)

        feed = feeds.enter_context(open_feed(config))
        some = {r.key for r in head[::3]}
        feed.follow(1, partition, [view.name], **{"from": {topic: 15}})
        feed.follow(2, partition, [view.name], keys=sorted(some), **{"from": {topic: 0}})
        feed.wait_for("following", lambda: len(feed.of_type("following")) == 2)
        tail = [CountRow(head[0].key, 2, 1_700_000_000_001)]
        tail += [CountRow(k, 1, 1_700_000_000_002) for k in keys_in(partition, 10, tag="t")]
        produce_counts(broker.bootstrap, view, tail)
        rows, total = head + tail, len(head) + len(tail)
        feed.wait_for(
            "the replay and the ring",
            lambda: min(feed.applied(1, topic), feed.applied(2, topic)) >= total,
        )
        assert feed.changes(1) == expected(view, rows, 0)[15:]
        assert feed.changes(2) == [c for c in expected(view, rows, 0) if c.key in some]
        assert feed.of_type("error") == [] and feed.of_type("gone") == []
        replays = [r.getMessage() for r in caplog.records if "replays" in r.getMessage()]
        for follow_id, start in ((1, 15), (2, 0)):
            wanted = (
                f"follow {follow_id} of partition {partition} replays {topic} from offset {start}"
            )
            assert any(wanted in m for m in replays), replays
    finally:
        feeds.close()
        node.stop()


def test_a_follow_too_slow_for_the_ring_falls_back_to_replay_without_gap_or_duplicate(
    broker: KafkaBroker, view: View, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="node.replication.feedsocket")
    partition, topic = 3, view.changelog_topic
    config = node_config(
        broker.bootstrap, tmp_path, "f4", f"g-{view.name}", STATEFED_NODE_FEED_BUFFER_MB="1"
    )
    node = ThreadNode(config, [view]).start()
    feeds = contextlib.ExitStack()
    try:
        wait_until(lambda: running(node, P), 30, "f4 RUNNING with every partition")
        # a reader that stops reading: a 4 KiB socket buffer backs its frames up at once
        feed = feeds.enter_context(open_feed(config, receive_buffer=4096))
        feed.follow(1, partition, [view.name])
        feed.wait_for("following", lambda: bool(feed.of(1, "following")))
        # ~5 MB of changes (600-character keys): far more than the ~170 KB ring of a partition
        rows = [CountRow(k, 1, 7) for k in keys_in(partition, 4000, tag="x" * 592)]
        produce_counts(broker.bootstrap, view, rows)

        def applied() -> bool:
            status = node.app.feed.status(partition)
            return status[2][topic] >= len(rows)

        wait_until(applied, 60, "f4 applying every record")
        feed.wait_for("every change", lambda: feed.applied(1, topic) >= len(rows), 60)
        assert feed.changes(1) == expected(view, rows, 0)
        replays = [r.getMessage() for r in caplog.records if "replays" in r.getMessage()]
        assert any("follow 1 of partition 3 replays" in m for m in replays), replays
    finally:
        feeds.close()
        node.stop()


def test_a_snapshot_follow_and_its_changes_equal_the_store_while_records_stream_in(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    partition, topic = 1, view.changelog_topic
    keys = keys_in(partition, 8)
    produce_counts(broker.bootstrap, view, [CountRow(k, 1, 1) for k in keys])
    config = node_config(broker.bootstrap, tmp_path, "f3", f"g-{view.name}")
    node = ThreadNode(config, [view]).start()
    feeds = contextlib.ExitStack()
    stop = threading.Event()
    written = [len(keys)]

    def stream() -> None:
        n = 2
        while not stop.is_set() and n < 200:
            rows = [CountRow(k, n, n) for k in keys]
            written[0] += sum(produce_counts(broker.bootstrap, view, rows).values())
            n += 1

    streamer = threading.Thread(target=stream, name="stream")
    try:
        wait_until(lambda: running(node, P), 30, "f3 RUNNING with every partition")
        streamer.start()
        wait_until(lambda: written[0] > 5 * len(keys), 30, "records streaming")
        feed = feeds.enter_context(open_feed(config))
        feed.follow(1, partition, [view.name], keys=keys, snapshot=True)
        feed.wait_for("the snapshot", lambda: bool(feed.of(1, "changes")))
        stop.set()
        streamer.join(30)
        total = written[0]
        feed.wait_for("every change", lambda: feed.applied(1, topic) >= total)
        (following,) = feed.of(1, "following")
        start = following["from"][topic]
        snapshot = feed.of(1, "changes")[0]
        assert snapshot.get("snapshot") is True and snapshot["applied"] == {topic: start}

        # one producer, one flush per round: the record at offset o is key o % 8's round o // 8
        def record(offset: int) -> dict[str, Any]:
            n = offset // len(keys) + 1
            return doc(CountRow(keys[offset % len(keys)], n, n))

        rows: dict[str, Any] = {}
        for change in feed.changes(1):
            if change.snapshot:  # exactly the rows of every record below its offset
                assert change.offset == start
                assert change.row == record(
                    max(o for o in range(start) if keys[o % len(keys)] == change.key)
                )
            else:  # nothing the snapshot held comes again, and each change is its record
                assert change.offset >= start and change.row == record(change.offset)
            rows[change.key] = change.row
        counts = node.counts(keys)
        assert rows == {k: doc(CountRow(k, n, n)) for k, n in counts.items() if n is not None}
        assert set(counts) == set(keys)
    finally:
        stop.set()
        if streamer.is_alive():
            streamer.join(30)
        feeds.close()
        node.stop()


def test_a_snapshot_of_every_key_holds_each_row_of_the_partition_up_to_its_limit(
    broker: KafkaBroker, view: View, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feedsocket, "SNAPSHOT_FRAME_ROWS", 5)  # 12 rows: frames of 5, 5, 2
    partition, topic = 3, view.changelog_topic
    keys = keys_in(partition, 12)
    others = keys_in(partition + 1, 5)  # another partition's: never in this snapshot
    produce_counts(broker.bootstrap, view, [CountRow(k, 2, 7) for k in keys + others])
    config = node_config(broker.bootstrap, tmp_path, "f4", f"g-{view.name}")
    node = ThreadNode(config, [view]).start()
    feeds = contextlib.ExitStack()
    try:
        wait_until(lambda: running(node, P), 30, "f4 RUNNING with every partition")
        feed = feeds.enter_context(open_feed(config))
        feed.follow(1, partition, [view.name], keys=None, snapshot=True, limit=len(keys))
        feed.follow(2, partition, [view.name], keys=None, snapshot=True, limit=len(keys) - 1)
        feed.wait_for("the snapshot", lambda: len(feed.of(1, "changes")) >= 3)
        feed.wait_for("the refusal", lambda: bool(feed.of(2, "error")))
        (following,) = feed.of(1, "following")
        start = following["from"][topic]
        frames = feed.of(1, "changes")
        assert [len(f["changes"]) for f in frames] == [5, 5, 2]
        assert [f.get("more", False) for f in frames] == [True, True, False]
        assert all(f.get("snapshot") is True and f["applied"] == {topic: start} for f in frames)
        assert sorted(c.key for c in feed.changes(1)) == sorted(keys)
        assert all(c.snapshot and c.offset == start for c in feed.changes(1))
        assert {c.key: c.row for c in feed.changes(1)} == {k: doc(CountRow(k, 2, 7)) for k in keys}
        message = feed.of(2, "error")[0]["message"]
        assert f"more than {len(keys) - 1} rows of view {view.name}" in message
        assert feed.of(2, "following") == []

        # the follow goes on with every key's changes, new keys too
        new = keys_in(partition, 1, "new")
        produce_counts(broker.bootstrap, view, [CountRow(keys[0], 3, 8), CountRow(new[0], 1, 9)])
        feed.wait_for("the changes", lambda: feed.applied(1, topic) >= start + 2)
        assert [(c.key, c.offset) for c in feed.changes(1) if not c.snapshot] == [
            (keys[0], start),
            (new[0], start + 1),
        ]
    finally:
        feeds.close()
        node.stop()


def test_standby_copies_serve_follows_and_a_copy_let_go_says_gone(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    topic, group = view.changelog_topic, f"g-{view.name}"
    with ThreadNode(node_config(broker.bootstrap, tmp_path, "fa", group), [view]).start() as a:
        feeds = contextlib.ExitStack()
        try:
            wait_until(lambda: running(a, P), 30, "fa RUNNING with every partition")
            feed = feeds.enter_context(open_feed(a.config))
            for partition in range(P):
                feed.follow(partition, partition, [view.name])
            feed.wait_for("following all", lambda: len(feed.of_type("following")) == P)
            fb = node_config(broker.bootstrap, tmp_path, "fb", group)
            b = feeds.enter_context(ThreadNode(fb, [view]).start())

            def moved() -> list[int] | None:
                ha, hb = a.health(), b.health()
                if ha["state"] != "RUNNING" or hb.get("state") != "RUNNING" or not hb["active"]:
                    return None
                return hb["active"] if set(hb["active"]) <= set(ha["standby"]) else None

            moved_to_b = wait_until(moved, 60, "fb to take partitions, fa keeping them as standby")
            p = moved_to_b[0]
            # the copy fa let go goes on as its standby copy: the follow only sees the role change
            feed.wait_for(
                "progress to STANDBY",
                lambda: any(f["role"] == "STANDBY" for f in feed.of(p, "progress")),
            )
            rows = [CountRow(k, 1, 5) for k in keys_in(p, 4)]
            start = int(feed.of(p, "progress")[-1]["applied"][topic])
            produce_counts(broker.bootstrap, view, rows)
            feed.wait_for(
                "changes on the standby", lambda: feed.applied(p, topic) >= start + len(rows)
            )
            assert feed.changes(p) == expected(view, rows, start)
            assert feed.of(p, "gone") == []

            # fb leaves: fa's materializer takes p over, closing its standby copy first
            b.stop()
            feed.wait_for("gone", lambda: bool(feed.of(p, "gone")), 60)
        finally:
            feeds.close()
        wait_until(lambda: running(a, P), 60, "fa RUNNING with every partition again")


def test_a_history_record_written_again_is_no_new_change(
    broker: KafkaBroker, tmp_path: Path, secret_file: Path
) -> None:
    """After a crash the pipeline writes a history view's micro-batch again: the same
    record keys and values at later offsets. The node holds those events already: its feed
    shows each event once, at the offset it was first written at."""
    tag = uuid.uuid4().hex[:8]
    history = dataclasses.replace(DEMO_DOMAIN[3], name=f"t{tag}_history", topic=f"t{tag}.b")
    assert history.kind is ViewKind.HISTORY
    ensure_topics(broker.bootstrap, statefed_topics(P, [history]))
    (customer,) = keys_in(1, 1, "c")
    events = [EventRow(customer, 1_700_000_000_000 + n, 0, n, {"trip": f"e{n}"}) for n in range(4)]
    records = [(event_record_key(e), encode_event(e), 1) for e in events]
    produce_changelog(broker.bootstrap, history, records[:3])
    config = node_config(
        broker.bootstrap, tmp_path, "h1", f"g-{history.name}",
        STATEFED_CLUSTER_SECRET_FILE=str(secret_file),
    )  # fmt: skip
    node = ThreadNode(config, [history]).start()
    topic = history.changelog_topic
    try:
        wait_until(lambda: running(node, P), 30, "h1 RUNNING with every partition")
        with open_feed(config, ClusterSecret.read(secret_file)) as feed:
            feed.follow(1, 1, [history.name], **{"from": {topic: 0}})
            feed.wait_for("the first three events", lambda: feed.applied(1, topic) >= 3)
            produce_changelog(broker.bootstrap, history, [records[0], records[1], records[3]])
            feed.wait_for("the records written again", lambda: feed.applied(1, topic) >= 6)
            shown = [(c.offset, (c.row or {})["fields"]["trip"]) for c in feed.changes(1)]
        assert shown == [(0, "e0"), (1, "e1"), (2, "e2"), (5, "e3")]
    finally:
        node.stop()
