"""The example operations of schema/operations, run through the gateway of a real cluster:
each answers without errors, with the data this test produced, in the shape the schema
gives the operation. Also federation's `_entities` and `_service` through that gateway.

The operations' example variables name keys and times of their own; this test produces
events for renamed keys (so other tests' keys are untouched) at times shifted from the
examples' anchor to a fresh epoch, and rewrites the variables the same way. Every
operation must fit the running catalogue (schema.CATALOGUE).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from graphql import validate

from gateway.api.schema import print_sdl
from runtime.produce import Record, produce_keys, produce_records
from schema import CATALOGUE, DEMO_DOMAIN, WORD_COUNTS, View
from tests.contract import Operation, operations, shape_errors
from tests.e2e.conftest import Cluster
from tests.e2e.progress import PipelineProgress, needed_offsets
from tooling.breaking import schema_of
from tooling.processes import wait_until

FULL: tuple[View, ...] = (WORD_COUNTS, *DEMO_DOMAIN)
FULL_SCHEMA = schema_of(print_sdl(FULL))
RUNNING_SCHEMA = schema_of(print_sdl(CATALOGUE))
OPERATIONS = list(operations())

ANCHOR = datetime(2025, 1, 1, 12, tzinfo=UTC)  # the examples' times are around it
# the examples' keys, and the keys this test produces for them
KEYS = {
    "kafka": "ops-kafka",
    "franz": "ops-franz",
    "nope": "ops-nope",
    "kafka.apache.org": "ops.kafka.apache.org",
    "example.com": "ops.example.com",
    "c001": "ops-c001",
    "c002": "ops-c002",
    "nobody": "ops-nobody",
}
# (topic, example key, seconds after the anchor, JSON value fields)
EVENTS: list[tuple[str, str, int, dict[str, str]]] = [
    ("pageviews", "kafka.apache.org", 5, {"path": "/"}),
    ("pageviews", "kafka.apache.org", 10, {"path": "/docs"}),
    ("pageviews", "kafka.apache.org", 20, {"path": "/blog"}),
    ("pageviews", "example.com", 30, {"path": "/"}),
    ("bookings", "c001", 1, {"trip": "LIS-BER"}),
    ("bookings", "c001", 3, {"trip": "BER-OSL"}),
    ("bookings", "c001", 2, {"trip": "OSL-LIS"}),  # out of order: not the latest
    ("bookings", "c002", 4, {"trip": "MAD-ROM"}),
]
WORDS = ["kafka"] * 3 + ["franz"]


def _parse_time(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def localize(value: Any, shift: timedelta) -> Any:
    """An example variable's value with keys renamed and times shifted, at any depth."""
    if isinstance(value, dict):
        return {k: localize(v, shift) for k, v in value.items()}
    if isinstance(value, list):
        return [localize(v, shift) for v in value]
    if isinstance(value, str):
        moment = _parse_time(value)
        return KEYS.get(value, value) if moment is None else (moment + shift).isoformat()
    return value


def _time_field(topic: str) -> str | None:
    fields = {v.event_time_field for v in CATALOGUE if v.topic == topic}
    return fields.pop() if len(fields) == 1 else None


@pytest.fixture(scope="module")
def shift(cluster: Cluster) -> timedelta:
    """Produce the events for the examples and wait until the pipeline has processed them;
    the shift from the examples' anchor to the events' epoch."""
    epoch_ms = cluster.next_epoch_ms()
    anchor_ms = int(ANCHOR.timestamp() * 1000)
    words = [KEYS[w] for w in WORDS]
    written = {"words": produce_keys(cluster.local.bootstrap, "words", words)}
    cluster.truth.update(words)
    topics = {v.topic for v in CATALOGUE}
    by_topic: dict[str, list[Record]] = {}
    for topic, key, seconds, fields in EVENTS:
        if topic not in topics:
            continue  # its views are not in the running catalogue yet
        at_ms = epoch_ms + seconds * 1000
        time_field = _time_field(topic)
        value = {**fields, **({time_field: at_ms} if time_field else {})}
        by_topic.setdefault(topic, []).append(Record(KEYS[key], orjson.dumps(value), at_ms))
    for topic, records in by_topic.items():
        written[topic] = produce_records(cluster.local.bootstrap, topic, records)
        cluster.saw_event_times(r.timestamp_ms or 0 for r in records)
    progress = PipelineProgress(cluster.local.bootstrap)
    try:
        for topic, writes in written.items():
            progress.wait(topic, needed_offsets(writes))
    finally:
        progress.close()
    return timedelta(milliseconds=epoch_ms - anchor_ms)


def _filled(value: Any) -> bool:
    """Whether a root field's answer holds some of the produced data."""
    if isinstance(value, list):
        return any(item is not None for item in value)
    if isinstance(value, dict) and "edges" in value:
        return bool(value["edges"])
    if isinstance(value, dict) and "nodes" in value:
        return bool(value["nodes"])
    return value is not None


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda o: o.path.stem)
def test_operation_answers_in_the_schemas_shape(
    cluster: Cluster, shift: timedelta, operation: Operation
) -> None:
    invalid = [e.message for e in validate(RUNNING_SCHEMA, operation.document)]
    assert not invalid, f"{operation.path.name} does not fit the running schema: {invalid[:2]}"
    variables = localize(operation.variables, shift)
    query = operation.path.read_text(encoding="utf-8")
    last: dict[str, Any] = {}

    def answered() -> bool:
        nonlocal last
        last = cluster.query(query, variables).json()
        data = last.get("data") or {}
        return not last.get("errors") and all(_filled(v) for v in data.values())

    try:
        # the pipeline has processed the events: the nodes only have to materialize them
        wait_until(answered, 30, f"operation {operation.name} to answer with data", 0.5)
    except TimeoutError:
        pytest.fail(f"{operation.name} with {variables}: last answer {last}")
    assert shape_errors(FULL_SCHEMA, operation, last["data"], variables) == []
    assert shape_errors(RUNNING_SCHEMA, operation, last["data"], variables) == []


def test_entities_and_service_through_the_gateway(cluster: Cluster, shift: timedelta) -> None:
    """A supergraph's router can use the gateway as a subgraph: `_service { sdl }` is the
    running schema, `_entities` resolves representations of word counts in order."""
    sdl = cluster.data("{ _service { sdl } }")["_service"]["sdl"]
    assert sdl + "\n" == print_sdl(CATALOGUE)
    words = [KEYS["kafka"], KEYS["nope"], KEYS["franz"], KEYS["kafka"]]
    query = """query($r: [_Any!]!) {
      _entities(representations: $r) { __typename ... on WordCount { word count } } }"""
    representations = [{"__typename": "WordCount", "word": w} for w in words]
    expected = [
        {"__typename": "WordCount", "word": w, "count": cluster.truth[w]}
        if cluster.truth[w]
        else None
        for w in words
    ]
    last: dict[str, Any] = {}

    def resolved() -> bool:
        nonlocal last
        last = cluster.query(query, {"r": representations}).json()
        return not last.get("errors") and last.get("data", {}).get("_entities") == expected

    try:
        wait_until(resolved, 30, "_entities to resolve the produced words", 0.5)
    except TimeoutError:
        pytest.fail(f"expected {expected}, last answer {last}")
    bad = cluster.query(query, {"r": [{"__typename": "Nope", "word": "x"}]}).json()
    assert [e["extensions"]["code"] for e in bad["errors"]] == ["BAD_USER_INPUT"]
    assert bad["errors"][0]["path"] == ["_entities", 0]
