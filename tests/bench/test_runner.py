"""A failing step is recorded, and says so when the run's budget cut one of its waits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import runner
from tests.bench.report import Report
from tests.bench.runner import Step, run_plan
from tests.bench.session import MIN_WAIT_S, BenchError, BenchSession
from tests.bench.settings import BenchSettings


class _Session(BenchSession):
    """What `run_plan` asks of a session, the session's own budget cuts included, with
    the time left set by the test instead of the clock (and no cluster)."""

    def __init__(self, left_s: float) -> None:  # BenchSession's would make a cluster's parts
        self.settings = BenchSettings(workdir=Path("unused"))
        self.left_s = left_s
        self.shortest_cut_s = None
        self.lines: list[str] = []
        self.progress = self.lines.append

    def remaining_s(self) -> float:
        return self.left_s


def _errors(left_at_wait_s: float, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The errors of a step that waits up to 120 s with `left_at_wait_s` of the budget
    left, then fails."""
    session = _Session(600.0)
    session.shortest_cut_s = 3.0  # a cut of an earlier step

    def counted_too_few(_: BenchSession, __: Report) -> None:
        session.left_s = left_at_wait_s
        waited = session.timeout_s(120.0)
        raise BenchError(f"the changelog counted 3,688 of 50,000 events after {waited:.0f} s")

    monkeypatch.setattr(runner, "plan", lambda: (Step("aggregates", counted_too_few, 120),))
    report = Report()
    run_plan(session, report)
    return report.sections["aggregates"].errors


@pytest.mark.parametrize(("left_s", "cut_s"), [(-30.0, MIN_WAIT_S), (25.0, 25.0)])
def test_a_step_whose_wait_the_budget_cut_says_so_and_how_to_measure_it(
    left_s: float, cut_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    [error] = _errors(left_s, monkeypatch)
    assert error.startswith(
        f"BenchError: the changelog counted 3,688 of 50,000 events after {cut_s:.0f} s"
    )
    assert (
        f"the run's budget (1330 s) was nearly spent and cut a wait of this step to {cut_s:.0f} s"
        in error
    )
    assert "python -m tests.bench --only aggregates" in error


def test_a_step_failing_with_its_waits_whole_is_recorded_as_it_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    [error] = _errors(400.0, monkeypatch)
    assert error.startswith("BenchError: the changelog counted 3,688 of 50,000 events after 120 s")
    assert "budget" not in error
