"""Routing without Kafka: tables from membership records, liveness, claims, versions."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from gateway.cluster.membership import MemberDirectory
from gateway.cluster.routing import (
    Disclaimers,
    LastOwner,
    Liveness,
    RoutingFeed,
    build_routing_table,
)
from gateway.model.errors import (
    PartitionNeverAssignedError,
    PartitionUnassignedError,
    RoutingNotReadyError,
)
from schema import CATALOGUE, MemberRecord, NodeState, PartitionStatus, Role, encode_member
from tests.gateway.fakes import member

VIEW = CATALOGUE[0]
NOW = 1_700_000_000_000


def test_owner_is_the_live_active_claimant() -> None:
    members = {
        "a": member("a", "http://a:1", [0, 2], NOW - 500),
        "b": member("b", "http://b:1", [1], NOW - 100),
    }
    table = build_routing_table(members, {VIEW.name: 4}, NOW)
    owners = [table.owner(p) for p in range(4)]
    assert [owner.node_id if owner else None for owner in owners] == ["a", "b", "a", None]
    groups, unassigned = table.route(range(4))
    assert {n: parts for n, (_, parts) in groups.items()} == {"a": [0, 2], "b": [1]}
    assert unassigned == [3]
    assert table.routable(4) == [0, 1, 2]


def test_records_older_than_three_heartbeats_are_dead_and_own_nothing() -> None:
    members = {
        "fresh": member("fresh", "http://f:1", [0], NOW - 3000, interval_ms=1000),
        "dead": member("dead", "http://d:1", [1], NOW - 3001, interval_ms=1000),
        "slow": member("slow", "http://s:1", [2], NOW - 20_000, interval_ms=10_000),
    }
    table = build_routing_table(members, {VIEW.name: 3}, NOW)
    assert table.nodes["dead"].alive is False
    assert table.owner(1) is None
    assert table.owner(0).node_id == "fresh"  # type: ignore[union-attr]
    assert table.owner(2).node_id == "slow"  # type: ignore[union-attr]


def test_a_stalled_membership_feed_keeps_the_table_of_its_last_news() -> None:
    members = {
        "a": member("a", "http://a:1", [0], NOW - 30_500),
        "b": member("b", "http://b:1", [1], NOW - 30_200),
    }
    # the broker last answered 30 s ago, just after both heartbeats: nobody is judged dead
    stalled = Liveness(NOW - 30_000, stale_since_ms=NOW - 30_000)
    table = build_routing_table(members, {VIEW.name: 2}, NOW, stalled)
    assert table.stale_since_ms == NOW - 30_000
    assert table.routable(2) == [0, 1]
    assert all(node.alive for node in table.nodes.values())
    # judged as of now, as a current feed would, both are long dead
    current = build_routing_table(members, {VIEW.name: 2}, NOW)
    assert current.stale_since_ms is None and current.routable(2) == []


def test_silence_within_a_past_stall_is_not_counted_against_a_node() -> None:
    # the feed was stalled from NOW - 30 s to NOW - 2 s; since then it works again
    after = Liveness(NOW, excused=(NOW - 30_000, NOW - 2_000))
    assert after.silence_ms(NOW - 30_500) == 2_500  # 0.5 s before the stall, 2 s after
    assert after.silence_ms(NOW - 1_000) == 1_000  # a heartbeat after the stall: all counts
    members = {
        "quiet": member("quiet", "http://q:1", [0], NOW - 30_500),
        "gone": member("gone", "http://g:1", [1], NOW - 32_000),
    }
    table = build_routing_table(members, {VIEW.name: 2}, NOW, after)
    assert table.stale_since_ms is None
    assert table.nodes["quiet"].alive  # 2.5 s of silence that counts: within 3 heartbeats
    assert not table.nodes["gone"].alive  # 2 s before the stall + 2 s after it: dead
    later = Liveness(NOW + 600, excused=(NOW - 30_000, NOW - 2_000))
    assert not later.alive(members["quiet"])  # still silent 3 heartbeats after the stall


def test_a_live_node_two_heartbeats_behind_the_newest_is_suspect() -> None:
    members = {
        "newest": member("newest", "http://a:1", [0], NOW - 100, interval_ms=1000),
        "on_time": member("on_time", "http://b:1", [1], NOW - 2100, interval_ms=1000),
        "missed": member("missed", "http://c:1", [2], NOW - 2101, interval_ms=1000),
        "slow_beat": member("slow_beat", "http://d:1", [3], NOW - 2500, interval_ms=5000),
        "dead": member("dead", "http://e:1", [], NOW - 3001, interval_ms=1000),
    }
    table = build_routing_table(members, {VIEW.name: 4}, NOW)
    suspect = {node_id for node_id, node in table.nodes.items() if node.suspect}
    assert suspect == {"missed"}  # the dead are not suspect: they are dead
    assert table.owner(2).node_id == "missed"  # type: ignore[union-attr]  # the planner decides


def test_after_a_stall_a_node_is_suspect_only_for_missed_heartbeats_outside_it() -> None:
    """After a broker outage the node heard first is no reason to suspect the others for
    the outage: they get their usual heartbeats to be heard again."""
    stall = (NOW - 30_000, NOW - 1_000)  # the feed stalled for 29 s until 1 s ago
    members = {
        "first": member("first", "http://a:1", [0], NOW - 100, interval_ms=1000),
        "not_yet": member("not_yet", "http://b:1", [1], NOW - 30_200, interval_ms=1000),
        "missed": member("missed", "http://c:1", [2], NOW - 31_300, interval_ms=1000),
    }
    table = build_routing_table(members, {VIEW.name: 3}, NOW, Liveness(NOW, excused=stall))
    assert table.nodes["not_yet"].alive and not table.nodes["not_yet"].suspect
    assert table.nodes["missed"].alive and table.nodes["missed"].suspect
    # without the stall excused, the gap to the newest heartbeat would make both suspect
    unexcused = build_routing_table(members, {VIEW.name: 3}, NOW, Liveness(NOW - 29_000))
    assert unexcused.nodes["not_yet"].suspect


def test_no_node_is_suspect_when_no_heartbeat_arrives_at_all() -> None:
    """A broker outage stops every heartbeat alike: nobody is behind the others."""
    members = {
        "a": member("a", "http://a:1", [0], NOW - 2900, interval_ms=1000),
        "b": member("b", "http://b:1", [1], NOW - 2950, interval_ms=1000),
    }
    table = build_routing_table(members, {VIEW.name: 2}, NOW)
    assert not any(node.suspect for node in table.nodes.values())


def test_running_claimant_preferred_then_newest_record() -> None:
    members = {
        "old": member("old", "http://o:1", [0, 1], NOW - 900),
        "new": member("new", "http://n:1", [0], NOW - 10),
        "restoring": member("restoring", "http://r:1", [1], NOW, state=NodeState.RESTORING),
    }
    table = build_routing_table(members, {VIEW.name: 2}, NOW)
    assert table.owner(0).node_id == "new"  # type: ignore[union-attr]
    assert table.owner(1).node_id == "old"  # type: ignore[union-attr]


def test_a_claim_whose_lag_is_unknown_comes_after_one_whose_lag_is_known() -> None:
    """A node that stood still past its group session wakes claiming partitions another
    node owns now; its first record doubts its copies' lag (node.replication.membership): it is not
    preferred for being the newest record, though it is RUNNING."""
    woke = member("woke", "http://w:1", [0, 1], NOW)
    doubted = tuple(
        dataclasses.replace(status, lag_unknown_since_ms=NOW - 10_000) for status in woke.partitions
    )
    members = {
        "woke": dataclasses.replace(woke, partitions=doubted),
        "owner": member("owner", "http://o:1", [0], NOW - 500),
    }
    table = build_routing_table(members, {VIEW.name: 2}, NOW)
    assert table.owner(0).node_id == "owner"  # type: ignore[union-attr]
    assert table.owner(1).node_id == "woke"  # type: ignore[union-attr]  # the only claim


def test_a_disclaimed_claim_is_skipped_until_the_node_publishes_again() -> None:
    members = {
        "a": member("a", "http://a:1", [0], NOW - 10),
        "b": member("b", "http://b:1", [0], NOW - 500),
    }
    table = build_routing_table(members, {VIEW.name: 1}, NOW)
    disclaimers = Disclaimers()
    disclaimers.add(table.nodes["a"], [0])
    assert table.owner(0, disclaimers).node_id == "b"  # type: ignore[union-attr]
    members["a"] = member("a", "http://a:1", [0], NOW + 1)
    newer = build_routing_table(members, {VIEW.name: 1}, NOW + 1)
    assert newer.owner(0, disclaimers).node_id == "a"  # type: ignore[union-attr]


def test_partition_count_comes_from_metadata_not_from_the_table() -> None:
    members = {"a": member("a", "http://a:1", [0, 1], NOW)}
    table = build_routing_table(members, {VIEW.name: 12}, NOW)
    assert table.partition_count(VIEW) == 12
    assert table.routable(12) == [0, 1]
    unknown = build_routing_table(members, {}, NOW)
    with pytest.raises(RoutingNotReadyError, match=r"statefed\.word_counts\.changelog"):
        unknown.partition_count(VIEW)


def test_directory_applies_records_and_tombstones() -> None:
    directory = MemberDirectory()
    record = member("a", "http://a:1", [0], NOW)
    assert directory.apply(b"a", encode_member(record))
    assert directory.records["a"] == record
    assert not directory.apply(b"x", b"not json")
    assert "x" not in directory.records
    assert directory.apply(b"a", None)
    assert directory.records == {}
    assert not directory.apply(b"a", None)


class _Clocks:
    """The gateway's wall clock (ms) and its monotonic clock (s), moved together."""

    def __init__(self) -> None:
        self.wall_ms = NOW - 10_000
        self.monotonic_ms = 0

    def at(self, wall_ms: int) -> int:
        self.monotonic_ms += wall_ms - self.wall_ms
        self.wall_ms = wall_ms
        return wall_ms

    def monotonic(self) -> float:
        return self.monotonic_ms / 1000

    def wall(self) -> int:
        return self.wall_ms


