"""The embedded broker reachable only through TLS, for the Kafka TLS test.

tansu listens on a loopback port no part is told about and advertises the address of a
TLS-terminating socat in front of it, so a client that follows the broker's metadata
comes back through TLS too (tansu's own `--cert` never completed a handshake here). The
certificates come from a throwaway CA (trustme): the server's names 127.0.0.1 and
localhost. `make socat` installs socat.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import BinaryIO

import psutil
import trustme
from confluent_kafka.admin import AdminClient

from runtime.kafka import KafkaProperties, KafkaSettings
from runtime.topics import admin_config
from tooling.broker import KafkaBroker, free_port
from tooling.processes import die_with_parent, wait_until

__all__ = ["TlsBroker", "client_groups"]


class TlsBroker:
    """tansu behind socat, both owned by this handle; `bootstrap` is the TLS address."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.ca = directory / "ca.pem"
        self._server_pem = directory / "server.pem"  # key and certificate, for socat
        self.broker = KafkaBroker(log_path=directory / "broker.log", advertised=self.bootstrap)
        self._proxy: subprocess.Popen[bytes] | None = None
        self._proxy_log: BinaryIO | None = None

    @property
    def bootstrap(self) -> str:
        """The TLS address: the one every client is given, and the broker advertises."""
        return f"127.0.0.1:{self.port}"

    @property
    def proxy_pid(self) -> int:
        """socat's pid, which is also its process group (its forks serve the connections)."""
        if self._proxy is None:
            raise RuntimeError("the TLS proxy is not started: call start() first")
        return self._proxy.pid

    def client_env(self) -> dict[str, str]:
        """The variables that make a part's Kafka clients speak TLS to this broker."""
        return {
            "STATEFED_KAFKA_SECURITY_PROTOCOL": "SSL",
            "STATEFED_KAFKA_SSL_CA_LOCATION": str(self.ca),
        }

    def settings(self) -> KafkaSettings:
        return KafkaSettings(self.bootstrap, KafkaProperties.from_env(self.client_env()))

    def start(self, timeout_s: float = 30.0) -> None:
        self._write_certificates()
        self.broker.start(timeout_s)
        self._proxy_log = open(self.directory / "socat.log", "ab")  # noqa: SIM115 - closed in stop()
        listen = (
            f"OPENSSL-LISTEN:{self.port},bind=127.0.0.1,reuseaddr,fork,"
            f"cert={self._server_pem},verify=0"
        )
        self._proxy = subprocess.Popen(
            ["socat", listen, f"TCP:{self.broker.bootstrap}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._proxy_log,
            start_new_session=True,  # its forks share its group, which stop() ends
            preexec_fn=die_with_parent,
        )
        wait_until(self._answers, timeout_s, f"metadata over TLS from {self.bootstrap}")

    def _write_certificates(self) -> None:
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(self.ca))
        server = ca.issue_cert("127.0.0.1", "localhost")
        server.private_key_and_cert_chain_pem.write_to_path(str(self._server_pem))

    def _answers(self) -> bool:
        if self._proxy is not None and self._proxy.poll() is not None:
            raise RuntimeError(
                f"socat exited with code {self._proxy.returncode}; see "
                f"{self.directory / 'socat.log'}"
            )
        admin = AdminClient({**admin_config(self.settings()), "log_level": 0})
        try:
            admin.list_topics(timeout=1)
        except Exception:  # not serving yet: poll again until the deadline
            return False
        return True

    def stop(self) -> None:
        """Stop socat (and its forks), then the broker."""
        proxy = self._proxy
        if proxy is not None and proxy.poll() is None:
            os.killpg(proxy.pid, signal.SIGTERM)  # unreaped, so the group is still socat's
            try:
                proxy.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proxy.pid, signal.SIGKILL)
                proxy.wait(10)
        if self._proxy_log is not None:
            self._proxy_log.close()
            self._proxy_log = None
        self.broker.stop()


def client_groups(port: int) -> set[int]:
    """Process groups of the processes holding an established TCP connection to
    127.0.0.1:`port` (a part's group is its pid: each runs in its own session)."""
    groups = set()
    for connection in psutil.net_connections(kind="tcp"):
        remote = connection.raddr
        if not remote or remote.port != port or connection.status != psutil.CONN_ESTABLISHED:
            continue
        if remote.ip != "127.0.0.1" or connection.pid is None:
            continue
        try:
            groups.add(os.getpgid(connection.pid))
        except ProcessLookupError:  # closed and gone since the listing
            continue
    return groups
