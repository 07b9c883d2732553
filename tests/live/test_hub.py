"""The feed hub against fake node feeds (real WebSockets on loopback, `tests.live.fake_feed`):
follows from offsets, from now and with a snapshot; the copy it picks; re-follows from the
offsets the stream reached after a lost connection, `gone` and an owner change, each
offset once; a slow reader; signed handshakes."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trustme

from gateway.cluster.routing import NodeInfo, RoutingFeed, RoutingTable, build_routing_table
from gateway.model.errors import NodeProtocolError
from gateway.nodes.hub import FeedBatch, FeedClosedError, FeedHub, FeedStream
from gateway.nodes.links import FeedLink, Frames
from runtime.clock import wall_clock_ms
from runtime.tasks import cancelled
from runtime.trust import ClusterSecret, NodeCallSigner
from schema import MemberRecord, NodeState, PartitionStatus, Role, partition_for
from schema.feed import Change
from tests.gateway.fakes import WORDS
from tests.live.fake_feed import Changelog, FakeFeedNode, count_row, wait_for
from tooling.broker import free_port

pytestmark = pytest.mark.timeout(60)

P = 2
SECRET = ClusterSecret(b"s" * 32)


def keys_in(partition: int, count: int, prefix: str = "k") -> list[str]:
    found: list[str] = []
    i = 0
    while len(found) < count:
        key = f"{prefix}{i}"
        if partition_for(key, P) == partition:
            found.append(key)
        i += 1
    return found


def record(
    node: FakeFeedNode, active: Sequence[int], standby: Sequence[int] = (), behind: int = 0
) -> MemberRecord:
    """`node`'s membership record; its standby copies `behind` more than they are."""
    statuses = [PartitionStatus(p, Role.ACTIVE, 10, 10) for p in active]
    for p in standby:
        lag = len(node.log.of(p)) - node.applied_of(p) + behind
        statuses.append(PartitionStatus(p, Role.STANDBY, 10 - lag, 10))
    return MemberRecord(
        node_id=node.node_id,
        url=node.url,
        incarnation=node.incarnation,
        state=NodeState.RUNNING,
        heartbeat_ms=wall_clock_ms(),
        heartbeat_interval_ms=1000,
        partitions=tuple(statuses),
    )


def table(*records: MemberRecord) -> RoutingTable:
    members = {r.node_id: r for r in records}
    return build_routing_table(members, {WORDS.name: P}, wall_clock_ms())


class Reader:
    """Reads a stream in the background, keeping every change it got."""

    def __init__(self, stream: FeedStream) -> None:
        self.batches: list[FeedBatch] = []
        self.error: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._read(stream))

    async def _read(self, stream: FeedStream) -> None:
        try:
            async for batch in stream:
                self.batches.append(batch)
        except Exception as exc:
            self.error = exc

    @property
    def changes(self) -> list[Change]:
        return [c for b in self.batches for c in b.changes]

    def offsets(self) -> list[int]:
        return [c.offset for c in self.changes if not c.snapshot]

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def nodes(log: Changelog, *specs: tuple[str, dict[str, object]]) -> list[FakeFeedNode]:
    started = []
    for node_id, options in specs:
        node = FakeFeedNode(node_id, log, range(P), **options)  # type: ignore[arg-type]
        started.append(await node.start())
    return started