def _heartbeats(
    directory: MemberDirectory, clocks: _Clocks, node: str, skew_ms: int, until_ms: int
) -> None:
    """`node`'s heartbeats of 1 s up to `until_ms` on the gateway's clock, each read live
    20 ms after it was sent, stamped by a clock `skew_ms` ahead of the gateway's."""
    for sent in range(until_ms - 5_000, until_ms + 1, 1_000):
        record = encode_member(member(node, f"http://{node}:1", [0], sent + skew_ms))
        assert directory.apply(node.encode(), record, received_ms=clocks.at(sent + 20))


@pytest.mark.parametrize("skew_ms", [-3_500, -60_000, 2_500])
def test_a_node_whose_clock_is_off_is_alive_and_makes_no_other_suspect(skew_ms: int) -> None:
    clocks = _Clocks()
    directory = MemberDirectory(wall=clocks.wall, monotonic=clocks.monotonic)
    _heartbeats(directory, clocks, "off", skew_ms, NOW)
    _heartbeats(directory, clocks, "on", 0, NOW)
    table = build_routing_table(directory.records, {}, NOW + 100)
    for node in ("off", "on"):
        assert table.nodes[node].alive and not table.nodes[node].suspect, table.nodes[node]
        assert table.nodes[node].heartbeat_ms == NOW + 20  # on the gateway's clock
    assert not build_routing_table(directory.records, {}, NOW + 4_000).nodes["off"].alive


