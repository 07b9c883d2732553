"""The status JSON (`gateway.cluster.overview.status_body`): nodes, the partition map from the
routing table (with the lag the status page plots), pipeline progress per view, dead letters
from the board, and the findings that need an operator's attention."""

from __future__ import annotations

import dataclasses

import orjson

from gateway.cluster.overview import status_body
from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingTable, build_routing_table
from schema import MemberRecord, NodeState, PartitionStatus, Role, ViewStatus
from tests.gateway.fakes import HOSTS, WORDS

NOW = 1_700_000_000_000
P = 3


def record(
    node_id: str,
    heartbeat_ms: int,
    *partitions: PartitionStatus,
    state: NodeState = NodeState.RUNNING,
) -> MemberRecord:
    return MemberRecord(node_id, f"http://{node_id}.test", state, heartbeat_ms, 1000, partitions)


def table_of(*records: MemberRecord) -> RoutingTable:
    members = {r.node_id: r for r in records}
    return build_routing_table(members, {WORDS.name: P, HOSTS.name: P}, NOW)


def test_the_partition_map_shows_each_partitions_live_copies_by_role() -> None:
    table = table_of(
        record(
            "n0",
            NOW - 100,
            PartitionStatus(0, Role.ACTIVE, 90, 100),
            PartitionStatus(
                1, Role.STANDBY, 10, 50, restoring=True, restore_done=4, restore_total=40
            ),
        ),
        record("n1", NOW - 200, PartitionStatus(1, Role.ACTIVE, 50, 50)),
        # silent for 10 heartbeats: dead, so its copy of 2 is in no map
        record("n2", NOW - 10_000, PartitionStatus(2, Role.ACTIVE, 7, 7)),
    )
    # reads avoid n1 (and n2's earlier calls went unanswered): a dead node is no suspect
    body = status_body(table, StatusBoard(), (WORDS,), NOW, suspects={"n1", "n2"})
    assert body["partition_count"] == P and body["unassigned"] == [2]
    nodes = [(n["id"], n["alive"], n["suspect"], n["heartbeat_age_ms"]) for n in body["nodes"]]
    assert nodes == [
        ("n0", True, False, 100),
        ("n1", True, True, 200),
        ("n2", False, False, 10_000),
    ]
    assert body["nodes"][0]["active"] == [0] and body["nodes"][0]["standby"] == [1]
    copies = {p["partition"]: p["copies"] for p in body["partitions"]}
    assert sorted(copies) == [0, 1, 2]
    assert [(c["node"], c["role"], c["lag"]) for c in copies[0]] == [("n0", "ACTIVE", 10)]
    assert [(c["node"], c["role"]) for c in copies[1]] == [("n0", "STANDBY"), ("n1", "ACTIVE")]
    restoring = copies[1][0]
    assert (restoring["restoring"], restoring["restore_done"], restoring["restore_total"]) == (
        True,
        4,
        40,
    )
    assert copies[2] == []
    orjson.dumps(body)  # all of it is JSON


def test_views_show_the_pipelines_newest_report_or_nothing_yet() -> None:
    board = StatusBoard()
    board.put(ViewStatus(WORDS.name, 7, NOW - 1500, 3, {0: 10, 1: 5}, {0: 4, 2: 6}))
    body = status_body(table_of(), board, (WORDS, HOSTS), NOW)
    assert body["views"] == [
        {
            "name": WORDS.name,
            "kind": WORDS.kind.name,
            "batch_id": 7,
            "updated_age_ms": 1500,
            "late_dropped": 3,
            "source_offsets": 15,
            "changelog_offsets": 10,
        },
        {
            "name": HOSTS.name,
            "kind": HOSTS.kind.name,
            "batch_id": None,
            "updated_age_ms": None,
            "late_dropped": 0,
            "source_offsets": 0,
            "changelog_offsets": 0,
        },
    ]
    assert [p["copies"] for p in body["partitions"]] == [[]] * P


def letter(reason: str, offset: int) -> bytes:
    return orjson.dumps(
        {
            "reason": reason,
            "topic": "words",
            "partition": 1,
            "offset": offset,
            "timestamp_ms": None,
            "key_base64": "c2VjcmV0",
            "value_base64": "c2VjcmV0",
        }
    )


def test_dead_letters_count_every_record_written_and_show_the_newest_first() -> None:
    board = StatusBoard()
    assert status_body(table_of(), board, (), NOW)["dead_letters"] == {"total": 0, "recent": []}
    board.dead_letter(40, letter("no key", 400))  # a tail: 40 records came before it
    for offset in range(41, 55):
        board.dead_letter(offset, letter(f"bad value {offset}", offset * 10))
    board.dead_letter(55, b"not json")
    dead = status_body(table_of(), board, (), NOW)["dead_letters"]
    assert dead["total"] == 56
    assert len(dead["recent"]) == 10
    assert dead["recent"][0] == {"reason": "undecodable dead-letter record", "offset": None}
    assert dead["recent"][1] == {
        "reason": "bad value 54",
        "topic": "words",
        "partition": 1,
        "offset": 540,
        "timestamp_ms": None,
    }
    assert "secret" not in str(dead) and "c2VjcmV0" not in str(dead)  # no keys or values


