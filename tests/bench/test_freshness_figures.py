"""The freshness figures of a benchmark run: both pipeline modes side by side, issue 30's
goals judged on the Real-Time Mode runs only, and the mode read from the pipeline's log."""

from __future__ import annotations

from pathlib import Path

from schema import WORD_COUNTS, PipelineMode
from tests.bench.freshness import Freshness, Probe, RateRun, add_table
from tests.bench.report import Report
from tests.bench.session import Batches, batches_in, logged_mode
from tests.bench.targets import TargetResult, evaluate

RT, MB = PipelineMode.REAL_TIME, PipelineMode.MICRO_BATCH


def rate_run(rate: int, mode: PipelineMode, latency_ms: float, kept_up: bool = True) -> RateRun:
    """A run whose 30 probes all took `latency_ms`; one that did not keep up reached half
    its rate."""
    run = RateRun(rate, 1.0, mode, produced=rate if kept_up else rate // 2, produce_s=1.0)
    run.probes = [Probe(f"p{i}", delivered=0.0, seen=latency_ms / 1000) for i in range(30)]
    run.drained_at = 10.0
    return run


def measured(
    steady: list[RateRun], ramp: list[RateRun], other: list[RateRun] | None = None
) -> Freshness:
    fresh = Freshness()
    fresh.steady_runs, fresh.ramp_runs = steady, ramp
    fresh.other_runs = other if other is not None else [rate_run(1000, MB, 900)]
    return fresh


def targets(fresh: Freshness) -> dict[str, TargetResult]:
    report = Report()
    report.section("freshness", "freshness").figures.update(fresh.figures())
    return {t.target: t for t in evaluate(report) if "freshness" in t.target}


def test_both_modes_side_by_side_with_the_steady_figure_kept() -> None:
    fresh = measured(
        [rate_run(1000, RT, 40), rate_run(10_000, RT, 60)],
        [rate_run(20_000, RT, 80)],
        [rate_run(1000, MB, 900), rate_run(10_000, MB, 1200)],
    )
    figures = fresh.figures()
    assert figures["steady"]["mode"] == "real_time"
    assert figures["steady"]["latency_ms"]["p50"] == 40
    assert {m: sorted(runs) for m, runs in figures["modes"].items()} == {
        "micro_batch": ["rate_1000", "rate_10000"],
        "real_time": ["rate_1000", "rate_10000"],
    }
    assert figures["modes"]["micro_batch"]["rate_10000"]["latency_ms"]["p50"] == 1200
    assert [r["rate"] for r in figures["ramp"]] == [20_000]
    assert figures["highest_sustained_rate"] == 20_000


def test_the_realtime_goals_read_the_realtime_runs_only() -> None:
    fresh = measured([rate_run(1000, RT, 40), rate_run(10_000, RT, 300)], [])
    got = targets(fresh)
    assert got["freshness p50 <= 100 ms at 1,000 events/s, Real-Time Mode"].status == "PASS"
    assert got["freshness p99 <= 500 ms at 1,000 events/s, Real-Time Mode"].status == "PASS"
    assert got["freshness p50 <= 100 ms at 10,000 events/s, Real-Time Mode"].status == "FAIL"
    assert got["freshness p99 <= 500 ms at 10,000 events/s, Real-Time Mode"].status == "PASS"
    # the issue 6 targets still read the session's pipeline at the first steady rate
    assert got["freshness p50 <= 1 s at 1,000 events/s"].measured == "40.00 ms"


def test_the_realtime_goals_are_not_measured_without_realtime_runs() -> None:
    got = targets(measured([], []))
    assert {t.status for t in got.values()} == {"NOT MEASURED"}


SUSTAINED_50K = "freshness sustained at 50,000 events/s in Real-Time Mode (no growing backlog)"


def test_the_sustained_goal_passes_fails_or_waits_for_the_ramp() -> None:
    steady = [rate_run(1000, RT, 40), rate_run(10_000, RT, 60)]
    ramp = [rate_run(20_000, RT, 70), rate_run(50_000, RT, 90)]
    assert targets(measured(steady, ramp))[SUSTAINED_50K].status == "PASS"
    lost = targets(measured(steady, [rate_run(20_000, RT, 70, kept_up=False)]))[SUSTAINED_50K]
    assert lost.status == "FAIL" and lost.measured.startswith("not sustained at 20,000/s")
    short = targets(measured(steady, [rate_run(20_000, RT, 70)]))[SUSTAINED_50K]
    assert short.status == "NOT MEASURED"  # the budget stopped the ramp before 50,000/s


def test_the_mode_is_the_one_the_last_start_logged(tmp_path: Path) -> None:
    log = tmp_path / "pipeline.log"
    log.write_text(
        "INFO query statefed.word_counts started in Real-Time Mode: words -> changelog\n"
        "INFO query statefed.word_counts_by_hour started: words -> hours\n"
    )
    assert logged_mode(log, WORD_COUNTS, MB) is RT
    with log.open("a") as restarted:
        restarted.write("INFO query statefed.word_counts started: words -> changelog\n")
    assert logged_mode(log, WORD_COUNTS, RT) is MB
    log.write_text("statefed pipeline: ready (9 queries)\n")  # the log level hid the line
    assert logged_mode(log, WORD_COUNTS, RT) is RT


def test_a_run_shows_the_view_batches_that_ended_in_it_their_mean_and_phases() -> None:
    phase = "statefed_pipeline_batch_phase_seconds"
    exposition = "\n".join(
        [
            "# TYPE statefed_pipeline_batch_duration_seconds histogram",
            'statefed_pipeline_batch_duration_seconds_count{view="host_pages"} 9.0',
            'statefed_pipeline_batch_duration_seconds_count{view="word_counts"} 5.0',
            'statefed_pipeline_batch_duration_seconds_sum{view="word_counts"} 31.5',
            f"# TYPE {phase}_total counter",  # as prometheus_client writes it
            f'{phase}_total{{view="word_counts",phase="addBatch"}} 28.0',
            f'{phase}_total{{view="word_counts",phase="walCommit"}} 0.9',
            f'{phase}_total{{view="host_pages",phase="addBatch"}} 4.0',
        ]
    )
    before = batches_in(exposition, "word_counts")
    assert before == Batches(5, 31.5, {"addBatch": 28.0, "walCommit": 0.9})
    assert batches_in(exposition, "last_booking") is None
    read, unread = rate_run(1000, RT, 40), rate_run(10_000, RT, 60)
    after = Batches(8, 50.7, {"addBatch": 45.4, "walCommit": 1.2, "latestOffset": 0.0004})
    read.batches = after.since(before)  # the readings before and after the run
    assert read.to_json()["batch_mean_ms"] == 6400.0
    assert read.to_json()["batch_phase_means_ms"] == {
        "addBatch": 5800.0,
        "walCommit": 100.0,
        "latestOffset": 0.1,
    }
    assert unread.to_json()["batch_mean_ms"] is None
    section = Report().section("freshness", "freshness")
    add_table(section, [read, unread])
    table = section.tables[0]
    assert table.headers[-2:] == ["view's batches (mean)", "where a batch's time goes (mean ms)"]
    assert [row[-2] for row in table.rows] == ["3 (6,400 ms)", "-"]
    assert [row[-1] for row in table.rows] == ["addBatch 5,800, walCommit 100", "-"]