def test_a_backlog_read_late_keeps_its_nodes_silence() -> None:
    """Records of a node that died while the gateway was paused, read once it woke: their
    delay is not taken for the node's clock."""
    clocks = _Clocks()
    directory = MemberDirectory(wall=clocks.wall, monotonic=clocks.monotonic)
    _heartbeats(directory, clocks, "died", -3_500, NOW)
    late = encode_member(member("died", "http://died:1", [0], NOW + 1_000 - 3_500))
    directory.apply(b"died", late, received_ms=clocks.at(NOW + 30_000))  # after a 30 s pause
    assert directory.records["died"].heartbeat_ms == NOW + 1_020
    assert not build_routing_table(directory.records, {}, NOW + 30_000).nodes["died"].alive


def test_the_gateways_own_clock_stepped_forward_leaves_every_node_alive() -> None:
    """The gateway's clock was 5 s behind (the node's right: 5 s ahead of it), then NTP set
    it 5 s forward: the node's offset moves with it at once."""
    clocks = _Clocks()
    directory = MemberDirectory(wall=clocks.wall, monotonic=clocks.monotonic)
    _heartbeats(directory, clocks, "n", 5_000, NOW)
    clocks.wall_ms += 5_000  # a step: the monotonic clock did not move
    _heartbeats(directory, clocks, "n", 0, NOW + 6_000 + 5_000)
    assert directory.records["n"].heartbeat_ms == NOW + 11_020
    assert build_routing_table(directory.records, {}, NOW + 11_100).nodes["n"].alive