def test_each_partition_says_which_copy_reads_go_to_and_its_lag_for_the_chart() -> None:
    table = table_of(
        record(
            "n0",
            NOW - 100,
            PartitionStatus(0, Role.ACTIVE, 90, 100),
            PartitionStatus(1, Role.ACTIVE, 5, 50, lag_unknown_since_ms=NOW - 4000),
            PartitionStatus(2, Role.STANDBY, 7, 9),
        ),
        # two claims of 0 while the group moves it: reads go to the RUNNING node
        record(
            "n1",
            NOW - 50,
            PartitionStatus(0, Role.ACTIVE, 0, 100, restoring=True, restore_total=100),
            state=NodeState.RESTORING,
        ),
    )
    partitions = status_body(table, StatusBoard(), (), NOW)["partitions"]
    assert [(p["partition"], p["condition"], p["owner"], p["lag"]) for p in partitions] == [
        (0, "OK", "n0", 10),
        (1, "LAG_UNKNOWN", "n0", None),  # as of 4 s ago: not a number to plot
        (2, "UNASSIGNED", None, None),  # a STANDBY copy serves no read of its own
    ]


def test_the_condition_of_a_partition_is_that_of_the_copy_reads_go_to() -> None:
    table = table_of(
        record(
            "n0",
            NOW - 100,
            PartitionStatus(0, Role.ACTIVE, 3, 40, restoring=True, restore_total=37),
            PartitionStatus(1, Role.ACTIVE, 5, 5, store_error="disk full"),
            PartitionStatus(2, Role.ACTIVE, 5, 5, store_error="disk full", restoring=True),
            state=NodeState.RESTORING,
        )
    )
    partitions = status_body(table, StatusBoard(), (), NOW)["partitions"]
    assert [(p["condition"], p["lag"]) for p in partitions] == [
        ("RESTORING", 37),
        ("STORE_ERROR", 0),
        ("STORE_ERROR", 0),
    ]


def test_a_healthy_cluster_has_no_findings() -> None:
    board = StatusBoard()
    board.put(ViewStatus(WORDS.name, 7, NOW - 1500, 0, {0: 10}, {0: 4}))
    table = table_of(
        record(
            "n0",
            NOW - 100,
            *(PartitionStatus(p, Role.ACTIVE, 5, 5) for p in range(P)),
        ),
        record("n1", NOW - 200, *(PartitionStatus(p, Role.STANDBY, 5, 5) for p in range(P))),
    )
    assert status_body(table, board, (WORDS,), NOW)["findings"] == []


def test_findings_name_what_is_wrong_problems_first() -> None:
    board = StatusBoard()
    board.dead_letter(2, letter("no key", 7))
    table = table_of(
        record(
            "n0",
            NOW - 100,
            PartitionStatus(0, Role.ACTIVE, 9, 9, lag_unknown_since_ms=NOW - 4000),
            PartitionStatus(
                1, Role.STANDBY, 1, 40, restoring=True, restore_done=13, restore_total=39
            ),
            PartitionStatus(2, Role.STANDBY, 1, 1, store_error="disk full"),
        ),
        record("n1", NOW - 2500, PartitionStatus(1, Role.ACTIVE, 4, 4)),  # 2 heartbeats late
        record("n2", NOW - 90_000, PartitionStatus(2, Role.ACTIVE, 1, 1)),  # dead
    )
    assert status_body(table, board, (WORDS,), NOW)["findings"] == [
        {
            "level": "problem",
            "text": "partition 2 has no live ACTIVE copy: reads there fail with "
            "PARTITION_UNAVAILABLE",
        },
        {
            "level": "problem",
            "text": "node n0 cannot write its store of partition 2 (disk full): applying is "
            "paused and retried",
        },
        {
            "level": "warning",
            "text": "node n1 is late with its heartbeats (last 2.5 s ago): suspect, its "
            "partitions are read from standbys where they can be",
        },
        {"level": "warning", "text": "node n2 not heard for 1 min: dead, serves nothing"},
        {
            "level": "warning",
            "text": "node n0: lag of partition 0 unknown for 4.0 s (copies just attached, the "
            "broker not answering the node, or the node stood still)",
        },
        {"level": "notice", "text": "node n0 is restoring partition 1 (13 of 39 records)"},
        {
            "level": "notice",
            "text": f"no pipeline report yet for {WORDS.name}: is the pipeline running?",
        },
        {
            "level": "notice",
            "text": "3 input records rejected to the dead-letter topic (newest: no key)",
        },
    ]


def test_a_node_reads_avoid_for_its_unanswered_calls_is_a_finding_as_it_is_suspect() -> None:
    table = table_of(
        record("n0", NOW - 100, *(PartitionStatus(p, Role.ACTIVE, 5, 5) for p in range(P))),
        record("n1", NOW - 200, *(PartitionStatus(p, Role.STANDBY, 5, 5) for p in range(P))),
        record("n2", NOW - 90_000),  # dead: no suspect, whatever its calls did
    )
    body = status_body(table, StatusBoard(), (), NOW, suspects={"n0", "n2"})
    assert [n["id"] for n in body["nodes"] if n["suspect"]] == ["n0"]
    assert body["findings"] == [
        {
            "level": "warning",
            "text": "node n0 left calls in a row without an answer: suspect, its partitions "
            "are read from standbys where they can be",
        },
        {"level": "warning", "text": "node n2 not heard for 1 min: dead, serves nothing"},
    ]


def test_a_stale_routing_table_and_an_unknown_partition_count_are_findings() -> None:
    stale = dataclasses.replace(table_of(), stale_since_ms=NOW - 125_000)
    assert status_body(stale, StatusBoard(), (), NOW)["findings"][0] == {
        "level": "problem",
        "text": "the broker has not answered the gateway for 2 min: the routing table and "
        "node liveness are as of then",
    }
    unknown = build_routing_table({}, {}, NOW)
    assert status_body(unknown, StatusBoard(), (), NOW)["findings"] == [
        {
            "level": "warning",
            "text": "the partition count is not known yet: no changelog topic's metadata read",
        }
    ]
