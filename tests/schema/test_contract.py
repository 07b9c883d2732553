"""The catalogue, record formats and the package surface."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import schema
from schema import (
    CATALOGUE,
    CountRow,
    MemberRecord,
    NodeState,
    PartitionStatus,
    Role,
    SubjectStrategy,
    ValueFormat,
    View,
    ViewKind,
    decode_count,
    decode_event,
    decode_member,
    decode_window,
    encode_count,
    encode_member,
    view_by_name,
)


def test_exported_members_are_exactly_the_public_names() -> None:
    public = {name for name in dir(schema) if not name.startswith("_")}
    modules = {
        "aggregates", "catalogue", "changelog", "extensions", "fieldtypes", "keycodec", "keytypes",
        "groups", "membership", "names", "partitioner", "recordkeys", "sharedtopics",
        "sdlfile", "status", "views", "windows",
    }  # fmt: skip
    # schema.feed is imported by name (`from schema.feed import ...`) where it is used
    assert set(schema.__all__) == public - modules - {"feed"}


def test_word_counts_view_is_in_the_catalogue() -> None:
    view = view_by_name("word_counts")
    assert view.topic == "words"
    assert view.kind is ViewKind.COUNT
    assert view.changelog_topic == "statefed.word_counts.changelog"
    assert (view.point_field, view.many_field, view.top_field) == (
        "wordCount",
        "wordCounts",
        "topWords",
    )
    assert view.keys_arg == "words"


def test_view_names_are_unique() -> None:
    names = [v.name for v in CATALOGUE]
    assert len(names) == len(set(names))


def test_unknown_view_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="word_counts"):
        view_by_name("nope")


def test_bad_graphql_names_are_refused() -> None:
    with pytest.raises(ValueError, match="GraphQL field name"):
        View("v", "t", ViewKind.COUNT, "key", "V", "bad-name", "many", "top")


@pytest.mark.parametrize(
    ("value_format", "value_subject", "named"),
    [
        (ValueFormat.AVRO, None, "value_subject to the subject of the type"),
        (ValueFormat.JSON, None, "value_format to the registry format"),
        (ValueFormat.JSON, "t.Order", "set value_format"),
    ],
    ids=["no subject", "plain json", "plain json with a subject"],
)
def test_a_view_of_a_topic_of_several_types_names_its_registry_subject(
    value_format: ValueFormat, value_subject: str | None, named: str
) -> None:
    strategy = SubjectStrategy.RECORD_NAME
    with pytest.raises(ValueError, match=named):
        View("v", "t", ViewKind.HISTORY, "key", "V", "point", value_format=value_format,
             value_subject=value_subject, subject_strategy=strategy)  # fmt: skip
    view = View("v", "t", ViewKind.HISTORY, "key", "V", "point", value_format=ValueFormat.AVRO,
                value_subject="t.Order", subject_strategy=strategy)  # fmt: skip
    assert view.shares_topic and view.subject == "t.Order"


def test_every_kind_says_what_a_view_of_it_declares() -> None:
    from schema.views import _SHAPES

    assert set(_SHAPES) == set(ViewKind)
    with pytest.raises(ValueError, match="a window is needed by, and only by, windowed_count"):
        View("v", "t", ViewKind.WINDOWED_COUNT, "key", "V", "point", top_field="top")
    with pytest.raises(ValueError, match="'' is no GraphQL field name"):
        View("v", "t", ViewKind.LATEST, "key", "V", "point")


def test_count_row_round_trip() -> None:
    row = CountRow("kafka", 8, 1_700_000_000_000)
    assert decode_count(encode_count(row)) == row


def test_undecodable_count_names_the_value() -> None:
    with pytest.raises(ValueError, match="undecodable count"):
        decode_count(b"{not json")


@pytest.mark.parametrize(
    ("decode", "value", "why"),
    [
        (decode_count, b'{"key": 5, "count": 1, "last_event_ms": 1}', 'its "key" is not text'),
        (decode_count, b'{"key": null, "count": 1, "last_event_ms": 1}', 'its "key" is not text'),
        (decode_count, b'"not an object"', "it is not a JSON object"),
        (decode_count, b'{"key": "k", "count": 1}', "it has no 'last_event_ms' field"),
        (decode_window, b"[1, 2]", "it is not a JSON object"),
        (decode_event, b"[1, 2]", "it is not a JSON object"),
        (decode_event, b'{"key": "c", "event_ms": 1}', "it has no 'fields' field"),
    ],
)
def test_undecodable_changelog_values_say_what_is_wrong(
    decode: Callable[[bytes], object], value: bytes, why: str
) -> None:
    with pytest.raises(ValueError, match=f"undecodable .* changelog value .*: {re.escape(why)}$"):
        decode(value)


def test_member_round_trip_and_liveness() -> None:
    record = MemberRecord(
        node_id="n1",
        url="http://127.0.0.1:8101",
        state=NodeState.RUNNING,
        heartbeat_ms=10_000,
        heartbeat_interval_ms=1_000,
        partitions=(
            PartitionStatus(0, Role.ACTIVE, 5, 7),
            PartitionStatus(3, Role.STANDBY, 9, 9),
        ),
        incarnation="5f0c1e2d3b4a6978",
    )
    assert decode_member(encode_member(record)) == record
    assert record.active_partitions() == [0]
    assert record.standby_partitions() == [3]
    assert record.partitions[0].lag == 2
    assert record.is_alive(now_ms=13_000)
    assert not record.is_alive(now_ms=13_001)


def test_member_restore_progress_is_optional_on_the_wire() -> None:
    restoring = PartitionStatus(
        2, Role.ACTIVE, 5, 9, restoring=True, restore_done=3, restore_total=7
    )
    record = MemberRecord("n1", "http://127.0.0.1:8101", NodeState.RESTORING, 1, 1, (restoring,))
    assert decode_member(encode_member(record)) == record
    # a record of a node that predates restore progress
    old = (
        b'{"node_id": "n0", "url": "http://x", "state": "RUNNING", "heartbeat_ms": 1,'
        b' "heartbeat_interval_ms": 1000, "partitions": [{"partition": 0, "role": "ACTIVE",'
        b' "applied_offset": 4, "end_offset": 6}]}'
    )
    older = decode_member(old)
    assert older.incarnation == ""  # nor the process it is: its feed checks no incarnation
    (status,) = older.partitions
    assert status == PartitionStatus(0, Role.ACTIVE, 4, 6)
    assert (status.restoring, status.restore_done, status.restore_total) == (False, 0, 0)
    assert status.store_error is None


def test_member_store_error_round_trips() -> None:
    failing = PartitionStatus(1, Role.STANDBY, 5, 9, store_error="disk full: cannot write")
    record = MemberRecord("n1", "http://127.0.0.1:8101", NodeState.RUNNING, 1, 1, (failing,))
    assert decode_member(encode_member(record)).partitions == (failing,)
