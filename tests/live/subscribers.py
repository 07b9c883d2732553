"""Subscriptions held open by the real Node clients while a test changes the cluster:
`Subscribers` runs `subscribers.mjs` (graphql-ws, Apollo's GraphQLWsLink, graphql-sse in
both modes, pinned by `tests.live.clients`), sends it commands and records every message
the clients receive as it arrives."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from tests.live.clients import install
from tooling.processes import wait_until

__all__ = ["CLIENTS", "Subscribers"]

SCRIPT = Path(__file__).with_name("subscribers.mjs")
CLIENTS = ("graphql-ws", "apollo", "graphql-sse", "graphql-sse-single")


class Subscribers:
    """One Node process holding subscriptions to the gateway at `url` (its /graphql URL)."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log
        self.received: dict[str, list[dict[str, Any]]] = {}  # id -> its next payloads
        self.errors: dict[str, list[Any]] = {}
        self.completed: set[str] = set()
        self.closes: dict[str, list[Any]] = {}
        self.fatal: list[str] = []
        self.aborted: dict[str, list[Any]] = {}  # errors of subscriptions whose client closed
        self._connection_of: dict[str, str] = {}
        self._closed: set[str] = set()
        self._acks: list[str] = []
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> Subscribers:
        node = shutil.which("node")
        assert node is not None, "Node.js is needed to run the subscription clients"
        self._stderr = self.log.open("w")
        self._process = subprocess.Popen(
            [node, str(SCRIPT), str(install()), self.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        assert self._process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self._process.stdout,))
        self._reader.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        if process.poll() is None:
            try:
                process.stdin.write(json.dumps({"op": "end"}) + "\n")
                process.stdin.flush()
                process.wait(15)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                process.kill()
                process.wait(10)
        if self._reader is not None:
            self._reader.join(10)
        process.stdin.close()
        if process.stdout is not None:
            process.stdout.close()
        self._stderr.close()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            event = json.loads(line)
            with self._lock:
                if "next" in event:
                    self.received.setdefault(event["id"], []).append(event["next"])
                elif "error" in event:
                    closed = self._connection_of.get(event["id"]) in self._closed
                    found = self.aborted if closed else self.errors
                    found.setdefault(event["id"], []).append(event["error"])
                elif "complete" in event:
                    self.completed.add(event["id"])
                elif "closed" in event:
                    self.closes.setdefault(event["connection"], []).append(event["closed"])
                elif "ok" in event:
                    self._acks.append(event["ok"])
                else:
                    self.fatal.append(str(event.get("fatal", event)))

    def _send(self, command: dict[str, Any]) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        with self._lock:
            done = len(self._acks)
        process.stdin.write(json.dumps(command) + "\n")
        process.stdin.flush()

        def carried_out() -> bool:
            assert not self.fatal, self.fatal
            assert process.poll() is None, self.log.read_text()
            return len(self._acks) > done

        wait_until(carried_out, 30, f"the clients to carry out {command['op']}", 0.01)

    def subscribe(
        self,
        ident: str,
        client: str,
        query: str,
        variables: dict[str, Any] | None = None,
        connection: str | None = None,
    ) -> None:
        """Start subscription `ident` with `client` (one of CLIENTS), on `connection` (a
        connection of its own when not named)."""
        with self._lock:
            self._connection_of[ident] = connection or ident
        command = {
            "op": "subscribe",
            "id": ident,
            "client": client,
            "connection": connection or ident,
            "query": query,
            "variables": variables,
        }
        self._send(command)

    def unsubscribe(self, ident: str) -> None:
        self._send({"op": "unsubscribe", "id": ident})

    def close(self, connection: str) -> None:
        """Dispose a connection's client: its WebSocket or event stream closes (what its
        subscriptions are told then goes to `aborted`)."""
        with self._lock:
            self._closed.add(connection)
        self._send({"op": "close", "connection": connection})

    def data(self, ident: str, field: str) -> list[dict[str, Any]]:
        """The `field` of every payload subscription `ident` received, asserting none had
        errors."""
        with self._lock:
            payloads = list(self.received.get(ident, []))
            errors = list(self.errors.get(ident, []))
        assert not errors, (ident, errors)
        assert all("errors" not in p for p in payloads), (ident, payloads)
        return [p["data"][field] for p in payloads]

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
        """Poll `condition` until it holds; fail on a client error or a dead client."""

        def holds() -> bool:
            assert not self.fatal, self.fatal
            assert self._process is not None and self._process.poll() is None, self.log.read_text()
            with self._lock:
                errors = {k: v for k, v in self.errors.items() if v}
            assert not errors, errors
            return condition()

        wait_until(holds, timeout_s, what, 0.05)
