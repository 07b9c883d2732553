"""The peers step's own parts: its figures from load rounds, how its goals are judged, the
literal query form, and the wrk script that checks every answer (run against a small
server on 127.0.0.1 that answers some keys wrong)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from schema import WORD_COUNTS
from tests.bench.answering import answering
from tests.bench.checked_load import CheckedLoad, parse_checked
from tests.bench.peer_figures import Cell, Round, faster_peer, in_turn, join_rounds, peer_ratios
from tests.bench.peer_gateways import PEERS
from tests.bench.peers import FORMS, OURS, TARGETS, literal_body, write
from tests.bench.report import Report
from tests.bench.targets import evaluate


def one_round(requests: int, seconds: float, p50: float, p99: float, cpu: float = 0.0) -> Round:
    return Round(requests, seconds, p50, p99, requests, 0, 0, cpu, cpu / 2)


def cell(rps: float, p50: float = 1.0, p99: float = 2.0) -> Cell:
    return join_rounds([one_round(round(rps), 1.0, p50, p99)])


def test_rounds_join_into_requests_over_seconds_and_mean_percentiles() -> None:
    joined = join_rounds([one_round(300, 2.0, 1.0, 4.0, 0.3), one_round(100, 2.0, 3.0, 8.0, 0.1)])
    assert joined.rps == 100.0
    assert (joined.p50_ms, joined.p99_ms) == (2.0, 6.0)
    assert joined.front_cpu_ms == pytest.approx(1.0)  # 0.4 s over 400 requests
    assert joined.node_cpu_ms == pytest.approx(0.5)
    assert joined.rounds_rps == (150.0, 50.0)
    with pytest.raises(ValueError, match="at least one round"):
        join_rounds([])


def test_every_other_round_runs_the_targets_in_reverse_order() -> None:
    targets = ("gateway", "gateway_cache_off", "hive")
    assert in_turn(targets, 1) == in_turn(targets, 3) == list(targets)
    assert in_turn(targets, 2) == ["hive", "gateway_cache_off", "gateway"]


def test_the_faster_peer_is_the_one_with_more_requests_per_second() -> None:
    cells = {"hive": cell(700), "apollo": cell(800), "gateway": cell(5000)}
    assert faster_peer(cells, ("hive", "apollo")) == "apollo"
    assert faster_peer({"gateway": cell(1)}, ("hive", "apollo")) is None


def test_ratios_are_ours_over_the_faster_peer_and_literals_over_variables() -> None:
    cells = {
        ("gateway", "variables", 32): cell(3000, p50=5.0, p99=20.0),
        ("hive", "variables", 32): cell(600, p50=40.0, p99=100.0),
        ("apollo", "variables", 32): cell(1000, p50=30.0, p99=80.0),
        ("gateway", "literals", 32): cell(600),
        ("hive", "literals", 32): cell(400),
        ("apollo", "literals", 32): cell(300),
    }
    ratios = peer_ratios(cells, ("gateway",), ("hive", "apollo"), ("variables", "literals"), (32,))
    assert ratios["faster_peer_variables_c32"] == "apollo"
    assert ratios["gateway_rps_over_faster_peer_variables_c32"] == 3.0
    assert ratios["gateway_p50_over_faster_peer_variables_c32"] == pytest.approx(0.167)
    assert ratios["gateway_p99_over_faster_peer_variables_c32"] == 0.25
    assert ratios["gateway_rps_over_hive_variables_c32"] == 5.0
    assert ratios["faster_peer_literals_c32"] == "hive"
    assert ratios["gateway_rps_over_faster_peer_literals_c32"] == 1.5
    assert ratios["literals_over_variables_gateway_c32"] == 0.2
    assert ratios["literals_over_variables_apollo_c32"] == 0.3


def test_the_goals_are_judged_on_the_gateway_with_its_cache_off() -> None:
    report = Report()
    section = report.section("peers", "Peers")
    section.figures["ratios"] = {
        "literals_over_variables_gateway_cache_off_c32": 0.95,
        "literals_over_variables_node_c32": 0.5,
        "gateway_rps_over_faster_peer_variables_c32": 9.0,  # cache on: not judged
        "gateway_cache_off_rps_over_faster_peer_variables_c32": 2.0,
    }
    section.figures["cells"] = {
        "gateway_cache_off_variables_c32": {"front_cpu_ms_per_request": 0.25}
    }
    judged = {t.target: (t.status, t.measured) for t in evaluate(report)}
    gateway = (
        "literal form >= 0.9 x variables form req/s at the gateway (cache off), 32 connections"
    )
    assert judged[gateway] == ("PASS", "0.95x")
    node = "literal form >= 0.9 x variables form req/s at the node, 32 connections"
    assert judged[node] == ("FAIL", "0.50x")
    rps = "gateway (cache off) req/s >= 3 x the faster peer's at 32 connections, variables"
    assert judged[rps] == ("FAIL", "2.00x")
    cpu = "gateway (cache off) CPU per point request <= 0.3 ms (variables, 32 connections)"
    assert judged[cpu] == ("PASS", "0.25 ms")
    p99 = "gateway (cache off) p99 <= 0.5 x the faster peer's at 32 connections, literals"
    assert judged[p99] == ("NOT MEASURED", "n/a")


def test_the_literal_form_writes_the_key_into_the_text_as_a_graphql_string() -> None:
    body = orjson.loads(literal_body('bk"1', WORD_COUNTS))
    assert body == {"query": '{ wordCount(word: "bk\\"1") { word count } }'}


def test_a_run_without_the_script_line_is_an_error_naming_the_output() -> None:
    with pytest.raises(ValueError, match=r"no BENCHJSON line.*connection refused"):
        parse_checked("unable to connect: connection refused\n", 1)


TRUTH = {f"k{i}": 100 + i for i in range(10)}


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    """Answers k0-k4 right, k5-k8 with a wrong count, k9 with a GraphQL error."""
    key = request["variables"]["word"]
    index = int(key[1:])
    if index == 9:
        return {"errors": [{"message": "no"}], "data": None}
    count = TRUTH[key] + (1 if 5 <= index <= 8 else 0)
    return {"data": {"wordCount": {"word": key, "count": count}}}


@pytest.fixture
def server() -> Iterator[str]:
    with answering(_answer) as url:
        yield url


def test_the_wrk_script_checks_every_answer_against_the_truth(server: str, tmp_path: Path) -> None:
    load = CheckedLoad(tmp_path, "word")
    load.set_truth(TRUTH)
    bodies = [orjson.dumps({"query": "q", "variables": {"word": k}}) for k in TRUTH]
    run = load.run(server, bodies, connections=1, seconds=1)
    assert run.load.requests >= 10
    assert run.checked == run.load.requests
    # one connection cycles the keys in turn: 4 of 10 answers wrong, 1 of 10 an error
    assert run.wrong == pytest.approx(0.4 * run.checked, abs=2)
    assert run.failed == pytest.approx(0.1 * run.checked, abs=2)
    assert run.load.errors == run.wrong + run.failed


def test_the_section_shows_every_cell_and_each_gateway_against_the_faster_peer() -> None:
    cells = {
        (target, form, c): cell(rps)
        for rps, target in enumerate(TARGETS, start=1)
        for form in FORMS
        for c in (1, 32)
    }
    ratios = peer_ratios(cells, OURS, PEERS, FORMS, (1, 32))
    section = Report().section("peers", "Peers")
    write(section, cells, ratios)
    overview, runs, against, forms = section.tables
    assert overview.rows[0][:2] == ["variables", "1"]
    assert len(overview.rows) == 4 and len(overview.rows[0]) == 2 + len(TARGETS)
    assert len(runs.rows) == len(cells)
    # apollo_router (6 req/s) is faster than hive (3), apollo (4) and grafbase (5): the
    # gateways (1, 2) are 0.17x and 0.33x it; the columns: faster peer, x it, x hive,
    # x apollo, x grafbase, x apollo_router
    assert [[row[3], row[4], *row[7:]] for row in against.rows[:2]] == [
        ["Apollo Router", "0.17x", "0.33x", "0.25x", "0.20x", "0.17x"],
        ["Apollo Router", "0.33x", "0.67x", "0.50x", "0.40x", "0.33x"],
    ]
    assert len(forms.rows) == len(TARGETS)
    assert section.figures["cells"]["floor_literals_c32"]["rps"] == 8.0
    assert section.errors == []


def test_a_cell_with_wrong_answers_is_an_error_of_the_section() -> None:
    wrong = join_rounds([Round(100, 1.0, 1.0, 2.0, 100, 3, 1, 0.0, 0.0)])
    section = Report().section("peers", "Peers")
    write(section, {("hive", "literals", 32): wrong}, {})
    assert section.errors == [
        "Hive Gateway, literals, 32 connections: 3 wrong answers and 1 failed requests; "
        "100 of 100 checked"
    ]
