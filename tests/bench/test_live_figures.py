"""The live and cache figures of a benchmark run: what the subscriber's samples say about a
rate's pushes, and how the cache goal is judged when the cache setting made no difference."""

from __future__ import annotations

import os
from typing import Any

from tests.bench.cpu import run_queue_seconds
from tests.bench.live import Pushes, RateRun, feed_latencies, pushes_of, write_runs
from tests.bench.profile import Profile
from tests.bench.report import Report
from tests.bench.targets import evaluate

EPOCH_US = 1_000_000
CACHE_GOAL = "gateway point throughput with cache hits >= 0.5 x floor at 32 connections"


def samples(*rows: tuple[int, int, int, int]) -> dict[str, Any]:
    """Updates in arrival order: (key index, count = produce time, offset, arrival)."""
    return {
        "ident": [r[0] for r in rows],
        "count": [r[1] for r in rows],
        "offset": [r[2] for r in rows],
        "arrival_us": [r[3] for r in rows],
    }


def test_latency_is_arrival_minus_produce_time_for_this_runs_records_only() -> None:
    run = RateRun(1000, 1.0, first_us=100, last_us=300, last_by_key={0: 300, 1: 200})
    got = pushes_of(
        samples(
            (0, 50, 1, EPOCH_US + 60),  # produced before this run: not its push
            (1, 200, 7, EPOCH_US + 205_000),
            (0, 100, 2, EPOCH_US + 2100),
            (0, 300, 3, EPOCH_US + 4300),
        ),
        run,
        EPOCH_US,
    )
    assert got.latencies_ms == [2.0, 204.8, 4.0]  # in produce order
    assert (got.duplicates, got.out_of_order, got.keys_final) == (0, 0, 2)


def test_a_repeated_or_backward_offset_and_a_missed_last_value_are_counted() -> None:
    run = RateRun(1000, 1.0, first_us=100, last_us=400, last_by_key={0: 400, 1: 300})
    got = pushes_of(
        samples(
            (0, 200, 5, EPOCH_US + 300),
            (0, 200, 5, EPOCH_US + 350),  # the same offset again
            (0, 100, 4, EPOCH_US + 400),  # an older offset after a newer one
            (0, 400, 6, EPOCH_US + 500),
            (1, 150, 2, EPOCH_US + 500),  # key 1's last record (300) never came
        ),
        run,
        EPOCH_US,
    )
    assert (got.duplicates, got.out_of_order, got.keys_final) == (1, 1, 1)
    assert len(got.latencies_ms) == 4


def _cache_report(effective: bool) -> Report:
    report = Report()
    section = report.section("cache", "cache")
    section.figures.update(ratios={"hits_over_floor_rps_c32": 0.62}, cache_effective=effective)
    return report


def _cache_target(report: Report) -> tuple[str, str]:
    (found,) = [t for t in evaluate(report) if t.target == CACHE_GOAL]
    return found.status, found.measured


def test_each_rate_says_what_every_part_on_the_path_used_and_how_busy_the_machine_was() -> None:
    run = RateRun(10_000, 1.0, produced=10, produce_s=1.0, last_by_key={0: 5}, machine_busy=0.9)
    run.cores = {"gateway": 0.3, "node n1": 0.25, "node n2": 0.2, "broker": 0.7, "producer": 0.15,
                 "subscriber": 0.02}  # fmt: skip
    run.profiles = [Profile.from_collapsed("gateway", "main;FeedLink._dispatch (x.py:1) 3\n")]
    section = Report().section("live", "Live")
    write_runs(section, [run], [Pushes([1.0, 2.0], 0, 0, 1)], 1)
    runs = section.tables[0]
    assert runs.headers[-2:] == ["cores: gateway / nodes / broker / producer / subscriber",
                                 "machine busy"]  # fmt: skip
    assert runs.rows[0][-2:] == ["0.30 / 0.45 / 0.70 / 0.15 / 0.02", "90%"]
    assert section.figures["runs"]["rate_10000"]["machine_busy"] == 0.9
    assert section.figures["profiles"]["gateway"]["samples"] == 3
    assert section.tables[2].rows == [["`FeedLink._dispatch (x.py)`", "100.0"]]


def test_each_rate_says_how_long_to_the_nodes_feed_and_who_waited_for_a_core() -> None:
    run = RateRun(10_000, 1.0, produced=10, produce_s=1.0, feed_ms=[10.0, 20.0, 30.0])
    run.waiting = {"gateway": 1.2, "node n1": 2.0, "node n2": 1.5, "broker": 0.5,
                   "producer": 0.25, "subscriber": 0.0}  # fmt: skip
    run.loop_waiting = 0.7
    section = Report().section("live", "Live")
    write_runs(section, [run], [Pushes([100.0, 2000.0], 0, 0, 1)], 1)
    where = section.tables[1]
    assert where.headers[1] == "to the node's feed p50"
    assert where.rows[0][-2:] == ["70%", "1.20 / 3.50 / 0.50 / 0.25 / 0.00"]
    figures = section.figures["runs"]["rate_10000"]
    assert figures["node_feed_latency_ms"]["p50"] == 20.0
    assert figures["gateway_loop_waiting_share"] == 0.7


def test_the_feed_tap_counts_the_changes_of_a_run_only_in_produce_order() -> None:
    run = RateRun(1000, 1.0, first_us=100, last_us=300)
    changes = [[300, EPOCH_US + 5300], [50, EPOCH_US + 60], [100, EPOCH_US + 1100]]
    assert feed_latencies(changes, run, EPOCH_US) == [1.0, 5.0]


def test_run_queue_time_is_read_per_thread_and_is_zero_for_a_gone_process() -> None:
    whole, main = run_queue_seconds(os.getpid()), run_queue_seconds(os.getpid(), main_only=True)
    assert 0.0 <= main <= whole
    assert run_queue_seconds(2**22 + 1) == 0.0  # above Linux's largest pid


def test_the_cache_goal_is_judged_only_when_the_cache_answered() -> None:
    assert _cache_target(_cache_report(True)) == ("PASS", "0.62x")
    status, measured = _cache_target(_cache_report(False))
    assert status == "NOT MEASURED"
    assert measured.startswith("0.62x") and "STATEFED_GATEWAY_CACHE made no difference" in measured
    assert _cache_target(Report()) == ("NOT MEASURED", "n/a")
