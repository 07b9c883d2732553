"""`runtime.environment.environment`: variables set for a while, then as they were."""

from __future__ import annotations

import os

import pytest

from runtime.environment import environment


def test_variables_are_set_inside_and_restored_or_unset_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATEFED_TEST_SET", "before")
    monkeypatch.delenv("STATEFED_TEST_UNSET", raising=False)
    with environment({"STATEFED_TEST_SET": "inside", "STATEFED_TEST_UNSET": "inside"}):
        assert os.environ["STATEFED_TEST_SET"] == "inside"
        assert os.environ["STATEFED_TEST_UNSET"] == "inside"
    assert os.environ["STATEFED_TEST_SET"] == "before"
    assert "STATEFED_TEST_UNSET" not in os.environ


def test_they_are_restored_when_the_block_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATEFED_TEST_UNSET", raising=False)
    with pytest.raises(RuntimeError), environment({"STATEFED_TEST_UNSET": "inside"}):
        raise RuntimeError("the JVM did not start")
    assert "STATEFED_TEST_UNSET" not in os.environ
