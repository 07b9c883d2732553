"""A cluster of its own for the differential tests: it starts with one node and grows to
three, and runs a catalogue with views of its own (tests/differential/views.py), which
the pipeline progress follows too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.differential.views import CATALOGUE
from tests.e2e.conftest import Cluster
from tests.e2e.progress import PipelineProgress
from tooling.localcluster import LocalCluster

CATALOGUE_SPEC = "tests.differential.views:CATALOGUE"


@pytest.fixture(scope="package")
def grown_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = Path(tmp_path_factory.mktemp("differential"))
    env = {**os.environ, "STATEFED_CATALOGUE": CATALOGUE_SPEC}
    with LocalCluster(base, partitions=6, env=env, progress=print) as local:
        local.start_all(("d1",))
        running = Cluster(local)
        yield running
        running.http.close()


@pytest.fixture(scope="package")
def progress(grown_cluster: Cluster) -> Iterator[PipelineProgress]:
    follower = PipelineProgress(grown_cluster.local.bootstrap, CATALOGUE)
    yield follower
    follower.close()
