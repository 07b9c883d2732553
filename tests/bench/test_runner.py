"""A failing step is recorded, and says so when the run's budget, not the step, cut it."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import cast

import pytest

from tests.bench import runner
from tests.bench.report import Report
from tests.bench.runner import Step, run_plan
from tests.bench.session import MIN_WAIT_S, BenchError, BenchSession


@dataclass
class _Session:
    """What `run_plan` asks of a session: the time left and a progress line."""

    left_s: float
    settings: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(budget_s=1330.0))
    lines: list[str] = field(default_factory=list)

    def remaining_s(self) -> float:
        return self.left_s

    def budget_spent(self) -> bool:
        return self.left_s <= MIN_WAIT_S

    def progress(self, line: str) -> None:
        self.lines.append(line)


def _errors(left_after_s: float, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The errors of a step started with 600 s left that fails with `left_after_s` left."""
    session = _Session(600.0)

    def counted_too_few(_: BenchSession, __: Report) -> None:
        session.left_s = left_after_s
        raise BenchError("the changelog counted 3,688 of 50,000 events after 10 s")

    step = Step("aggregates", counted_too_few, estimate_s=120)
    monkeypatch.setattr(runner, "plan", lambda: (step,))
    report = Report()
    run_plan(cast(BenchSession, session), report)
    return report.sections["aggregates"].errors


def test_a_step_failing_once_the_budget_is_spent_says_so_and_how_to_run_it_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    [error] = _errors(-30.0, monkeypatch)
    assert error.startswith("BenchError: the changelog counted 3,688 of 50,000 events")
    assert "the run's budget (1330 s) ran out during this step" in error
    assert "python -m tests.bench --only aggregates" in error


def test_a_step_failing_within_the_budget_is_recorded_as_it_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    [error] = _errors(400.0, monkeypatch)
    assert error.startswith("BenchError: the changelog counted 3,688 of 50,000 events")
    assert "budget" not in error
