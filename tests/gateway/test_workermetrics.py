"""`/metrics` of several gateway workers (gateway.edge.workermetrics): each worker's series
gathered over real Unix sockets, labelled with their worker, every family once."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.edge.workermetrics import WorkerMetrics, merge_expositions, worker_socket_path
from gateway.metrics import GatewayMetrics
from runtime.metrics import exposition


def _metrics(lag_s: float) -> GatewayMetrics:
    metrics = GatewayMetrics()
    metrics.loop_lag(lag_s)
    metrics.refused("UNAUTHENTICATED")
    return metrics


def _samples(text: str) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    return sorted(
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    )


def _labelled(text: str, worker: str) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    return sorted(
        (name, tuple(sorted((*labels, ("worker", worker)))), value)
        for name, labels, value in _samples(text)
    )


def test_merged_expositions_hold_every_sample_of_every_worker_labelled_with_it() -> None:
    one, two = exposition(_metrics(0.001).registry), exposition(_metrics(0.5).registry)
    merged = merge_expositions({0: one.decode(), 1: two.decode()}).decode()
    assert _samples(merged) == sorted(_labelled(one.decode(), "0") + _labelled(two.decode(), "1"))
    # one HELP and TYPE per family, its samples together (the text format's rule)
    types = [line for line in merged.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)) == len(list(text_string_to_metric_families(merged)))
    assert len(types) > 5


def test_a_worker_gathers_the_others_over_their_sockets_and_leaves_out_a_stopped_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asyncio.run(_gather_with_a_stopped_worker(tmp_path, caplog))


async def _gather_with_a_stopped_worker(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    registries = [_metrics(0.001).registry, _metrics(0.5).registry, _metrics(2.0).registry]
    workers = [WorkerMetrics(tmp_path, i, 3) for i in range(3)]
    for worker, registry in zip(workers, registries, strict=True):
        await worker.start(registry)
    try:
        texts = [exposition(r).decode() for r in registries]
        want = sorted(x for i, text in enumerate(texts) for x in _labelled(text, str(i)))
        for worker in workers:  # whichever worker a scrape reaches answers for all
            assert _samples((await worker.gather()).decode()) == want
        await workers[2].stop()
        assert not worker_socket_path(tmp_path, 2).exists()
        with caplog.at_level(logging.WARNING):
            left = _samples((await workers[0].gather()).decode())
        assert left == sorted(_labelled(texts[0], "0") + _labelled(texts[1], "1"))
        assert "worker 2 did not answer" in caplog.text
    finally:
        for worker in workers:
            await worker.stop()


def test_a_worker_replaces_the_socket_a_killed_worker_of_its_index_left(tmp_path: Path) -> None:
    asyncio.run(_replace_a_left_socket(tmp_path))


async def _replace_a_left_socket(tmp_path: Path) -> None:
    worker_socket_path(tmp_path, 0).write_bytes(b"")  # what a SIGKILLed worker leaves
    worker = WorkerMetrics(tmp_path, 0, 2)
    await worker.start(_metrics(0.001).registry)
    try:
        reader, writer = await asyncio.open_unix_connection(str(worker_socket_path(tmp_path, 0)))
        assert b"statefed_gateway_event_loop_lag_seconds" in await reader.read()
        writer.close()
    finally:
        await worker.stop()


def test_a_worker_index_must_be_one_of_the_count(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"worker index 2 is not in 0\.\.1"):
        WorkerMetrics(tmp_path, 2, 2)