def test_a_node_back_as_another_process_is_judged_on_its_new_clock() -> None:
    """A node that left comes back (same id, another process: maybe another machine)."""
    clocks = _Clocks()
    directory = MemberDirectory(wall=clocks.wall, monotonic=clocks.monotonic)
    _heartbeats(directory, clocks, "n", 0, NOW)
    behind = dataclasses.replace(
        member("n", "http://n:1", [0], NOW + 1_000 - 3_500), incarnation="second"
    )
    directory.apply(b"n", encode_member(behind), received_ms=clocks.at(NOW + 1_020))
    assert directory.records["n"].heartbeat_ms == NOW + 1_020
    assert build_routing_table(directory.records, {}, NOW + 1_100).nodes["n"].alive


def test_directory_prunes_only_dead_nodes_past_the_lookback() -> None:
    directory = MemberDirectory()
    directory.apply(b"dead", encode_member(member("dead", "u", [], NOW - 20_000)))
    directory.apply(b"slow", encode_member(member("slow", "u", [], NOW - 20_000, 60_000)))
    directory.apply(b"ok", encode_member(member("ok", "u", [], NOW)))
    assert directory.prune(NOW, keep_ms=10_000)
    assert sorted(directory.records) == ["ok", "slow"]


def test_directory_prunes_no_node_for_a_stalled_feeds_silence() -> None:
    directory = MemberDirectory()
    directory.apply(b"a", encode_member(member("a", "u", [], NOW - 20_000)))
    assert not directory.prune(NOW, 10_000, Liveness(NOW - 19_000, stale_since_ms=NOW - 19_000))
    assert not directory.prune(NOW, 10_000, Liveness(NOW, excused=(NOW - 19_000, NOW - 500)))
    assert sorted(directory.records) == ["a"]
    assert directory.prune(NOW + 10_000, 10_000, Liveness(NOW + 10_000))


def test_feed_versions_grow_and_waiters_wake() -> None:
    async def scenario() -> None:
        feed = RoutingFeed()
        first = feed.current.version
        pokes: list[int] = []
        feed.on_refresh(lambda: pokes.append(1))
        waiter = asyncio.create_task(feed.refresh(first, timeout_s=5))
        await asyncio.sleep(0)
        table = build_routing_table({}, {VIEW.name: 3}, NOW)
        published = feed.publish(table)
        assert (await waiter).version == published.version == first + 1
        assert pokes == [1]
        # nothing newer: refresh returns the current table once the timeout passes
        assert (await feed.refresh(published.version, timeout_s=0.01)) is published

    asyncio.run(scenario())


def test_standby_copies_are_offered_by_least_lag_within_the_bound() -> None:
    def with_copies(node_id: str, heartbeat_ms: int, *copies: PartitionStatus) -> MemberRecord:
        return dataclasses.replace(
            member(node_id, f"http://{node_id}:1", [], heartbeat_ms), partitions=copies
        )

    members = {
        "a": with_copies("a", NOW, PartitionStatus(0, Role.STANDBY, 90, 95)),
        "b": with_copies("b", NOW, PartitionStatus(0, Role.STANDBY, 98, 100)),
        # a copy still restoring reports no trustworthy lag; a dead node's copy is gone
        "c": with_copies("c", NOW, PartitionStatus(0, Role.STANDBY, 9, 9, restoring=True)),
        "d": with_copies("d", NOW - 10_000, PartitionStatus(0, Role.STANDBY, 100, 100)),
    }
    table = build_routing_table(members, {VIEW.name: 1}, NOW)
    assert table.owner(0) is None
    assert [(n.node_id, lag) for n, lag in table.standbys[0]] == [("b", 2), ("a", 5)]
    # the restoring copy is offered apart, to be asked to prove itself current
    assert [n.node_id for n in table.restoring[0]] == ["c"]
    restoring_c = table.restoring_copy(0)
    assert restoring_c is not None and restoring_c.node_id == "c"
    assert table.restoring_copy(0, avoid={"c"}) is None
    chosen = [table.standby(0, max_lag) for max_lag in (1, 2, 5)]
    assert [n.node_id if n else None for n in chosen] == [None, "b", "b"]
    standby_a = table.standby(0, 5, avoid={"b"})
    assert standby_a is not None and standby_a.node_id == "a"
    disclaimers = Disclaimers()
    disclaimers.add(table.nodes["b"], [0])
    assert table.standby(0, 2, disclaimers) is None


