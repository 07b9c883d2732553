"""Routing without Kafka: tables from membership records, liveness, claims, versions."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from gateway.errors import RoutingNotReadyError
from gateway.membership import MemberDirectory
from gateway.routing import Disclaimers, RoutingFeed, build_routing_table
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


def test_directory_prunes_only_dead_nodes_past_the_lookback() -> None:
    directory = MemberDirectory()
    directory.apply(b"dead", encode_member(member("dead", "u", [], NOW - 20_000)))
    directory.apply(b"slow", encode_member(member("slow", "u", [], NOW - 20_000, 60_000)))
    directory.apply(b"ok", encode_member(member("ok", "u", [], NOW)))
    assert directory.prune(NOW, keep_ms=10_000)
    assert sorted(directory.records) == ["ok", "slow"]


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
    chosen = [table.standby(0, max_lag) for max_lag in (1, 2, 5)]
    assert [n.node_id if n else None for n in chosen] == [None, "b", "b"]
    standby_a = table.standby(0, 5, avoid={"b"})
    assert standby_a is not None and standby_a.node_id == "a"
    disclaimers = Disclaimers()
    disclaimers.add(table.nodes["b"], [0])
    assert table.standby(0, 2, disclaimers) is None
