"""Running real nodes in tests: under uvicorn in a thread, or as a `run_node` process."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import httpx
from confluent_kafka import Producer

from node.config import NodeConfig
from node.serve.app import NodeApp
from node.serve.server import NodeServer
from runtime.clock import Clock, wall_clock_ms
from schema import WORD_COUNTS, CountRow, View, encode_count, partition_for
from tooling.broker import free_port
from tooling.processes import client_tls, wait_until

T = TypeVar("T")
P = 6
# As the pipeline's producer: idempotent, so a retry after a broker stall (a timed-out
# request the broker had appended) writes no record twice. Room for a test's whole
# changelog in the producer's queue (librdkafka's default: 100k).
_PRODUCER = {
    "linger.ms": 5,
    "enable.idempotence": True,
    "queue.buffering.max.messages": 1_000_000,
}


def unique_count_view() -> View:
    """A COUNT view with the word_counts GraphQL names but topics of its own."""
    tag = uuid.uuid4().hex[:8]
    return dataclasses.replace(WORD_COUNTS, name=f"t{tag}_counts", topic=f"t{tag}.words")


def produce_counts(bootstrap: str, view: View, rows: Iterable[CountRow]) -> dict[int, int]:
    """Write changelog records as the pipeline does; returns records per partition."""
    producer = Producer(_PRODUCER | {"bootstrap.servers": bootstrap})
    written: dict[int, int] = {}
    for row in rows:
        partition = partition_for(row.key, P)
        producer.produce(
            view.changelog_topic, key=row.key.encode(), value=encode_count(row), partition=partition
        )
        written[partition] = written.get(partition, 0) + 1
    assert producer.flush(15) == 0, "changelog records not delivered"
    return written


def produce_changelog(
    bootstrap: str, view: View, records: Iterable[tuple[bytes, bytes | None, int]]
) -> dict[int, int]:
    """Write (record key, value or None for a tombstone, partition) records in order;
    returns records per partition."""
    producer = Producer(_PRODUCER | {"bootstrap.servers": bootstrap})
    written: dict[int, int] = {}
    for key, value, partition in records:
        producer.produce(view.changelog_topic, key=key, value=value, partition=partition)
        written[partition] = written.get(partition, 0) + 1
    assert producer.flush(15) == 0, "changelog records not delivered"
    return written


def produce_raw(bootstrap: str, view: View, partition: int, value: bytes) -> None:
    """One changelog record with an arbitrary value, e.g. one the node cannot decode."""
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(view.changelog_topic, key=b"raw", value=value, partition=partition)
    assert producer.flush(15) == 0


def node_config(
    bootstrap: str, tmp_path: Path, node_id: str, group: str, **extra: str
) -> NodeConfig:
    env = {
        "STATEFED_BOOTSTRAP": bootstrap,
        "STATEFED_NODE_ID": node_id,
        "STATEFED_NODE_PORT": str(free_port()),
        "STATEFED_STATE_DIR": str(tmp_path / node_id),
        "STATEFED_GROUP_ID": group,
        "STATEFED_HEARTBEAT_MS": "250",
        **extra,
    }
    return NodeConfig.from_env(env)


class ThreadNode:
    """A node app under real uvicorn (uvloop, httptools) in a thread of the test process."""

    def __init__(self, config: NodeConfig, catalogue: Iterable[View], clock: Clock = wall_clock_ms):
        self.config = config
        self.app = NodeApp(config, catalogue, clock=clock)
        self.server = NodeServer(self.app, freeze_gc=False)
        # daemon: a node a failed test could not stop must not keep pytest from exiting
        self.thread = threading.Thread(
            target=self.server.run, name=f"uvicorn-{config.node_id}", daemon=True
        )
        self.client = httpx.Client(base_url=config.url, timeout=5, verify=client_tls())

    def start(self) -> ThreadNode:
        self.thread.start()
        wait_until(lambda: self.server.started or not self.thread.is_alive(), 30, "uvicorn", 0.1)
        assert self.server.started, f"node {self.config.node_id} failed to start"
        return self

    def stop(self) -> None:
        """Stop the node. Safe to call again (a `with` block's end may follow a stop) and on a
        node that never started (its thread cannot be joined, its client is still closed)."""
        self.client.close()
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(30)
        assert not self.thread.is_alive(), f"node {self.config.node_id} did not stop"

    def __enter__(self) -> ThreadNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def health(self) -> dict[str, Any]:
        return health(self.client)

    def query(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.client.post("/graphql", json={"query": query, "variables": variables})
        assert response.status_code == 200, response.text
        document: dict[str, Any] = response.json()
        return document

    def counts(self, words: list[str]) -> dict[str, int | None]:
        document = self.query(
            "query($ws: [String!]!) { wordCounts(words: $ws) { word count } }", {"ws": words}
        )
        assert "errors" not in document, document
        rows = document["data"]["wordCounts"]
        return {w: (row["count"] if row else None) for w, row in zip(words, rows, strict=True)}


def health(client: httpx.Client) -> dict[str, Any]:
    response = client.get("/health")
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def settled(
    healths: Iterable[dict[str, Any]], partitions: int, every_node_active: bool = True
) -> bool:
    """Whether a group's nodes (their /health documents) have settled: all RUNNING, every
    partition active on exactly one of them, each of them active for some (unless not
    `every_node_active`: more nodes than partitions), and no copy restoring. Answers then
    name ACTIVE copies only, whatever held them before."""
    found = list(healths)
    if not found or any(h.get("state") != "RUNNING" for h in found):
        return False
    actives = sorted(p for h in found for p in h["active"])
    if actives != list(range(partitions)):
        return False
    if every_node_active and any(not h["active"] for h in found):
        return False
    return not any(c["restoring"] for h in found for c in h["partitions"])


_RUN_NODE = """
import dataclasses, os, sys
from node.config import NodeConfig
from node.serve.server import run_node
from schema import WORD_COUNTS
view = dataclasses.replace(WORD_COUNTS, name=sys.argv[1], topic=sys.argv[2])
run_node(NodeConfig.from_env(os.environ), catalogue=(view,))
"""


def spawn_node(config: NodeConfig, view: View, log_path: Path) -> subprocess.Popen[bytes]:
    """`run_node(config)` serving `view` in a child process, as the CLI would run it."""
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "STATEFED_BOOTSTRAP": config.bootstrap,
        "STATEFED_NODE_ID": config.node_id,
        "STATEFED_NODE_PORT": str(config.port),
        "STATEFED_STATE_DIR": str(config.state_dir),
        "STATEFED_GROUP_ID": config.group_id,
        "STATEFED_HEARTBEAT_MS": str(config.heartbeat_ms),
        "STATEFED_STANDBY_REPLICAS": str(config.standby_replicas),
    }
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-c", _RUN_NODE, view.name, view.topic],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
