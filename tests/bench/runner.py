"""The run plan: measurements as steps in the order that grows the cluster cheapest.

The first node restores the data set (restore), serves alone (fan-out over 1 node; the
peer gateways in front of it, for the point lookup, then for the other query shapes), gets
a peer (point queries; with the gateway cache on and off; subscriptions pushed live;
fan-out over 2; a whole-view scan), a third (fan-out over 3); back to two nodes, a pipeline
in micro-batches runs alone for the freshness steady rates and stops, the session's
pipeline starts in Real-Time Mode (the same rates, throughput, freshness at higher rates
while the budget lasts), memory is read, and nodes are killed (failover), so the peak
memory covers measurements 1-4; just before the kills a node is frozen (freeze: SIGSTOP,
then SIGCONT). The aggregate functions' throughput, in a second pipeline that reads and
writes only the broker, comes last: it is the step the open issues need least, and it took
300-400 s of the budget when it ran before the kills. `only` keeps the steps of the named
measurements; the session still starts what they need.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass

from tests.bench import (
    aggregates,
    cache,
    failover,
    fanout,
    freeze,
    freshness,
    live,
    memory,
    peers,
    point,
    restore,
    scan,
    shapes,
    throughput,
)
from tests.bench.cpu import CpuMeter
from tests.bench.report import Report
from tests.bench.session import BenchSession

__all__ = ["MEASUREMENTS", "Step", "plan", "run_plan"]


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[BenchSession, Report], None]
    estimate_s: float  # not started with less time left in the budget


def plan() -> tuple[Step, ...]:
    """Every step of a run, in order; the cluster only grows until the pipeline starts, and
    the micro-batch pipeline has stopped before the session's starts."""
    fresh = freshness.Freshness()
    return (
        Step(restore.NAME, restore.measure, 60),
        Step(fanout.NAME, fanout.measure_at(1), 20),
        Step(peers.NAME, peers.measure, 130),
        Step(shapes.NAME, shapes.measure, 170),
        Step(point.NAME, point.measure, 60),
        Step(cache.NAME, cache.measure, 50),
        Step(live.NAME, live.measure, 70),
        Step(fanout.NAME, fanout.measure_at(2), 20),
        Step(scan.NAME, scan.measure, 90),
        Step(fanout.NAME, fanout.measure_at(3), 30),
        Step(freshness.NAME, fresh.micro_batch, 90),
        Step(freshness.NAME, fresh.steady, 90),
        Step(throughput.NAME, throughput.measure, 40),
        Step(freshness.NAME, fresh.ramp, 40),
        Step(memory.NAME, memory.measure, 1),
        Step(freeze.NAME, freeze.measure, 40),
        Step(failover.NAME, failover.measure, 60),
        # last: a pipeline of its own, and the step the open issues need least; it took 111 s
        # on 3 December 2026 and 168 s on 4 December, when, started with 160 s of budget
        # left, it ran out of budget and failed
        Step(aggregates.NAME, aggregates.measure, 170),
    )


TITLES = {
    m.NAME: m.TITLE
    for m in (
        aggregates,
        restore,
        fanout,
        point,
        cache,
        live,
        freeze,
        failover,
        freshness,
        throughput,
        memory,
        scan,
        peers,
        shapes,
    )
}
MEASUREMENTS = tuple(dict.fromkeys(step.name for step in plan()))


def _describe(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:]
    at = f" (at {where[0].filename.split('/')[-1]}:{where[0].lineno})" if where else ""
    return f"{type(exc).__name__}: {str(exc)[:1500]}{at}"


def _cut_by_budget(session: BenchSession, name: str) -> str:
    """What to add to the error of step `name` when the budget cut one of its waits: it
    may have failed for want of time, not for what it measures."""
    cut = session.shortest_cut_s
    if cut is None:
        return ""
    return (
        f"; the run's budget ({session.settings.budget_s:.0f} s) was nearly spent and cut a"
        f" wait of this step to {cut:.0f} s, so it may have failed for want of time:"
        f" measure it with `python -m tests.bench --only {name}`"
    )


def run_plan(session: BenchSession, report: Report, only: Collection[str] = ()) -> None:
    """Run every step (of `only`, when given); a failing step is recorded, not raised."""
    for step in plan():
        if only and step.name not in only:
            continue
        section = report.section(step.name, TITLES[step.name])
        if session.remaining_s() < step.estimate_s:
            section.errors.append(
                f"a step skipped: under {step.estimate_s:.0f} s left in the budget"
            )
            continue
        session.progress(f"== {step.name} ({session.remaining_s():.0f} s of budget left)")
        began, meter = time.monotonic(), CpuMeter()
        session.begin_step()
        try:
            step.run(session, report)
        except Exception as exc:
            error = _describe(exc) + _cut_by_budget(session, step.name)
            section.errors.append(error)
            session.progress(f"{step.name} failed: {error}")
        finally:
            section.seconds += time.monotonic() - began
            usage = meter.stop()
            section.cpu.append(
                {"own": round(usage.own_cores, 2), "other": round(usage.other_cores, 2)}
            )
            if usage.other_cores > 0.25:
                session.progress(f"{step.name}: other processes used {usage.other_cores:.2f} cores")
