"""Where a request's time goes in the shapes step: the parts of a request's time at 1
connection, and the shapes whose 1.5x goal no gateway asking the node can meet."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bench.report import Section
from tests.bench.request_time import goal_ms, request_time, write_request_times


def _cell(rps: float, front: float, node: float) -> dict[str, Any]:
    return {"rps": rps, "front_cpu_ms_per_request": front, "node_cpu_ms_per_request": node}


CELLS = {
    # the node alone takes 1.0 ms, longer than the goal's 1000 / (1.5 * 800) = 0.833 ms
    "slow_gateway_c1": _cell(500, 1.2, 0.5),
    "slow_peer_c1": _cell(800, 0.3, 0.6),
    "slow_node_c1": _cell(1000, 0.9, 0.0),
    "slow_gateway_c32": _cell(1500, 0.4, 0.1),
    "slow_peer_c32": _cell(2000, 0.2, 0.5),
    "slow_node_c32": _cell(1250, 0.7, 0.0),
    # the node takes 0.25 ms, within the goal's 0.667 ms
    "fast_gateway_c1": _cell(1250, 0.5, 0.2),
    "fast_peer_c1": _cell(1000, 0.3, 0.3),
    "fast_node_c1": _cell(4000, 0.2, 0.0),
}


def test_a_request_at_one_connection_is_its_cpu_and_the_rest() -> None:
    got = request_time(CELLS["slow_gateway_c1"])
    assert got is not None
    assert got.total_ms == pytest.approx(2.0)
    assert got.front_ms + got.node_ms + got.rest_ms == pytest.approx(got.total_ms)
    assert got.rest_ms == pytest.approx(0.3)
    busy = request_time(_cell(1000, 0.8, 0.4))  # CPU over the time: more than one core
    assert busy is not None and busy.rest_ms == 0.0
    assert request_time(None) is None and request_time({"rps": 0}) is None
    assert goal_ms(800) == pytest.approx(1000 / 1200)


def test_the_node_directs_time_says_which_goals_a_proxy_can_reach() -> None:
    section = Section("shapes", "Shapes")
    write_request_times(section, CELLS, ["slow", "fast"], ["gateway"], ["peer"], [1, 32])
    bounds = section.figures["request_time"]
    assert bounds["slow"] == {
        "goal_ms": pytest.approx(0.8333, abs=1e-4),
        "node_direct_ms": 1.0,
        "reachable_asking_the_node": False,
    }
    assert bounds["fast"]["reachable_asking_the_node"] is True
    assert "longer than the goal's time for slow:" in section.notes[-1]
    rows = section.tables[-1].rows
    assert rows[0] == [
        "slow", "1", "<= 0.833 ms a request",
        "2.000 = 1.200 + 0.500 + 0.300",
        "peer: 1.250 = 0.300 + 0.600 + 0.350",
        "1.000 = 0.900 + 0.000 + 0.100",
    ]  # fmt: skip
    assert rows[1] == [
        "slow", "32", ">= 3,000 req/s: <= 0.333 ms of CPU a request on one thread",
        "0.400 + 0.100 (front 0.60 cores)", "peer: 0.200 + 0.500 (front 0.40 cores)",
        "0.700 + 0.000 (front 0.88 cores)",
    ]  # fmt: skip
    assert rows[3][2:] == ["-", "-", "-", "-"]  # "fast" was not measured at 32 connections


def test_the_note_says_so_when_every_goal_is_within_the_node_directs_reach() -> None:
    section = Section("shapes", "Shapes")
    write_request_times(section, CELLS, ["fast"], ["gateway"], ["peer"], [1, 32])
    assert section.figures["request_time"]["fast"]["reachable_asking_the_node"] is True
    assert "shorter than the goal's time on every shape measured" in section.notes[-1]
    assert "longer than the goal's time" not in section.notes[-1]
