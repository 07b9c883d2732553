"""The shapes step's request bodies and its wrk script (`wrk_pairs.lua`), run against a
small server: every answer is checked for as many rows as its aliases ask, each row the
data set's count. And how issue 31's goals are judged from the step's cells."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from gateway.edge.workermetrics import merge_expositions
from gateway.metrics import GatewayMetrics
from runtime.metrics import exposition
from schema import WORD_COUNTS
from tests.bench.answering import answering
from tests.bench.checked_load import CheckedLoad
from tests.bench.dataset import Dataset
from tests.bench.peer_figures import Round
from tests.bench.report import Report
from tests.bench.shapes import (
    SHAPES,
    BodiesFiles,
    bodies_files,
    cell_figures,
    pauses_in,
    shape_bodies,
    shape_ratios,
)
from tests.bench.targets import evaluate

DATA = Dataset(5000, 6)
LUA = Path(__file__).with_name("wrk_pairs.lua")


def test_every_shape_asks_what_its_aliases_say() -> None:
    for shape in SHAPES:
        bodies = [orjson.loads(b) for b in shape_bodies(shape, DATA, random.Random(3))]
        assert bodies, shape
        query = bodies[0]["query"]
        assert "p" in query and "_0:" in query, (shape, query)
    uniform = [orjson.loads(b) for b in shape_bodies("uniform", DATA, random.Random(3))]
    asked = sorted(b["variables"]["word"] for b in uniform)
    assert asked == sorted(DATA.key(i) for i in range(DATA.size))  # every key, once
    absent = [orjson.loads(b) for b in shape_bodies("half_absent", DATA, random.Random(3))]
    assert sum(b["variables"]["word"].startswith("absent") for b in absent) == len(absent) // 2
    assert all(("p0_0" in b["query"]) == b["variables"]["word"].startswith("absent")
               for b in absent)  # fmt: skip


def test_a_shapes_bodies_go_into_files_each_target_takes_in_turn(tmp_path: Path) -> None:
    load = CheckedLoad(tmp_path, WORD_COUNTS.key_field, script=LUA)
    bodies = [orjson.dumps({"i": i}) for i in range(5)]
    files = BodiesFiles(load, "uniform", bodies, per_file=2)
    lines = [path.read_bytes().splitlines() for path in files.paths]
    assert lines == [bodies[0:2], bodies[2:4], bodies[4:5]]  # every body once, in order
    taken = [(target, files.next(target)) for _ in range(4) for target in ("a", "b")]
    assert [path for target, path in taken if target == "a"] == [*files.paths, files.paths[0]]
    assert [path for target, path in taken if target == "b"] == [*files.paths, files.paths[0]]


def test_a_target_asks_no_key_of_the_uniform_shape_twice_in_its_runs(tmp_path: Path) -> None:
    load = CheckedLoad(tmp_path, WORD_COUNTS.key_field, script=LUA)
    bodies = shape_bodies("uniform", DATA, random.Random(3))
    files = bodies_files(load, "uniform", bodies, runs=6)
    asked = [files.next("gateway").read_bytes().splitlines() for _ in range(6)]
    assert sorted(b for run in asked for b in run) == sorted(bodies)  # each key in one run
    assert len(bodies_files(load, "zipf", bodies, runs=6).paths) == 1  # a file while it can


def _row(index: int, off: int = 0) -> dict[str, object]:
    return {"word": DATA.key(index), "count": DATA.count(index) + off}


ANSWERS = [  # (right?, data)
    (True, {"p10_0": [_row(i) for i in range(10)]}),
    (True, {"p1_0": _row(7), "p5_1": [_row(i) for i in range(5)]}),
    (True, {"p0_0": None}),
    (False, {"p10_0": [_row(i) for i in range(9)]}),  # a row missing
    (False, {"p1_0": _row(3, off=1)}),  # a wrong count
    (False, {"p0_0": {"word": "absent-1", "count": 1}}),  # a row for an absent key
]


@pytest.fixture
def server() -> Iterator[str]:
    with answering(lambda request: {"data": ANSWERS[request["variables"]["i"]][1]}) as url:
        yield url


def test_the_pairs_script_checks_every_row_and_how_many(server: str, tmp_path: Path) -> None:
    load = CheckedLoad(tmp_path, WORD_COUNTS.key_field, script=LUA)
    bodies = [orjson.dumps({"query": "q", "variables": {"i": i}}) for i in range(len(ANSWERS))]
    run = load.run(server, load.bodies_file("answers", bodies), connections=1, seconds=1)
    assert run.checked == run.load.requests >= len(ANSWERS)
    wrong = sum(not right for right, _ in ANSWERS) / len(ANSWERS)
    assert run.wrong == pytest.approx(wrong * run.checked, abs=3)
    assert run.failed == 0


def test_a_cell_joins_its_rounds_and_sums_a_gateways_loop_pauses() -> None:
    def one(requests: int, p99_ms: float) -> Round:
        return Round(requests, 2.0, 1.0, p99_ms, requests, 0, 0, 0.5, 0.0)

    gateway = cell_figures([one(2000, 10.0), one(1000, 30.0)], [2, 1])
    assert gateway["rps"] == 750  # 3,000 requests over 4 s, not the mean of 1,000 and 500
    assert gateway["p99_ms"] == 20.0
    assert gateway["rounds_rps"] == [1000.0, 500.0]
    assert gateway["loop_pauses_over_20ms"] == 3
    assert gateway["front_cpu_ms_per_request"] == 0.3333  # 1 CPU-s over 3,000 requests
    assert "loop_pauses_over_20ms" not in cell_figures([one(10, 1.0)], [None])  # not ours


def test_loop_pauses_are_the_wake_ups_of_the_gateways_lag_histogram_over_20_ms() -> None:
    metrics = GatewayMetrics()
    for seconds in (0.004, 0.019, 0.021, 0.3, 3.0):
        metrics.loop_lag(seconds)
    assert pauses_in(exposition(metrics.registry).decode()) == (5, 3)
    assert pauses_in("") == (0, 0)  # no histogram yet
    other = GatewayMetrics()
    other.loop_lag(0.5)
    workers = merge_expositions(
        {0: exposition(metrics.registry).decode(), 1: exposition(other.registry).decode()}
    )
    assert pauses_in(workers.decode()) == (6, 4)  # a gateway's workers together


def test_the_goals_are_judged_on_the_worse_connection_count_and_the_faster_peer() -> None:
    def cell(rps: float, p99_ms: float) -> dict[str, float]:
        return {"rps": rps, "p99_ms": p99_ms}

    cells = {
        "uniform_gateway_c1": cell(1200, 2.0),
        "uniform_gateway_cache_off_c1": cell(1000, 2.5),
        "uniform_grafbase_c1": cell(900, 1.0),
        "uniform_apollo_router_c1": cell(700, 0.5),  # slower: not the peer held to
        "uniform_gateway_c32": cell(3000, 30.0),
        "uniform_gateway_cache_off_c32": cell(3300, 20.0),
        "uniform_grafbase_c32": cell(2000, 40.0),
    }
    ratios = shape_ratios(cells, (1, 32))
    assert ratios["uniform_defaults_x_cache_off_min"] == 3000 / 3300
    assert ratios["uniform_p99_x_cache_off_max"] == 30.0 / 20.0
    assert ratios["uniform_defaults_x_fastest_peer_min"] == 1200 / 900
    assert ratios["uniform_p99_x_fastest_peer_max"] == 2.0 / 1.0
    assert "zipf_defaults_x_cache_off_min" not in ratios  # not measured

    report = Report()
    figures = {"ratios": ratios, "loop_pauses_defaults": 0, "loop_pauses_whole": 3}
    report.section("shapes", "shapes").figures.update(figures)
    judged = {t.target: t for t in evaluate(report) if "uniform" in t.target or "pause" in t.target}
    statuses = {target.split(": ", 1)[-1]: t.status for target, t in judged.items()}
    assert statuses == {
        "gateway defaults req/s >= cache off, at 1 and 32 connections": "FAIL",
        "gateway defaults p99 <= cache off p99, at 1 and 32 connections": "FAIL",
        "gateway defaults req/s >= 1.5 x the faster peer's, at 1 and 32 connections": "FAIL",
        "gateway defaults p99 <= the faster peer's p99, at 1 and 32 connections": "FAIL",
        "no event-loop pause > 20 ms in the gateway with its defaults, every shape": "PASS",
        "no event-loop pause > 20 ms in the gateway holding the view whole, every shape": "FAIL",
    }
