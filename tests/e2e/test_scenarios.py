"""Golden end-to-end scenarios: `scenarios/<name>/` holds events, a query and the answer.

- `events.jsonl`: one event a line: {"topic", "key", "at": seconds after the scenario's
  epoch, "value": object or null, "round": n (optional, default 0)}. Views whose
  catalogue entry names an `event_time_field` get the event time put into the value
  under that name; others get it as the Kafka timestamp. Rounds are produced in order,
  each once the pipeline has processed the previous one (late events need that).
- `query.graphql`: the query; `expected.json`: the exact response `data`.
In the query and the expected answer, `${T+<seconds>}` stands for the epoch plus that
many seconds as ISO-8601 UTC. The epoch is minute-aligned and later than every event
time the run produced before, so windows and watermarks start clean for each scenario.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from runtime.produce import Record, produce_records
from schema import CATALOGUE
from tests.e2e.conftest import Cluster
from tests.e2e.progress import PipelineProgress, needed_offsets
from tooling.processes import wait_until

SCENARIOS = Path(__file__).parent / "scenarios"
_PLACEHOLDER = re.compile(r"\$\{T\+(-?\d+)\}")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _fill(text: str, epoch_ms: int) -> str:
    return _PLACEHOLDER.sub(lambda m: _iso(epoch_ms + int(m.group(1)) * 1000), text)


def _time_field(topic: str) -> str | None:
    fields = {v.event_time_field for v in CATALOGUE if v.topic == topic}
    if len(fields) != 1:
        raise ValueError(f"views over {topic} disagree on the event time field: {fields}")
    return fields.pop()


def _record(event: dict[str, Any], epoch_ms: int) -> Record:
    at_ms = epoch_ms + int(event["at"] * 1000)
    field = _time_field(event["topic"])
    value = event.get("value")
    if field is not None:
        value = {**(value or {}), field: at_ms}
    body = orjson.dumps(value) if value is not None else b""
    return Record(event["key"], body, at_ms)


def _rounds(path: Path, epoch_ms: int) -> list[dict[str, list[Record]]]:
    rounds: dict[int, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for line in path.read_text().splitlines():
        if line.strip():
            event = orjson.loads(line)
            rounds[event.get("round", 0)][event["topic"]].append(_record(event, epoch_ms))
    return [rounds[n] for n in sorted(rounds)]


@pytest.fixture(scope="module")
def progress(cluster: Cluster) -> Any:
    follower = PipelineProgress(cluster.local.bootstrap)
    yield follower
    follower.close()


@pytest.mark.parametrize("name", sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir()))
def test_scenario(cluster: Cluster, progress: PipelineProgress, name: str) -> None:
    folder = SCENARIOS / name
    epoch_ms = cluster.next_epoch_ms()
    for batch in _rounds(folder / "events.jsonl", epoch_ms):
        for topic, records in batch.items():
            writes = produce_records(cluster.local.bootstrap, topic, records)
            cluster.saw_event_times(r.timestamp_ms or 0 for r in records)
            progress.wait(topic, needed_offsets(writes))
    query = _fill((folder / "query.graphql").read_text(), epoch_ms)
    expected = orjson.loads(_fill((folder / "expected.json").read_text(), epoch_ms))
    last: dict[str, Any] = {}

    def answered() -> bool:
        nonlocal last
        last = cluster.query(query).json()
        return last.get("data") == expected and not last.get("errors")

    try:
        wait_until(answered, 60, f"scenario {name} to answer as expected", 0.5)
    except TimeoutError:
        pytest.fail(f"scenario {name}: expected {expected}, last answer {last}")
