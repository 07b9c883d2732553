"""Fixtures of the pipeline tests: one real Spark session for the package, test-only views.

Starting a session takes 8-22 s, so every test of this package shares one; each test
runs its queries over its own topics and checkpoint directory, so tests stay independent
although the broker and the session are shared.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pipeline import PipelineConfig, build_session
from pipeline.modes import realtime_slots
from runtime.topics import ensure_topics, statefed_topics
from schema import DEMO_DOMAIN, View, ViewKind
from tests.pipeline.support import PARTITIONS
from tooling.broker import KafkaBroker


# Package scope: the session is stopped before other packages' tests run.
@pytest.fixture(scope="package")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A real local Spark session with the pipeline's settings, and task slots for the
    Real-Time Mode queries of four views at a time beside ten micro-batch queries."""
    config = PipelineConfig(
        checkpoint_dir=tmp_path_factory.mktemp("unused-checkpoints"),
        # where the suite's other JVMs find theirs (tests.classdata)
        jvm_archives=PipelineConfig.from_env(os.environ).jvm_archives,
    )
    slots = realtime_slots([PARTITIONS] * 4, config.shuffle_partitions) + 10 * PARTITIONS
    session = build_session(config, app_name="statefed-pipeline-tests", realtime_slots=slots)
    yield session
    session.stop()


@pytest.fixture
def count_view(broker: KafkaBroker) -> View:
    """A COUNT view over a fresh input topic, with its changelog topic created."""
    suffix = uuid.uuid4().hex[:10]
    view = View(
        name=f"test_{suffix}",
        topic=f"test.{suffix}.words",
        kind=ViewKind.COUNT,
        key_field="word",
        type_name="TestCount",
        point_field="testCount",
        many_field="testCounts",
        top_field="topTests",
    )
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, [view]))
    return view


@pytest.fixture
def demo_views(broker: KafkaBroker) -> dict[str, View]:
    """Copies of the demo domain's views (by kind value) over fresh topics, created."""
    suffix = uuid.uuid4().hex[:10]
    views = {
        v.kind.value: dataclasses.replace(
            v, name=f"{v.name}_{suffix}", topic=f"test.{suffix}.{v.topic}"
        )
        for v in DEMO_DOMAIN
    }
    assert len(views) == len(DEMO_DOMAIN), "one demo view per kind"
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, views.values()))
    return views
