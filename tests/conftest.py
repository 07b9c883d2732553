"""Shared fixtures: one embedded broker per test run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tooling.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A real tansu broker on a loopback port, stopped at the end of the run.

    Tests that create topics use names unique to the test, since the broker is shared.
    """
    log = Path(tmp_path_factory.mktemp("broker")) / "tansu.log"
    with EmbeddedBroker(log_path=log) as running:
        yield running
