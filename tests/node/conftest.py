"""Fixtures of the node tests: every store backend the contract suites run against."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.storage.store import PartitionStore
from tests.node.stores import BACKENDS, StoreMaker, store_maker


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreMaker:
    return store_maker(request.param, tmp_path)


@pytest.fixture
def store(make_store: StoreMaker) -> Iterator[PartitionStore]:
    with make_store() as opened:
        yield opened
