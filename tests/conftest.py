"""Shared fixtures: one Apache Kafka broker per test run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tooling.broker import KafkaBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A real Apache Kafka broker (KRaft) on a loopback port, stopped at the end of the run.

    Tests that create topics use names unique to the test, since the broker is shared.
    """
    log = Path(tmp_path_factory.mktemp("broker")) / "kafka.log"
    with KafkaBroker(log_path=log) as running:
        yield running
