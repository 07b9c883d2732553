"""A bad value is named as the user gave it: by its flag when typed as one, by its
variable when set in the environment; every error names the command."""

from __future__ import annotations

import pytest

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
