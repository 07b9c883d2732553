"""What the chaos tests count as a count going down (`tests.chaos.invariants`): the
default read mode's promise, not more."""

from __future__ import annotations

from tests.chaos.invariants import promised_regressions
from tests.chaos.load import Answer


def _answer(sent: float, count: int, role: str, node: str) -> Answer:
    return Answer("point", "g", sent, sent + 0.1, keys={"w": (count, role, node)})


def test_a_standby_on_another_node_may_answer_lower_than_an_earlier_standby() -> None:
    moved = [_answer(1.0, 41, "STANDBY", "n2"), _answer(2.0, 0, "STANDBY", "n1")]
    assert promised_regressions(moved) == []


def test_a_standby_copy_going_down_is_a_regression() -> None:
    answers = [_answer(1.0, 41, "STANDBY", "n2"), _answer(2.0, 40, "STANDBY", "n2")]
    assert len(promised_regressions(answers)) == 1


def test_the_active_copy_going_down_is_a_regression_wherever_it_moved() -> None:
    answers = [_answer(1.0, 41, "ACTIVE", "n2"), _answer(2.0, 40, "ACTIVE", "n1")]
    assert len(promised_regressions(answers)) == 1


def test_answers_that_crossed_in_flight_are_not_compared() -> None:
    crossed = [
        Answer("point", "g", 1.0, 3.0, keys={"w": (41, "ACTIVE", "n2")}),
        Answer("point", "g", 2.0, 2.5, keys={"w": (40, "ACTIVE", "n2")}),
    ]
    assert promised_regressions(crossed) == []
