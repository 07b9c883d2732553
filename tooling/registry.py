"""A Schema Registry on this machine: Apicurio Registry, which speaks Confluent's API.

`make registry` fetches the pinned Apicurio Registry from Maven Central (its ready-to-run
build, `io.apicurio:apicurio-registry-app:<version>:tar.gz:all`) and unpacks it into
`.cache/registry/<version>/`. `SchemaRegistry` runs it as one JVM on a loopback port,
owned by its handle: `with SchemaRegistry() as registry:`. It keeps schemas in memory (a
restart forgets them). Clients speak Confluent's Schema Registry API at `registry.url`
(`/apis/ccompat/v7`): confluent-kafka's `SchemaRegistryClient` and its Avro, Protobuf and
JSON Schema serializers, as they would to Confluent's own.

This is what `statefed registry` and the tests run; production points its clients at its
own registry.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import httpx

from tooling.broker import free_port
from tooling.processes import die_with_parent

__all__ = [
    "REGISTRY_VERSION",
    "RegistryStartError",
    "SchemaRegistry",
    "registry_dir",
    "registry_jar",
]

# The pinned Apicurio Registry (with REGISTRY_VERSION in the Makefile): 3.0.x runs on
# Java 17, 3.3 needs Java 21.
REGISTRY_VERSION = "3.0.9"
_REPOSITORY = Path(__file__).resolve().parent.parent
HEAP = "-Xmx256m"
# Confluent's API, as Apicurio serves it beside its own
CCOMPAT_PATH = "/apis/ccompat/v7"


class RegistryStartError(RuntimeError):
    """The Schema Registry could not be started; the message names the cause and the fix."""


def registry_dir() -> Path:
    """Where `make registry` unpacks Apicurio Registry: the checkout's cache."""
    return _REPOSITORY / ".cache" / "registry" / REGISTRY_VERSION


def registry_jar(directory: Path | None = None) -> Path:
    """Apicurio Registry's runnable jar in `directory` (the checkout's cache by default)."""
    directory = directory or registry_dir()
    jar = directory / f"apicurio-registry-app-{REGISTRY_VERSION}-runner.jar"
    if not jar.is_file():
        raise RegistryStartError(
            f"Apicurio Registry {REGISTRY_VERSION} is not in {directory}: run `make registry` "
            "(it fetches it there from Maven Central)"
        )
    return jar


def _java() -> str:
    """The `java` of JAVA_HOME when it is set, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise RegistryStartError(
                f"JAVA_HOME is {home}, which has no bin/java: point it at a Java 17 or newer, "
                "or unset it to use the `java` on the PATH"
            )
        return str(java)
    found = shutil.which("java")
    if found is None:
        raise RegistryStartError(
            "no `java` on the PATH (and no JAVA_HOME): Apicurio Registry needs Java 17 or "
            "newer (Debian: apt-get install openjdk-17-jre-headless)"
        )
    return found


def _check_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise RegistryStartError(
                f"the Schema Registry's port {host}:{port} is taken ({exc.strerror}): stop "
                "what listens there, or choose another port (STATEFED_REGISTRY_PORT for "
                "`statefed registry`)"
            ) from exc


class SchemaRegistry:
    """One Apicurio Registry JVM on a loopback port, owned by this handle.

    It runs in `work_dir` (the current directory when not given), where Quarkus would read
    a `.env` or `config/application.properties`; `log_path` takes its output. `directory`
    holds the unpacked release (`make registry`'s cache when not given).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
        work_dir: Path | None = None,
        directory: Path | None = None,
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the local Schema Registry listens on loopback only, not {host}")
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.work_dir = work_dir
        self.directory = directory
        self._process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None

    @property
    def url(self) -> str:
        """The base URL of Confluent's API, what clients take as `url`."""
        return f"http://{self.host}:{self.port}{CCOMPAT_PATH}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the JVM and wait until it serves; a start that fails leaves nothing running."""
        self.launch()
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def launch(self) -> None:
        """Start the JVM, without waiting for it."""
        if self.running:
            return
        jar = registry_jar(self.directory)
        _check_free(self.host, self.port)
        command = [*self._jvm(), "-jar", str(jar)]
        if self.log_path is not None and self._log is None:
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(
            command,
            cwd=self.work_dir,
            stdin=subprocess.DEVNULL,
            stdout=self._log if self._log is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )

    def _jvm(self) -> list[str]:
        return [
            _java(),
            HEAP,
            "-Xms64m",
            "-XX:+UseSerialGC",  # two cores: no parallel GC threads beside the tests
            "-Djava.awt.headless=true",
            f"-Dquarkus.http.host={self.host}",
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.http.access-log.enabled=false",
        ]

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until Confluent's API answers: GET /subjects gives 200."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                process = self._process
                if process is not None and process.poll() is not None:
                    self._close_log()
                    raise RegistryStartError(
                        f"Apicurio Registry exited with code {process.returncode} while "
                        f"starting on {self.host}:{self.port}{self._log_hint()}"
                    )
                try:
                    if client.get(f"{self.url}/subjects").status_code == 200:
                        return
                except httpx.HTTPError:  # not up yet: poll again until the deadline
                    pass
                time.sleep(0.1)
        raise RegistryStartError(
            f"Apicurio Registry on {self.host}:{self.port} was not ready in {timeout_s} s"
            f"{self._log_hint()}"
        )

    def _log_hint(self) -> str:
        return f": see {self.log_path}" if self.log_path is not None else ""

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after `timeout_s`."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout_s)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> SchemaRegistry:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
