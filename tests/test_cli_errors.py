"""A bad value is named as the user gave it: by its flag when typed as one, by its
variable when set in the environment; every error names the command, and a part that stops
on an error of its own says it in one message."""

from __future__ import annotations

from pathlib import Path

import pytest

import node.serve.server
import pipeline
from node.errors import NodeError
from pipeline.errors import SourceError
from tooling.cli import main


def test_a_bad_flag_is_named_by_the_flag_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATEFED_PARTITIONS", raising=False)
    with pytest.raises(SystemExit) as stopped:
        main(["topics", "--partitions", "abc", "--dry-run"])
    assert str(stopped.value) == (
        "statefed topics: --partitions (STATEFED_PARTITIONS): must be an integer >= 1, got 'abc'"
    )


def test_a_bad_variable_is_named_by_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATEFED_PARTITIONS", "abc")
    with pytest.raises(SystemExit) as stopped:
        main(["topics", "--dry-run"])
    assert str(stopped.value) == (
        "statefed topics: STATEFED_PARTITIONS: must be an integer >= 1, got 'abc'"
    )


def test_a_catalogue_that_does_not_load_is_said_by_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATEFED_CATALOGUE", "no_such_module_here:VIEWS")
    with pytest.raises(SystemExit) as stopped:
        main(["topics", "--dry-run"])
    said = str(stopped.value)
    assert said.startswith("statefed topics: STATEFED_CATALOGUE='no_such_module_here:VIEWS': ")
    assert said.count("statefed topics:") == 1


def test_a_catalogue_given_as_a_flag_is_named_by_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATEFED_CATALOGUE", raising=False)
    with pytest.raises(SystemExit) as stopped:
        main(["topics", "--catalogue", "no_such_module_here:VIEWS", "--dry-run"])
    said = str(stopped.value)
    assert said.startswith("statefed topics: --catalogue 'no_such_module_here:VIEWS': no module ")
    assert "STATEFED_CATALOGUE=" not in said


def test_a_pipeline_that_stops_on_an_error_says_it_in_one_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pipeline error names its cause and the fix (here: what a run raises after its
    restarts, over a stand-in for the run): the command says it, not a traceback."""

    def stopped(config: object, catalogue: object) -> None:
        raise SourceError("topic orders: the broker has no such topic: create it")

    monkeypatch.setattr(pipeline, "run_pipeline", stopped)
    with pytest.raises(SystemExit) as said:
        main(["pipeline"])
    assert (
        str(said.value)
        == "statefed pipeline: topic orders: the broker has no such topic: create it"
    )


def test_a_node_that_stops_on_an_error_says_it_in_one_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def stopped(config: object, catalogue: object) -> None:
        raise NodeError("node n1 stopped: partition 3's store is damaged")

    monkeypatch.setattr(node.serve.server, "run_node", stopped)
    with pytest.raises(SystemExit) as said:
        main(["node"])
    assert str(said.value) == "statefed node: node n1 stopped: partition 3's store is damaged"


def test_gateway_worker_processes_with_a_catalogue_of_your_own_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "fewer_views.py").write_text(
        "from schema import CATALOGUE\nVIEWS = CATALOGUE[:1]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("STATEFED_GATEWAY_PROCESSES", "2")
    with pytest.raises(SystemExit) as said:
        main(["gateway", "--catalogue", "fewer_views:VIEWS"])
    assert str(said.value) == (
        "statefed gateway: STATEFED_GATEWAY_PROCESSES: is 2, and worker processes serve the "
        "built-in catalogue only: set it to 1 to serve another"
    )


def test_an_optional_number_is_named_as_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATEFED_TOPICS_MIN_INSYNC_REPLICAS", raising=False)
    with pytest.raises(SystemExit) as stopped:
        main(["topics", "--min-insync-replicas", "abc", "--dry-run"])
    assert str(stopped.value) == (
        "statefed topics: --min-insync-replicas (STATEFED_TOPICS_MIN_INSYNC_REPLICAS): must be "
        "an integer >= 1, got 'abc'"
    )