def test_the_last_owner_is_the_newest_record_serving_a_partition_dead_or_alive() -> None:
    members = {
        # dead (its lease lapsed) but the newest to serve 0; 1 moved on to "new"
        "dead": member("dead", "http://d:1", [0, 1], NOW - 5000, interval_ms=1000),
        "new": member("new", "http://n:1", [1], NOW - 10),
        "old": member("old", "http://o:1", [0], NOW - 9000, interval_ms=1000),
        # a copy still restoring is not served: it owns nothing yet
        "restoring": member("restoring", "http://r:1", [2], NOW, state=NodeState.RESTORING),
    }
    members["restoring"] = dataclasses.replace(
        members["restoring"], partitions=(PartitionStatus(2, Role.ACTIVE, 0, 50, restoring=True),)
    )
    table = build_routing_table(members, {VIEW.name: 3}, NOW)
    assert table.owner(0) is None
    assert table.last_owners == {
        0: LastOwner(NOW - 5000, "dead"),
        1: LastOwner(NOW - 10, "new"),
    }


def test_the_feed_remembers_last_owners_after_their_records_are_gone() -> None:
    async def scenario() -> None:
        feed = RoutingFeed()
        a, b = member("a", "http://a:1", [0, 1], NOW), member("b", "http://b:1", [2], NOW)
        feed.publish(build_routing_table({"a": a, "b": b}, {VIEW.name: 4}, NOW))
        # a left (a tombstone, or its dead record pruned); b took partition 1 over
        b_later = member("b", "http://b:1", [1, 2], NOW + 7000)
        table = feed.publish(build_routing_table({"b": b_later}, {VIEW.name: 4}, NOW + 7000))
        assert table.last_owners == {
            0: LastOwner(NOW, "a"),
            1: LastOwner(NOW + 7000, "b"),
            2: LastOwner(NOW + 7000, "b"),
        }

    asyncio.run(scenario())


def test_the_error_of_an_unassigned_partition_names_its_last_owner_or_none() -> None:
    members = {"a": member("a", "http://a:1", [0], NOW - 60_000)}  # long dead
    table = build_routing_table(members, {VIEW.name: 2}, NOW)
    gone = table.unassigned_error(VIEW.name, 0, ["k"])
    assert isinstance(gone, PartitionUnassignedError)
    assert gone.partition_extensions(0) == {
        "code": "PARTITION_UNAVAILABLE",
        "reason": "UNASSIGNED",
        "view": VIEW.name,
        "partition": 0,
        "node": "a",
        "lastSeen": "2023-11-14T22:12:20.000+00:00",
    }
    assert "node a last did" in str(gone) and "'k'" in str(gone)
    never = table.unassigned_error(VIEW.name, 1)
    assert isinstance(never, PartitionNeverAssignedError)
    assert never.partition_extensions(1)["reason"] == "NEVER_ASSIGNED"
    assert never.partition_extensions(1)["node"] is None


def test_a_standby_with_a_lag_unknown_is_offered_after_those_with_a_known_lag() -> None:
    def with_copy(node_id: str, copy: PartitionStatus) -> MemberRecord:
        return dataclasses.replace(
            member(node_id, f"http://{node_id}:1", [], NOW), partitions=(copy,)
        )

    members = {
        # a node that stood still reports the lag of its old end offsets: none
        "a": with_copy("a", PartitionStatus(0, Role.STANDBY, 40, 40, lag_unknown_since_ms=1)),
        "b": with_copy("b", PartitionStatus(0, Role.STANDBY, 98, 100)),
        "c": with_copy("c", PartitionStatus(0, Role.STANDBY, 50, 100)),
    }
    table = build_routing_table(members, {VIEW.name: 1}, NOW)
    assert [n.node_id for n, _lag in table.standbys[0]] == ["b", "c", "a"]
    chosen = [table.standby(0, 5), table.standby(0, 5, avoid={"b"}), table.standby(0, 60)]
    assert [n.node_id if n else None for n in chosen] == ["b", "a", "b"]
