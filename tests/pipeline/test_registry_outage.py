"""A value of a schema id the pipeline did not read at its start makes it ask the Schema
Registry (`pipeline.run`); a registry that does not answer then is waited for, as the
broker is, not counted as a failed restart (five of which stop the pipeline)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from pipeline import PipelineConfig
from pipeline.run import _ask_registry
from tooling.broker import free_port
from tooling.registry import CCOMPAT_PATH, SchemaRegistry

SCHEMA = '{"type": "record", "name": "Wait", "namespace": "t", "fields": []}'


class _Paced(threading.Event):
    """The pipeline's stop event, whose waits between two asks end when the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self.go_on = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        self.go_on.wait(60)
        return self.is_set()


def test_a_registry_that_does_not_answer_is_waited_for_then_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    config = PipelineConfig(registry_url=f"http://127.0.0.1:{port}{CCOMPAT_PATH}")
    answers: list[bool | None] = []
    stop = _Paced()
    asking = threading.Thread(
        target=lambda: answers.append(_ask_registry(config, "wait-value", 1, stop))
    )
    with caplog.at_level(logging.WARNING, "pipeline.run"):
        asking.start()
        try:
            assert stop.waiting.wait(30), "it did not wait for the registry"
            assert "waiting for it" in caplog.text and answers == []
            with SchemaRegistry(tmp_path / "registry", port=port) as registry:
                with SchemaRegistryClient({"url": registry.url}) as client:
                    registered = client.register_schema("wait-value", Schema(SCHEMA, "AVRO"))
                stop.go_on.set()  # the next ask
                asking.join(60)
        finally:
            stop.set()
            stop.go_on.set()
            asking.join(10)
    assert answers == [registered == 1]
    assert caplog.text.count("waiting for it") == 1