def test_a_follow_from_an_offset_gets_every_later_change_in_order() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        for n in range(1, 6):
            log.append(key, count_row(key, n))
        (n1,) = await nodes(log, ("n1", {}))
        feed = RoutingFeed(table(record(n1, [0, 1])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with hub.follow(WORDS, 0, None, after=2) as stream:
                reader = Reader(stream)
                await wait_for(lambda: len(reader.offsets()) == 3, 10, "offsets 2..4")
                log.append(key, count_row(key, 6))
                await n1.publish()
                await wait_for(lambda: len(reader.offsets()) == 4, 10, "offset 5")
                assert reader.offsets() == [2, 3, 4, 5]
                assert [c.row["count"] for c in reader.changes if c.row] == [3, 4, 5, 6]
                assert reader.batches[-1].applied == 6
                assert reader.batches[-1].freshness == {
                    "partition": 0,
                    "node": "n1",
                    "role": "ACTIVE",
                    "appliedOffset": 6,
                    "lag": 0,
                }
                await reader.close()
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())


def test_a_follow_from_now_gets_only_new_changes_and_a_snapshot_the_rows_first() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        a, b = keys_in(1, 2)
        log.append(a, count_row(a, 1))
        log.append(b, count_row(b, 1))
        log.append(a, count_row(a, 2))
        (n1,) = await nodes(log, ("n1", {}))
        feed = RoutingFeed(table(record(n1, [0, 1])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with (
                hub.follow(WORDS, 1, None) as now,
                hub.follow(WORDS, 1, [a, "nobody"], snapshot=True) as snap,
            ):
                new, first = Reader(now), Reader(snap)
                await wait_for(lambda: first.batches, 10, "the snapshot")
                await wait_for(lambda: n1.follows_open() == 2, 10, "both follows open")
                log.append(b, count_row(b, 2))
                log.append(a, count_row(a, 3))
                await n1.publish()
                await wait_for(lambda: len(new.offsets()) == 2, 10, "the two new changes")
                await wait_for(lambda: len(first.offsets()) == 1, 10, "a's new change")
                assert new.offsets() == [3, 4]
                snapshot = first.batches[0]
                assert snapshot.snapshot
                rows = {c.key: c.row for c in snapshot.changes}
                assert rows == {a: count_row(a, 2), "nobody": None}
                assert {c.offset for c in snapshot.changes} == {3}
                assert first.offsets() == [4]  # b's change is not asked for
                await new.close()
                await first.close()
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())


def test_a_lost_owner_is_followed_on_its_successor_from_the_reached_offset_once() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        for n in range(1, 4):
            log.append(key, count_row(key, n))
        # the successor replays from 0 whatever it is asked: the hub must drop what it had
        n1, n2 = await nodes(log, ("n1", {}), ("n2", {"ignore_from": True}))
        feed = RoutingFeed(table(record(n1, [0, 1]), record(n2, [])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with hub.follow(WORDS, 0, [key], after=0) as stream:
                reader = Reader(stream)
                await wait_for(lambda: len(reader.offsets()) == 3, 10, "offsets 0..2")
                await n1.stop()  # the owner dies; its connection is lost
                for n in range(4, 7):
                    log.append(key, count_row(key, n))
                feed.publish(table(record(n2, [0, 1])))
                await wait_for(lambda: len(reader.offsets()) >= 6, 10, "offsets 3..5 from n2")
                await n2.publish()
                assert reader.offsets() == [0, 1, 2, 3, 4, 5]
                assert reader.batches[-1].freshness["node"] == "n2"
                assert n2.follows_asked[-1]["from"] == {WORDS.changelog_topic: 3}
                assert n2.follows_asked[-1]["snapshot"] is False
                await reader.close()
        finally:
            await hub.stop()
            await n2.stop()

    asyncio.run(scenario())


def test_gone_and_an_owner_change_move_the_follow_without_a_gap_or_a_repeat() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(1, 1)
        n1, n2 = await nodes(log, ("n1", {}), ("n2", {}))
        feed = RoutingFeed(table(record(n1, [0, 1]), record(n2, [])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with hub.follow(WORDS, 1, [key]) as stream:
                reader = Reader(stream)
                await wait_for(lambda: n1.follows_open() == 1, 10, "the follow on n1")
                log.append(key, count_row(key, 1))
                await n1.publish()
                await wait_for(lambda: reader.offsets() == [0], 10, "offset 0 from n1")
                # the table names a new owner: the hub moves there while n1 still serves
                feed.publish(table(record(n1, [0]), record(n2, [1])))
                await wait_for(lambda: n2.follows_open() == 1, 10, "the follow moved to n2")
                assert n2.follows_asked[-1]["from"] == {WORDS.changelog_topic: 1}
                await wait_for(lambda: n1.follows_open() == 0, 10, "n1's follow closed")
                log.append(key, count_row(key, 2))
                await n1.publish()  # n1 would still send: it is no longer followed
                await n2.publish()
                await wait_for(lambda: reader.offsets() == [0, 1], 10, "offset 1 from n2")
                # n2 lets the partition go while the table still names it: the hub waits for
                # another copy (n1 again, by the next table) and continues from offset 2
                log.append(key, count_row(key, 3))
                await n2.gone(1)
                feed.publish(table(record(n1, [0, 1]), record(n2, [0])))
                await wait_for(lambda: reader.offsets() == [0, 1, 2], 10, "offset 2 from n1")
                assert reader.batches[-1].freshness["node"] == "n1"
                assert n1.follows_asked[-1]["from"] == {WORDS.changelog_topic: 2}
                await reader.close()
        finally:
            await hub.stop()
            await n1.stop()
            await n2.stop()

    asyncio.run(scenario())


def test_a_standby_within_max_lag_is_followed_only_while_no_running_owner_is_there() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        for n in range(1, 4):
            log.append(key, count_row(key, n))
        n1, n2 = await nodes(log, ("n1", {"role": "STANDBY"}), ("n2", {}))
        n1.applied = {0: 2}  # one record behind
        feed = RoutingFeed(table(record(n1, [], standby=[0])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with (
                hub.follow(WORDS, 0, [key], after=0, max_lag=0) as strict,
                hub.follow(WORDS, 0, [key], after=0, max_lag=1) as loose,
            ):
                behind, within = Reader(strict), Reader(loose)
                await wait_for(lambda: within.offsets() == [0, 1], 10, "the standby's two")
                assert within.batches[-1].freshness["role"] == "STANDBY"
                assert within.batches[-1].freshness["lag"] == 1
                assert behind.offsets() == [] and n2.follows_open() == 0
                feed.publish(table(record(n1, [], standby=[0]), record(n2, [0])))
                await wait_for(lambda: behind.offsets() == [0, 1, 2], 10, "all from the owner")
                await wait_for(lambda: within.offsets() == [0, 1, 2], 10, "moved to the owner")
                assert within.batches[-1].freshness["node"] == "n2"
                await behind.close()
                await within.close()
        finally:
            await hub.stop()
            await n1.stop()
            await n2.stop()

    asyncio.run(scenario())


def test_a_slow_reader_costs_bounded_memory_and_still_gets_every_change_once() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        (n1,) = await nodes(log, ("n1", {}))
        feed = RoutingFeed(table(record(n1, [0, 1])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=100, stream_batches=4)
        await hub.start()
        try:
            async with hub.follow(WORDS, 0, [key]) as stream:
                await wait_for(lambda: n1.follows_open() == 1, 10, "the follow")
                for n in range(1, 21):  # 20 frames, nobody reading
                    log.append(key, count_row(key, n))
                    await n1.publish()
                await wait_for(lambda: n1.follows_open() == 0, 10, "the hub to stop following")
                assert stream.held <= 4
                got: list[int] = []
                async for batch in stream:
                    got.extend(c.offset for c in batch.changes)
                    if len(got) >= 20:
                        break
                assert got == list(range(20))
                assert [f["from"] for f in n1.follows_asked] == [
                    None,
                    {WORDS.changelog_topic: 4},
                ]
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())


class BurstLink(FeedLink):
    """A node's feed that answers each follow with every change of `log` from the offset
    asked (from 0 when from now), queued at once as a replay after a failover comes: the
    hub takes it without pausing. Its unfollow yields, as the send does while the
    connection is closing or its writes are paused."""

    def __init__(self, log: Changelog, partition: int) -> None:
        super().__init__("n1", "http://127.0.0.1:1", NodeCallSigner(None))
        self.log = log
        self.partition = partition
        self.asked: list[dict[str, Any]] = []

    async def follow(self, frame: dict[str, Any]) -> tuple[int, Frames]:
        self.asked.append(frame)
        topic = self.log.view.changelog_topic
        start = (frame["from"] or {}).get(topic, 0)
        frames = Frames()
        frames.put_nowait({"type": "following", "id": 1, "from": {topic: start}})
        for change in self.log.of(self.partition)[start:]:
            applied = {topic: change.offset + 1}
            frames.put_nowait(
                {"type": "changes", "id": 1, "changes": [change.to_json()], "applied": applied}
            )
        return 1, frames

    async def unfollow(self, ident: int) -> None:
        await asyncio.sleep(0)  # the send waits for the connection to drain


class LinkedHub(FeedHub):
    """A hub that reaches every node over `link` (`FeedHub.link` is where it makes links)."""

    def __init__(self, link: FeedLink, routing: RoutingFeed, stream_batches: int) -> None:
        super().__init__(routing, NodeCallSigner(None), 100, stream_batches=stream_batches)
        self._link = link

    def link(self, node: NodeInfo) -> FeedLink:
        return self._link


def test_a_shared_follow_that_overflows_follows_again_once_its_reader_caught_up() -> None:
    """The shared follow's reader never pauses between batches: while the hub sends the
    unfollow of a follow that overflowed, it empties the stream. The hub must see that and
    follow again from where the stream reached, not wait for the reader forever."""

    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        for n in range(1, 11):
            log.append(key, count_row(key, n))
        link = BurstLink(log, 0)
        node = FakeFeedNode("n1", log, range(P))  # never started: only its record is used
        hub = LinkedHub(link, RoutingFeed(table(record(node, [0, 1]))), stream_batches=4)
        await hub.start()
        seen: list[int] = []

        def take(batch: FeedBatch | Exception) -> None:
            assert isinstance(batch, FeedBatch), batch
            seen.extend(c.offset for c in batch.changes)

        try:
            async with hub.watch(WORDS, 0, None, take):
                await wait_for(lambda: len(seen) >= 10, 5, "every change of the burst")
                assert seen == list(range(10))
                topic = WORDS.changelog_topic
                assert [f["from"] for f in link.asked] == [None, {topic: 4}, {topic: 8}]
        finally:
            await hub.stop()

    asyncio.run(scenario())


def test_the_handshake_is_signed_with_the_cluster_secret_and_unsigned_is_refused() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        log.append(key, count_row(key, 1))
        (n1,) = await nodes(log, ("n1", {"secret": SECRET}))
        feed = RoutingFeed(table(record(n1, [0, 1])))
        signed = FeedHub(feed, NodeCallSigner(SECRET), max_lag=100)
        unsigned = FeedHub(feed, NodeCallSigner(None), max_lag=100)
        await signed.start()
        await unsigned.start()
        try:
            async with (
                signed.follow(WORDS, 0, None, after=0) as good,
                unsigned.follow(WORDS, 0, None, after=0) as bad,
            ):
                ok, refused = Reader(good), Reader(bad)
                await wait_for(lambda: ok.offsets() == [0], 10, "the signed follow")
                await wait_for(lambda: n1.refused >= 2, 10, "the unsigned one refused, retried")
                assert refused.changes == []
                await ok.close()
                await refused.close()
        finally:
            await signed.stop()
            await unsigned.stop()
            await n1.stop()

    asyncio.run(scenario())


def test_a_restarted_node_is_followed_once_the_gateway_reads_its_new_incarnation() -> None:
    """A handshake names the node process its membership record announced: while the
    gateway's table still holds the process before a restart, the node refuses it; once the
    new record is read, the hub makes a link for the new process, drops the old one, and
    the follow gets its changes."""

    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        log.append(key, count_row(key, 1))
        (n1,) = await nodes(log, ("n1", {"secret": SECRET}))
        n1.incarnation = "n1-2"  # restarted: the table below still names n1-1
        stale = dataclasses.replace(record(n1, [0, 1]), incarnation="n1-1")
        feed = RoutingFeed(table(stale))
        hub = FeedHub(feed, NodeCallSigner(SECRET), max_lag=100)
        await hub.start()
        try:
            async with hub.follow(WORDS, 0, None, after=0) as stream:
                reader = Reader(stream)
                await wait_for(lambda: n1.refused >= 1, 10, "the stale handshake refused")
                assert reader.changes == []
                feed.publish(table(record(n1, [0, 1])))  # the restarted node's record
                await wait_for(lambda: reader.offsets() == [0], 10, "the follow of n1-2")
                assert [key[2] for key in hub._links] == ["n1-2"]
                await reader.close()
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())


class _SlowToClose(FeedLink):
    """A link whose close never ends, as to a node that does not answer it."""

    async def close(self) -> None:
        await asyncio.Event().wait()


def test_a_link_slow_to_close_holds_back_no_later_routing_change() -> None:
    """A routing change closes the idle links of nodes that left; a close the node never
    answers does not keep the hub from the next change (nor from stopping)."""

    async def scenario() -> None:
        log = Changelog(WORDS, P)
        n1, n2 = await nodes(log, ("n1", {}), ("n2", {}))
        feed = RoutingFeed(table(record(n1, [0]), record(n2, [1])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            for node in (n1, n2):
                key = (node.node_id, node.url, node.incarnation)
                hub._links[key] = _SlowToClose(node.node_id, node.url, NodeCallSigner(None))
            feed.publish(table(record(n2, [0, 1])))  # n1 left: its link's close hangs
            await wait_for(lambda: len(hub._links) == 1, 10, "n1's link pruned")
            feed.publish(table())  # n2 left too
            await wait_for(lambda: not hub._links, 10, "n2's link pruned after n1's")
        finally:
            await hub.stop()
            await n1.stop()
            await n2.stop()

    asyncio.run(scenario())


def test_stopping_the_hub_ends_its_streams_with_an_error_to_resume_from() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (n1,) = await nodes(log, ("n1", {}))
        hub = FeedHub(RoutingFeed(table(record(n1, [0, 1]))), NodeCallSigner(None), max_lag=1)
        await hub.start()
        try:
            async with hub.follow(WORDS, 0, None) as stream:
                reader = Reader(stream)
                await wait_for(lambda: n1.follows_open() == 1, 10, "the follow")
                await hub.stop()
                await wait_for(lambda: reader.error is not None, 10, "the stream to end")
                assert isinstance(reader.error, FeedClosedError)
                assert "resume with your token" in str(reader.error)
        finally:
            await n1.stop()

    asyncio.run(scenario())


def test_watchers_of_a_partition_share_one_follow_and_each_get_every_batch() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        (n1,) = await nodes(log, ("n1", {}))
        hub = FeedHub(RoutingFeed(table(record(n1, [0, 1]))), NodeCallSigner(None), max_lag=1)
        await hub.start()
        first: list[int] = []
        second: list[int] = []

        def into(seen: list[int]) -> Callable[[FeedBatch | Exception], None]:
            def take(batch: FeedBatch | Exception) -> None:
                assert isinstance(batch, FeedBatch), batch
                seen.extend(c.offset for c in batch.changes)

            return take

        try:
            async with hub.watch(WORDS, 0, None, into(first)) as one:
                async with hub.watch(WORDS, 0, None, into(second)) as two:
                    assert one is two
                    await wait_for(lambda: n1.follows_open() == 1, 10, "one follow")
                    log.append(key, count_row(key, 1))
                    await n1.publish()
                    await wait_for(lambda: first == second == [0], 10, "both to see offset 0")
                assert n1.follows_open() == 1  # the first watcher still watches
                log.append(key, count_row(key, 2))
                await n1.publish()
                await wait_for(lambda: first == [0, 1], 10, "offset 1")
                assert second == [0]
            await wait_for(lambda: n1.follows_open() == 0, 10, "the follow to end")
            assert len(n1.follows_asked) == 1
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())


def test_an_https_node_is_followed_over_wss_verified_with_the_node_ca(tmp_path: Path) -> None:
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        log.append(key, count_row(key, 1))
        (n1,) = await nodes(log, ("n1", {"tls": server}))
        assert n1.url.startswith("https://")
        feed = RoutingFeed(table(record(n1, [0, 1])))
        trusted = FeedHub(feed, NodeCallSigner(None), max_lag=1, ca=ca_file)
        untrusted = FeedHub(feed, NodeCallSigner(None), max_lag=1)  # the system's CAs
        await trusted.start()
        await untrusted.start()
        try:
            async with (
                trusted.follow(WORDS, 0, None, after=0) as good,
                untrusted.follow(WORDS, 0, None, after=0) as bad,
            ):
                ok, refused = Reader(good), Reader(bad)
                await wait_for(lambda: ok.offsets() == [0], 10, "the follow over wss")
                assert n1.follows_open() == 1 and refused.changes == []
                await ok.close()
                await refused.close()
        finally:
            await trusted.stop()
            await untrusted.stop()
            await n1.stop()

    asyncio.run(scenario())


def test_a_followed_standby_is_kept_while_no_owner_runs_and_left_once_one_does() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(1, 1)
        log.append(key, count_row(key, 1))
        s1, s2, owner = await nodes(
            log, ("s1", {"role": "STANDBY"}), ("s2", {"role": "STANDBY"}), ("o", {})
        )
        feed = RoutingFeed(table(record(s1, [], standby=[1])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=10)
        await hub.start()
        try:
            async with hub.follow(WORDS, 1, [key], after=0) as stream:
                reader = Reader(stream)
                await wait_for(lambda: reader.offsets() == [0], 10, "offset 0 from s1")
                # another standby, more current: the follow stays where it is (no flapping)
                s1_behind = record(s1, [], standby=[1], behind=5)
                feed.publish(table(record(s2, [], standby=[1]), s1_behind))
                log.append(key, count_row(key, 2))
                await s1.publish()
                await wait_for(lambda: reader.offsets() == [0, 1], 10, "offset 1 from s1")
                assert s2.follows_asked == [] and s1.follows_open() == 1
                # a RUNNING owner: the follow moves there
                feed.publish(table(record(s1, [], standby=[1]), record(owner, [1])))
                await wait_for(lambda: owner.follows_open() == 1, 10, "the move to the owner")
                assert owner.follows_asked[-1]["from"] == {WORDS.changelog_topic: 2}
                await reader.close()
        finally:
            await hub.stop()
            for node in (s1, s2, owner):
                await node.stop()

    asyncio.run(scenario())


def test_a_standby_that_lets_go_to_become_the_owner_is_followed_as_the_owner() -> None:
    """The ACTIVE owner dies and the node whose standby was followed takes the partition:
    that standby says `gone`, the node then runs as owner, and the follow goes to it, while
    routing tables keep arriving with every heartbeat (as they do in a cluster)."""

    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(1, 1)
        log.append(key, count_row(key, 1))
        (standby,) = await nodes(log, ("s", {"role": "STANDBY"}))
        feed = RoutingFeed(table(record(standby, [], standby=[1])))
        hub = FeedHub(feed, NodeCallSigner(None), max_lag=10)
        await hub.start()
        heartbeats: asyncio.Task[None] | None = None
        try:
            async with hub.follow(WORDS, 1, [key], after=0) as stream:
                reader = Reader(stream)
                await wait_for(lambda: reader.offsets() == [0], 10, "offset 0 from the standby")
                await standby.gone(1)  # its standby copy closes: it is taking the partition
                standby.partitions.add(1)
                standby.role = "ACTIVE"

                async def beat() -> None:
                    while True:
                        feed.publish(table(record(standby, [1])))
                        await asyncio.sleep(0.2)

                heartbeats = asyncio.get_running_loop().create_task(beat())
                log.append(key, count_row(key, 2))
                await wait_for(lambda: standby.follows_open() == 1, 10, "the follow as owner")
                assert standby.follows_asked[-1]["from"] == {WORDS.changelog_topic: 1}
                await standby.publish()
                await wait_for(lambda: reader.offsets() == [0, 1], 10, "offset 1 from the owner")
                assert reader.batches[-1].freshness["role"] == "ACTIVE"
                await reader.close()
        finally:
            if heartbeats is not None:
                heartbeats.cancel()
            await hub.stop()
            await standby.stop()

    asyncio.run(scenario())


def test_a_watcher_that_raises_leaves_the_shared_follow_to_the_others() -> None:
    async def scenario() -> None:
        log = Changelog(WORDS, P)
        a, b = keys_in(0, 2)
        (n1,) = await nodes(log, ("n1", {}))
        hub = FeedHub(RoutingFeed(table(record(n1, [0, 1]))), NodeCallSigner(None), max_lag=1)
        await hub.start()
        seen: list[tuple[str, int]] = []

        def broken(batch: FeedBatch | Exception) -> None:
            raise RuntimeError("a bug in one watcher")

        def keep(batch: FeedBatch | Exception) -> None:
            assert isinstance(batch, FeedBatch), batch
            seen.extend((c.key, c.offset) for c in batch.changes)

        try:
            async with (
                hub.watch(WORDS, 0, None, broken),
                hub.watch_keys(WORDS, 0, None, [a], broken),
                hub.watch_keys(WORDS, 0, None, [a, b], keep),
            ):
                await wait_for(lambda: n1.follows_open() == 1, 10, "one shared follow")
                for n, key in enumerate([a, b, a], start=1):
                    log.append(key, count_row(key, n))
                    await n1.publish()
                await wait_for(lambda: seen == [(a, 0), (b, 1), (a, 2)], 10, "every change")
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())


def test_a_copy_whose_feed_does_not_answer_is_said_once_and_its_retries_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def unreachable() -> list[int]:
        return [r.levelno for r in caplog.records if "feed unreachable" in r.getMessage()]

    async def scenario() -> None:
        refused = FakeFeedNode("n1", Changelog(WORDS, P), [0])
        refused.port = free_port()  # never started: nothing listens, the follow is refused
        hub = FeedHub(RoutingFeed(table(record(refused, [0]))), NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with hub.follow(WORDS, 0, None, after=2):
                await wait_for(lambda: len(unreachable()) >= 3, 30, "three refused follows")
        finally:
            await hub.stop()

    with caplog.at_level(logging.DEBUG, "gateway.nodes.hub"):
        asyncio.run(scenario())
    said = unreachable()
    assert said[0] == logging.INFO
    assert set(said[1:]) == {logging.DEBUG}


def test_a_follow_stopped_by_a_caller_cancelled_meanwhile_still_leaves_the_node() -> None:
    """The caller's cancellation goes on (above), and the node is still told to stop
    sending: its frames would otherwise pile up in a queue nobody reads, and a snapshot
    part would hold every other follow on the link."""

    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (key,) = keys_in(0, 1)
        log.append(key, count_row(key, 1))
        (n1,) = await nodes(log, ("n1", {}))
        hub = FeedHub(RoutingFeed(table(record(n1, [0, 1]))), NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with hub.follow(WORDS, 0, None, after=0) as stream:
                await wait_for(stream.following.is_set, 10, "the follow started")
                (link,) = hub._links.values()
                assert not link.idle
                stopping = asyncio.get_running_loop().create_task(stream.stop())
                async with asyncio.timeout(5):  # until it waits for the follow's task
                    while stream._task is None or not stream._task.done():
                        await asyncio.sleep(0)
                stopping.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await stopping
                assert link.idle  # unfollowed all the same
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())


def test_stopping_a_follow_keeps_a_cancellation_of_the_one_stopping_it() -> None:
    """A subscription tearing down its follows may itself be cancelled meanwhile (its
    client went away): the cancellation must reach it, not be swallowed with the follow's."""

    async def scenario() -> None:
        cleaned, started = asyncio.Event(), asyncio.Event()

        async def follow() -> None:
            try:
                started.set()
                await asyncio.Event().wait()
            finally:  # an unfollow sent to the node: takes a moment
                await asyncio.sleep(0.05)
                cleaned.set()

        followed = asyncio.get_running_loop().create_task(follow())
        await started.wait()
        after_stop: list[str] = []

        async def teardown() -> None:
            await cancelled([followed], "the test")
            after_stop.append("ran on")  # only if its own cancellation was swallowed

        stopping = asyncio.get_running_loop().create_task(teardown())
        async with asyncio.timeout(5):  # until teardown waits for the follow's cleanup
            while not followed.cancelling():
                await asyncio.sleep(0)
        stopping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopping
        await cleaned.wait()
        assert after_stop == [] and followed.cancelled()

    asyncio.run(scenario())


def test_a_follow_a_node_refuses_ends_the_stream_naming_view_partition_and_node() -> None:
    """A node of another catalogue (mid rolling upgrade) refuses the follow of a view it does
    not serve: the stream ends with the error, instead of following again without end."""

    async def scenario() -> None:
        log = Changelog(WORDS, P)
        (n1,) = await nodes(log, ("n1", {"serves": ()}))
        hub = FeedHub(RoutingFeed(table(record(n1, [0, 1]))), NodeCallSigner(None), max_lag=100)
        await hub.start()
        try:
            async with hub.follow(WORDS, 1, None, after=0) as stream:
                reader = Reader(stream)
                await wait_for(lambda: reader.error is not None, 10, "the stream's end")
                await reader.close()
            assert isinstance(reader.error, NodeProtocolError)
            assert reader.error.extensions() == {
                "code": "PARTITION_UNAVAILABLE",
                "reason": "PROTOCOL_ERROR",
                "view": WORDS.name,
                "partitions": [1],
                "node": "n1",
            }
            assert "refused to follow" in str(reader.error)
            assert len(n1.follows_asked) == 1  # not asked again
        finally:
            await hub.stop()
            await n1.stop()

    asyncio.run(scenario())
