"""Freshness: producer delivery callback -> value visible through the gateway, per mode.

A producer thread writes words at a fixed rate; among them, `probes_per_s` unique probe
keys per second record the time their delivery callback fired. The main thread polls the
gateway with one multi-key request over the pending probes every `poll_interval_s`; a
probe's freshness is the time the response that first showed its count arrived minus its
delivery time (so the figure includes up to one poll interval plus one request).

The steady rates run in both pipeline modes, so one run shows them side by side: first on
a pipeline in micro-batches with a checkpoint of its own, stopped before the session's
pipeline (the defaults: Real-Time Mode) starts for the same rates; that one is never
restarted for it. The ramp of higher rates runs on the session's pipeline later.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from runtime.produce import new_producer
from schema import PipelineMode
from tests.bench.report import Report, Section, fmt_ms, fmt_num
from tests.bench.session import Batches, BenchError, BenchSession, PipelineStart, view_batches
from tests.bench.stats import Summary

__all__ = ["NAME", "Freshness", "RateRun", "add_table"]

NAME = "freshness"
TITLE = "Freshness: delivery callback -> visible through the gateway"
_FILLER_WORDS = 1000
_MAX_KEYS_PER_POLL = 1000  # the gateway's default STATEFED_MAX_LOOKUP_KEYS
_DRAIN_S = 15.0  # after producing stops, how long a probe may still take to appear
_RESERVE_S = 100.0  # the ramp leaves this much of the budget to the steps after it
_SLACK_S = 1.0  # a sustained rate's latency grows by less than this + 50%
_DRAINING_MS = 500.0  # a warm-up round whose latency fell by more drained a backlog
_WARM_UP_MAX_S = 60.0


@dataclass
class Probe:
    key: str
    delivered: float | None = None
    seen: float | None = None


@dataclass
class RateRun:
    """One steady rate: what was produced and when each probe was delivered and seen."""

    rate: int
    seconds: float
    mode: PipelineMode = PipelineMode.REAL_TIME  # of the pipeline, as its log says
    produced: int = 0
    produce_s: float = 0.0
    failed: int = 0
    probes: list[Probe] = field(default_factory=list)
    drained_at: float = 0.0
    baseline_p99_ms: float | None = None  # p99 of the steady rate, for higher rates
    # the view query's batches that ended during the run (None: the pipeline's /metrics
    # could not be read)
    batches: Batches | None = None

    @property
    def achieved_rate(self) -> float:
        return self.produced / self.produce_s if self.produce_s else 0.0

    def latencies_ms(self) -> list[float]:
        """Seen probes' freshness; unseen ones count as at least the drain time (censored)."""
        return [
            ((p.seen if p.seen is not None else self.drained_at) - p.delivered) * 1000
            for p in self.probes
            if p.delivered is not None
        ]

    @property
    def missing(self) -> int:
        return sum(1 for p in self.probes if p.delivered is not None and p.seen is None)

    def growth_ms(self) -> float:
        """p50 of the last third of the probes minus p50 of the first third."""
        latencies = self.latencies_ms()
        third = len(latencies) // 3
        if third == 0:
            return 0.0
        return Summary.of(latencies[-third:]).p50 - Summary.of(latencies[:third]).p50

    def sustained(self) -> bool:
        """The producer kept the rate, every probe appeared, and latency did not pile up:
        it grew by under 1 s + 50% within the run, and p99 stayed under 1.5 x the steady
        rate's p99 + 1 s (a backlog shows in both once runs outlast micro-batches)."""
        latencies = self.latencies_ms()
        first = Summary.of(latencies[: max(1, len(latencies) // 3)]).p50
        p99 = Summary.of(latencies).p99
        bounded = self.baseline_p99_ms is None or p99 <= 1.5 * self.baseline_p99_ms + 1000
        return (
            self.missing == 0
            and self.failed == 0
            and self.achieved_rate >= 0.95 * self.rate
            and self.growth_ms() <= _SLACK_S * 1000 + 0.5 * first
            and bounded
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "mode": self.mode.value,
            "achieved_rate": round(self.achieved_rate),
            "produced": self.produced,
            "probes": len(self.probes),
            "missing": self.missing,
            "delivery_failures": self.failed,
            "latency_ms": Summary.of(self.latencies_ms()).to_json(),
            "growth_ms": round(self.growth_ms(), 1),
            "sustained": self.sustained(),
            "batches": None if self.batches is None else self.batches.count,
            "batch_mean_ms": self.batch_mean_ms(),
            "batch_phase_means_ms": None if self.batches is None else self.batches.phase_means_ms(),
        }

    def batch_mean_ms(self) -> float | None:
        return None if self.batches is None else self.batches.mean_ms()


def _produce(producer: Producer, topic: str, run: RateRun, probe_every: int, tag: str) -> None:
    """Produce `run.rate` events/s for `run.seconds`; every `probe_every`-th is a probe."""
    fillers = itertools.cycle([f"fw{n:04d}".encode() for n in range(_FILLER_WORDS)])
    total = int(run.rate * run.seconds)

    def delivered(probe: Probe) -> Any:
        def callback(err: KafkaError | None, _: Message) -> None:
            if err is not None:
                run.failed += 1
            else:
                probe.delivered = time.monotonic()

        return callback

    began = time.monotonic()
    while run.produced < total and time.monotonic() - began < run.seconds + 5:
        due = min(total, int((time.monotonic() - began) * run.rate) + 1)
        while run.produced < due:
            try:
                if run.produced % probe_every == 0:
                    probe = Probe(f"fp{tag}-{run.rate}-{run.produced}")
                    producer.produce(topic, b"", probe.key.encode(), on_delivery=delivered(probe))
                    run.probes.append(probe)
                else:
                    producer.produce(topic, b"", next(fillers))
            except BufferError:
                break  # local queue full: serve it below, then go on
            run.produced += 1
        producer.poll(0.001)
    run.produce_s = time.monotonic() - began
    producer.flush(10.0)


def _poll(session: BenchSession, run: RateRun, producing: threading.Thread) -> None:
    """Poll the gateway for pending probes until all are seen or the drain time is up."""
    view = session.dataset.view
    drain_deadline: float | None = None
    while True:
        pending = [p for p in list(run.probes) if p.delivered is not None and p.seen is None]
        if pending:
            keys = [p.key for p in pending[:_MAX_KEYS_PER_POLL]]
            try:
                counts = session.client.counts(session.gateway_url, keys, view)
            except Exception:  # a transient gateway error: poll again
                counts = {}
            now = time.monotonic()
            for probe in pending[:_MAX_KEYS_PER_POLL]:
                if counts.get(probe.key):
                    probe.seen = now
        if not producing.is_alive():
            drain_deadline = drain_deadline or time.monotonic() + _DRAIN_S
            undone = [p for p in run.probes if p.seen is None and p.delivered is not None]
            if not undone or time.monotonic() > drain_deadline:
                run.drained_at = time.monotonic()
                return
        time.sleep(session.settings.poll_interval_s)


def _run_rate(
    session: BenchSession,
    producer: Producer,
    rate: int,
    seconds: float,
    mode: PipelineMode,
    baseline: RateRun | None = None,
    metrics_url: str | None = None,
) -> RateRun:
    """One steady rate; with the pipeline's `metrics_url`, the view's batches meanwhile."""
    run = RateRun(rate, seconds, mode)
    before = view_batches(metrics_url, session.dataset.view.name)
    if baseline is not None:
        run.baseline_p99_ms = Summary.of(baseline.latencies_ms()).p99
    probe_every = max(1, rate // session.settings.probes_per_s)
    tag = str(int(time.time()) % 100_000)
    topic = session.dataset.view.topic
    thread = threading.Thread(
        target=_produce, args=(producer, topic, run, probe_every, tag), daemon=True
    )
    thread.start()
    _poll(session, run, thread)
    thread.join(15.0)
    after = view_batches(metrics_url, session.dataset.view.name)
    if before is not None and after is not None:
        run.batches = after.since(before)
    summary = Summary.of(run.latencies_ms())
    session.progress(
        f"freshness ({mode.value}) at {rate:,}/s (achieved {run.achieved_rate:,.0f}/s): "
        f"p50 {summary.p50:.0f} ms, p99 {summary.p99:.0f} ms, "
        f"{run.missing} of {len(run.probes)} probes missing"
    )
    return run


def _steady_rates(
    session: BenchSession, mode: PipelineMode, metrics_url: str | None
) -> tuple[list[RateRun], float]:
    """A warm-up at the first steady rate (not kept: a new pipeline's first batches are
    slow, and one that re-read its input drains a backlog), then each steady rate, the
    later ones judged against the first one's p99; and the warm-up's seconds."""
    settings = session.settings
    producer = new_producer(session.cluster.bootstrap)
    warm_up_s = _warm_up(session, producer, mode)
    runs: list[RateRun] = []
    for rate in settings.steady_rates:
        baseline = runs[0] if runs else None
        runs.append(
            _run_rate(session, producer, rate, settings.steady_s, mode, baseline, metrics_url)
        )
    return runs, warm_up_s


def _warm_up(session: BenchSession, producer: Producer, mode: PipelineMode) -> float:
    """Run the first steady rate in rounds of `freshness_warmup_s` while the latency still
    falls within a round by over `_DRAINING_MS` (a backlog draining), up to
    `_WARM_UP_MAX_S`; the seconds it took."""
    settings = session.settings
    began = time.monotonic()
    while True:
        run = _run_rate(
            session, producer, settings.steady_rates[0], settings.freshness_warmup_s, mode
        )
        if run.growth_ms() > -_DRAINING_MS or time.monotonic() - began > _WARM_UP_MAX_S:
            break
    return time.monotonic() - began


def _two_nodes(session: BenchSession) -> None:
    session.ensure_nodes(2)
    session.shrink_to(2)


def _side_by_side(runs: list[RateRun]) -> list[RateRun]:
    """By rate, Real-Time Mode first at each: the modes side by side in the table."""
    return sorted(runs, key=lambda r: (r.rate, r.mode is not PipelineMode.REAL_TIME))


def _best(runs: list[RateRun]) -> RateRun | None:
    return max((r for r in runs if r.sustained()), key=lambda r: r.rate, default=None)


def add_table(section: Section, runs: list[RateRun]) -> None:
    table = section.table(
        "mode",
        "target rate",
        "achieved",
        "probes",
        "p50",
        "p99",
        "max",
        "growth",
        "missing",
        "sustained",
        "view's batches (mean)",
        "where a batch's time goes (mean ms)",
    )
    for run in _side_by_side(runs):
        s = Summary.of(run.latencies_ms())
        table.add(
            run.mode.value,
            fmt_num(run.rate) + "/s",
            fmt_num(run.achieved_rate) + "/s",
            len(run.probes),
            fmt_ms(s.p50),
            fmt_ms(s.p99),
            fmt_ms(s.max),
            fmt_ms(run.growth_ms()),
            run.missing,
            "yes" if run.sustained() else "no",
            _batches_cell(run),
            _phases_cell(run),
        )


def _batches_cell(run: RateRun) -> str:
    mean = run.batch_mean_ms()
    if run.batches is None or mean is None:
        return "-"
    return f"{run.batches.count} ({fmt_ms(mean)})"


def _phases_cell(run: RateRun) -> str:
    """The phases of a mean batch over 1 ms, the longest first (Spark's names)."""
    if run.batches is None:
        return "-"
    means = run.batches.phase_means_ms()
    return ", ".join(f"{phase} {fmt_num(ms)}" for phase, ms in means.items() if ms >= 1) or "-"


def _started_text(started: PipelineStart | None) -> str:
    if started is None:
        return "not started in this run"
    return (
        f"{started.mode.value}, started in {started.start_s:.0f} s, a new key visible "
        f"{started.first_visible_s:.1f} s later"
    )


def _pipelines_json(*starts: PipelineStart | None) -> dict[str, Any]:
    return {
        started.mode.value: {
            "start_seconds": round(started.start_s, 1),
            "first_visible_seconds": round(started.first_visible_s, 1),
        }
        for started in starts
        if started is not None
    }


class Freshness:
    """Three steps of one measurement: the steady rates in micro-batches, the same rates
    on the session's pipeline (Real-Time Mode), and later the ramp of higher rates on it
    (the first thing to give up when the time budget runs short)."""

    def __init__(self) -> None:
        self.steady_runs: list[RateRun] = []  # the session's pipeline
        self.ramp_runs: list[RateRun] = []  # the session's pipeline, above the steady rates
        self.other_runs: list[RateRun] = []  # the pipeline in micro-batches
        self.other_start: PipelineStart | None = None
        self.warm_up_s: dict[str, float] = {}  # per mode
        self.ramp_note = ""

    def micro_batch(self, session: BenchSession, report: Report) -> None:
        """The steady rates on a pipeline in micro-batches, before the session's starts
        (the two would share the 2 cores and the changelog)."""
        _two_nodes(session)
        with session.other_pipeline(PipelineMode.MICRO_BATCH) as started:
            if started.mode is not PipelineMode.MICRO_BATCH:
                raise BenchError(
                    f"the micro-batch pipeline ran view {session.dataset.view.name} in "
                    f"{started.mode.value} (see its log)"
                )
            self.other_start = started
            self.other_runs, self.warm_up_s[started.mode.value] = _steady_rates(
                session, started.mode, started.metrics_url
            )
        self._write(session, report)

    def steady(self, session: BenchSession, report: Report) -> None:
        """The steady rates through the demo's two nodes on the session's pipeline."""
        _two_nodes(session)
        session.ensure_pipeline()
        started = session.pipeline_started
        mode = started.mode if started is not None else PipelineMode.REAL_TIME
        self.steady_runs, self.warm_up_s[mode.value] = _steady_rates(
            session, mode, session.pipeline_metrics_url
        )
        self._write(session, report)

    def ramp(self, session: BenchSession, report: Report) -> None:
        """Higher rates until one is not sustained, or the budget (with a reserve) is spent."""
        if not self.steady_runs:
            self.steady(session, report)
        session.ensure_nodes(2)
        session.ensure_pipeline()
        settings = session.settings
        producer = new_producer(session.cluster.bootstrap)
        baseline, mode = self.steady_runs[0], self.steady_runs[0].mode
        for rate in settings.ramp_rates:
            if not [*self.steady_runs, *self.ramp_runs][-1].sustained():
                break
            if session.remaining_s() < settings.ramp_s + _DRAIN_S + _RESERVE_S:
                self.ramp_note = f"(the ramp stopped before {rate:,}/s for the time budget) "
                break
            metrics_url = session.pipeline_metrics_url
            run = _run_rate(session, producer, rate, settings.ramp_s, mode, baseline, metrics_url)
            self.ramp_runs.append(run)
        self._write(session, report)

    def figures(self) -> dict[str, Any]:
        """`steady` (the session's pipeline at the first steady rate) and `ramp` as before
        the modes were compared; `modes`: mode -> `rate_<rate>` -> run, the steady rates of
        both pipelines side by side; the highest rate the session's pipeline sustained."""
        modes: dict[str, dict[str, Any]] = {}
        for run in [*self.other_runs, *self.steady_runs]:
            modes.setdefault(run.mode.value, {})[f"rate_{run.rate}"] = run.to_json()
        best = _best([*self.steady_runs, *self.ramp_runs])
        figures: dict[str, Any] = {
            "ramp": [r.to_json() for r in self.ramp_runs],
            "modes": modes,
            "highest_sustained_rate": best.rate if best else None,
            "highest_sustained": best.to_json() if best else None,
        }
        if self.steady_runs:
            figures["steady"] = self.steady_runs[0].to_json()
        return figures

    def _write(self, session: BenchSession, report: Report) -> None:
        section = report.section(NAME, TITLE)
        ours = session.pipeline_started
        section.figures.update(
            self.figures(),
            poll_interval_ms=session.settings.poll_interval_s * 1000,
            pipeline_start_seconds=round(ours.start_s, 1) if ours else 0,
            pipeline_first_visible_seconds=round(ours.first_visible_s, 1) if ours else 0,
            pipelines=_pipelines_json(self.other_start, ours),
        )
        section.tables.clear()  # rewritten after each step
        section.notes.clear()
        add_table(section, [*self.other_runs, *self.steady_runs, *self.ramp_runs])
        self._notes(section, session)

    def _notes(self, section: Section, session: BenchSession) -> None:
        settings, best = session.settings, _best([*self.steady_runs, *self.ramp_runs])
        other = _best(self.other_runs)
        section.notes.append(
            f"Highest sustained rate tried: {fmt_num(best.rate) if best else 'none'}/s on the "
            f"session's pipeline ({best.mode.value if best else 'its mode'}) {self.ramp_note}"
            f"and {fmt_num(other.rate) if other else 'none'}/s in micro-batches (the steady "
            "rates only). Sustained = the producer reached 95% of the rate, every probe appeared, "
            "the p50 of the last third of the probes exceeds that of the first third by less "
            "than 1 s + 50%, and the p99 stays under 1.5 x the p99 of the mode's first rate "
            "+ 1 s: the pipeline keeps up instead of building a backlog."
        )
        section.notes.append(
            f"{len(session.live)} nodes. Probes: {settings.probes_per_s}/s unique keys among "
            f"the events; the gateway polled every {settings.poll_interval_s * 1000:.0f} ms. "
            f"Each mode ran {', '.join(f'{r:,}' for r in settings.steady_rates)} events/s for "
            f"{settings.steady_s:g} s each, after a warm-up at the first rate, not measured "
            f"(a new pipeline's first batches are slow): rounds of "
            f"{settings.freshness_warmup_s:g} s until one's latency no longer fell by over "
            f"{_DRAINING_MS:.0f} ms (a backlog drained), at most {_WARM_UP_MAX_S:.0f} s; "
            + ", ".join(f"{mode} {s:.0f} s" for mode, s in self.warm_up_s.items())
            + "."
        )
        section.notes.append(
            "One pipeline at a time, each mode as its log says. First one with "
            "STATEFED_PIPELINE_MODE=micro_batch (trigger 500 ms, local[2], a checkpoint "
            f"directory of its own): {_started_text(self.other_start)}; stopped. Then the "
            "session's, with STATEFED_PIPELINE_MODE=real_time (local[2 + its task slots]): "
            f"{_started_text(session.pipeline_started)}, having re-read the input topic from "
            "its start (a new checkpoint), the micro-batch runs' events included."
        )
        section.notes.append(
            "View's batches: the batches of the probed view's query that ended during the "
            "run, and their mean duration (the pipeline's "
            "`statefed_pipeline_batch_duration_seconds`). In Real-Time Mode a batch is one "
            "checkpoint interval of continuous processing (STATEFED_REALTIME_CHECKPOINT_MS, "
            "5 s by default, kept here), then the commit and the start of the next batch, in "
            "which the view stands still and its records wait: the mean less the interval is "
            "the part of that stall Spark times (the next batch's tasks then take a little "
            "longer to read again), and the slow probes of a Real-Time Mode run are the ones "
            "that arrived during one (the p99's time). The demo's Real-Time Mode queries "
            "checkpoint at spread intervals so that they do not stall together "
            "(`pipeline.job.realtime_intervals`); the probed view, the catalogue's first, "
            "keeps the setting's. Where a batch's time "
            "goes: the mean of each phase Spark times (`statefed_pipeline_batch_phase_"
            "seconds`). Before a batch's tasks start: latestOffset (the input's ends), "
            "walCommit (the offset log), queryPlanning; addBatch is the tasks (in Real-Time "
            "Mode the interval itself, then the tasks' end and state commit); after them, "
            "commitOffsets (the commit log). All but addBatch's interval is stall."
        )
