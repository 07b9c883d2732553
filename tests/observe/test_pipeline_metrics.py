"""The pipeline's driver serves `/metrics` on STATEFED_PIPELINE_METRICS_PORT (a real Spark
session over the embedded broker): after words are produced its batch metrics appear, the
processed offsets reach the end of the input, a record without a key counts as a dead letter,
promtool accepts the output, and its Python log lines are JSON."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.produce import produce_keys
from tests.observe.support import promtool_check, scrape, series, total
from tooling.broker import free_port
from tooling.localcluster import LocalCluster
from tooling.processes import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

WORDS = 40


@pytest.fixture
def local(tmp_path: Path) -> Iterator[tuple[LocalCluster, str]]:
    port = free_port()
    env = {
        **os.environ,
        "STATEFED_PIPELINE_METRICS_PORT": str(port),
        "STATEFED_LOG_FORMAT": "json",
    }
    with LocalCluster(tmp_path, partitions=2, env=env) as cluster:
        cluster.start_broker()
        cluster.start_pipeline()
        yield cluster, f"http://127.0.0.1:{port}"


def test_the_pipelines_batch_metrics_appear(local: tuple[LocalCluster, str]) -> None:
    cluster, url = local
    words = [f"w{uuid.uuid4().hex[:6]}-{i % 10}" for i in range(WORDS)]
    produce_keys(cluster.kafka, "words", words)
    produce_keys(cluster.kafka, "words", [""])  # an empty key: a dead letter
    view = {"view": "word_counts"}

    def processed() -> bool:
        samples = scrape(url)[1]
        offsets = series(samples, "statefed_pipeline_processed_offset")
        mine = [v for labels, v in offsets.items() if dict(labels)["view"] == "word_counts"]
        return sum(mine) == WORDS + 1 and (
            total(samples, "statefed_pipeline_dead_letters_total", topic="words") == 1
        )

    wait_until(processed, 180, "the pipeline to process the words and the dead letter", 0.5)
    text, samples = scrape(url)
    assert total(samples, "statefed_pipeline_batches_total", **view) >= 1
    assert total(samples, "statefed_pipeline_batch_duration_seconds_count", **view) >= 1
    assert total(samples, "statefed_pipeline_batch_duration_seconds_sum", **view) > 0
    assert total(samples, "statefed_pipeline_input_rows_total", **view) == WORDS + 1
    assert series(samples, "statefed_pipeline_input_rows_per_second")
    assert total(samples, "statefed_pipeline_late_rows_dropped_total", **view) == 0
    assert total(samples, "statefed_pipeline_query_restarts_total") == 0
    promtool_check(text)
    logged = [
        json.loads(line)
        for line in (cluster.base_dir / "pipeline.log").read_text(errors="replace").splitlines()
        if line.startswith("{")
    ]
    assert any(line["logger"] == "pipeline.job" for line in logged), logged[:5]
    assert {line["part"] for line in logged} == {"pipeline"}
