"""A whole statefed cluster on this machine: Apache Kafka, pipeline, nodes, gateway.

`make demo` and the end-to-end tests both run the system through this one launcher, so
what the tests exercise is what a user starts. Every part is a real process owned by a
handle here; `stop()` stops them all, newest first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Protocol

import httpx

from runtime.kafka import KafkaSettings
from runtime.topics import ensure_topics, statefed_topics
from schema import load_catalogue
from tooling.broker import KafkaBroker, free_port
from tooling.config import ToolingConfig
from tooling.processes import ManagedProcess, poll_client, wait_until

__all__ = ["Broker", "LocalCluster"]

Progress = Callable[[str], None]


class Broker(Protocol):
    """What the cluster needs of a broker it is given: start, stop, and the bootstrap
    servers every part is configured with (`KafkaBroker` is one)."""

    @property
    def bootstrap(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def _quiet(_: str) -> None:
    pass


class LocalCluster:
    """Starts and owns the parts of a local cluster under `base_dir`."""

    def __init__(
        self,
        base_dir: Path,
        partitions: int = 6,
        gateway_port: int = 0,
        env: Mapping[str, str] | None = None,
        progress: Progress = _quiet,
        broker: Broker | None = None,
        broker_port: int = 0,
    ) -> None:
        """`broker`: the broker to start and stop instead of a local Kafka of its own
        (its data under `base_dir/broker/`, on `broker_port`, 0 for a free one); the parts
        reach it with `env`'s Kafka settings (`kafka`)."""
        self.base_dir = base_dir
        self.partitions = partitions
        self.gateway_port = gateway_port or free_port()
        self.progress = progress
        self._base_env = dict(os.environ if env is None else env)
        self._given_broker = broker
        self._broker_port = broker_port
        self.broker: Broker | None = None
        self.pipeline: ManagedProcess | None = None
        self.nodes: dict[str, ManagedProcess] = {}
        self.node_urls: dict[str, str] = {}
        self.gateway: ManagedProcess | None = None

    @property
    def bootstrap(self) -> str:
        if self.broker is None:
            raise RuntimeError("the broker is not started: call start_broker() first")
        return self.broker.bootstrap

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}/graphql"

    @property
    def kafka(self) -> KafkaSettings:
        """The Kafka client settings every part gets: the broker plus `env`'s settings."""
        return ToolingConfig.from_env(self.env()).kafka

    def env(self, **extra: str) -> dict[str, str]:
        env = {**self._base_env, "STATEFED_BOOTSTRAP": self.bootstrap, **extra}
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def start_broker(self) -> None:
        self.progress("broker: starting (Apache Kafka, KRaft)")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.broker = self._given_broker or KafkaBroker(
            port=self._broker_port,
            log_path=self.base_dir / "broker.log",
            data_dir=self.base_dir / "broker",
        )
        self.broker.start()
        catalogue = load_catalogue(ToolingConfig.from_env(self._base_env).catalogue)
        ensure_topics(self.kafka, statefed_topics(self.partitions, catalogue))
        self.progress(f"broker: ready on {self.broker.bootstrap}, {self.partitions} partitions")

    def start_pipeline(self, timeout_s: float = 240.0) -> ManagedProcess:
        self.progress("pipeline: starting Spark (takes 10-30 s)")
        env = self.env(STATEFED_CHECKPOINT_DIR=str(self.base_dir / "checkpoints"))
        process = ManagedProcess("pipeline", ["pipeline"], env, self.base_dir / "pipeline.log")
        self.pipeline = process.start()
        process.wait_for_log("statefed pipeline: ready", timeout_s)
        self.progress("pipeline: ready")
        return process

    def start_node(
        self, node_id: str, timeout_s: float = 60.0, env: Mapping[str, str] | None = None
    ) -> ManagedProcess:
        """Start node `node_id` and wait until it serves; `env` adds to the cluster's
        environment for this node only (an empty value unsets a setting)."""
        self.progress(f"node {node_id}: starting")
        port = free_port()
        env = self.env(
            STATEFED_NODE_ID=node_id,
            STATEFED_NODE_PORT=str(port),
            STATEFED_STATE_DIR=str(self.base_dir / "state" / node_id),
            **(env or {}),
        )
        log = self.base_dir / f"node-{node_id}.log"
        process = ManagedProcess(f"node {node_id}", ["node"], env, log).start()
        self.nodes[node_id] = process
        self.node_urls[node_id] = f"http://127.0.0.1:{port}"
        process.wait_for_http(f"{self.node_urls[node_id]}/health", timeout_s)
        self.progress(f"node {node_id}: serving on {self.node_urls[node_id]}")
        return process

    def start_gateway(self, timeout_s: float = 60.0) -> ManagedProcess:
        self.progress("gateway: starting")
        env = self.env(STATEFED_GATEWAY_PORT=str(self.gateway_port))
        process = ManagedProcess("gateway", ["gateway"], env, self.base_dir / "gateway.log")
        self.gateway = process.start()
        health = f"http://127.0.0.1:{self.gateway_port}/health"
        process.wait_for_http(health, timeout_s)
        self.progress(f"gateway: serving on {self.gateway_url}")
        return process

    def wait_routable(self, timeout_s: float = 90.0) -> None:
        """Wait until the gateway routes every partition to a live node."""
        health = f"http://127.0.0.1:{self.gateway_port}/health"

        def all_routable() -> bool:
            # another process answering on a port the gateway could not bind never routes
            assert self.gateway is not None, "start_gateway() first"
            self.gateway.check_alive()
            try:
                body = http.get(health).json()
            except (httpx.HTTPError, ValueError):
                return False
            return len(body.get("routable", [])) == self.partitions

        self.progress("cluster: waiting until every partition has a live owner")
        with poll_client(timeout_s=2.0) as http:
            wait_until(all_routable, timeout_s, f"all {self.partitions} partitions routable")
        self.progress("cluster: every partition is served")

    def start_all(self, node_ids: tuple[str, ...] = ("n1", "n2")) -> None:
        self.start_broker()
        for node_id in node_ids:
            self.start_node(node_id)
        self.start_gateway()
        self.start_pipeline()
        self.wait_routable()

    def stop(self) -> list[str]:
        """Stop every part, newest first; returns what was stopped (a part that had exited
        on its own says so). A Ctrl-C meanwhile kills the parts left instead of waiting for
        their clean stop, and a part that fails to stop is killed: every part is ended (a
        broker interrupted while it stops is left to end with this process, by the
        parent-death signal)."""
        stopped: list[str] = []
        parts = [self.gateway, *reversed(self.nodes.values()), self.pipeline]
        hurry = False
        for part in parts:
            if part is None:
                continue
            code = part.returncode
            try:
                part.kill() if hurry else part.stop()  # also closes an exited part's log
            except KeyboardInterrupt:
                hurry = True
                part.kill()
            except Exception as exc:  # a part stuck past its stop's waits: killed
                self.progress(f"{part.name}: did not stop ({exc}); killing it")
                part.kill()
            stopped.append(part.name if code is None else f"{part.name} (had exited: {code})")
        if self.broker is not None:
            try:
                self.broker.stop()
                stopped.append("broker")
            except KeyboardInterrupt:
                stopped.append("broker (interrupted: it ends with this process)")
            self.broker = None
        return stopped

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
