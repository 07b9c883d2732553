"""A Schema Registry on this machine: Apicurio Registry, which speaks Confluent's API.

`make registry` fetches the pinned Apicurio Registry from Maven Central (its ready-to-run build,
`io.apicurio:apicurio-registry-app:<version>:tar.gz:all`) and unpacks it into
`.cache/registry/<version>/`. `SchemaRegistry` runs it as one JVM on a loopback port, owned by its
handle: `with SchemaRegistry(work_dir) as registry:`. It keeps schemas in memory (a restart forgets
them). Clients speak Confluent's Schema Registry API at `registry.url` (`/apis/ccompat/v7`):
confluent-kafka's `SchemaRegistryClient` and its Avro, Protobuf and JSON Schema serializers, as they
would to Confluent's own.

This is what `statefed registry` and the tests run; production points its clients at its
own registry.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import TracebackType

from runtime.hosts import is_loopback
from tooling.broker import free_port
from tooling.java import JavaNotFound, find_java, jvm_options
from tooling.processes import ManagedProcess, ProcessFailed

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
    try:
        return find_java("Apicurio Registry")
    except JavaNotFound as exc:
        raise RegistryStartError(str(exc)) from None


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

    It runs in `work_dir`, where Quarkus would read a `.env` or
    `config/application.properties`, and logs to `work_dir/registry.log`. `directory`
    holds the unpacked release (`make registry`'s cache when not given).
    """

    def __init__(
        self,
        work_dir: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        directory: Path | None = None,
    ) -> None:
        if not is_loopback(host):
            raise ValueError(f"the local Schema Registry listens on loopback only, not {host}")
        self.host = host
        self.port = port or free_port(host)
        self.work_dir = work_dir
        self.log_path = work_dir / "registry.log"
        self.directory = directory
        self._process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """The base URL of Confluent's API, what clients take as `url`."""
        return f"http://{self.host}:{self.port}{CCOMPAT_PATH}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running()

    def exited(self) -> str | None:
        """None while the registry runs (or was never started); once it exited on its own,
        what to tell its user: the exit code and the end of its log."""
        process = self._process
        if process is None or process.running():
            return None
        return (
            f"Apicurio Registry on {self.host}:{self.port} exited with code "
            f"{process.returncode}; the end of its log {self.log_path}:\n{process.log_tail()}"
        )

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the JVM and wait until Confluent's API answers (GET /subjects gives 200);
        a start that fails leaves nothing running."""
        if self.running:
            return
        jar = registry_jar(self.directory)
        _check_free(self.host, self.port)
        command = [*self._jvm(), "-jar", str(jar)]
        self._process = ManagedProcess.of_command(
            "Apicurio Registry", command, os.environ, self.log_path, cwd=self.work_dir
        ).start()
        try:
            self._process.wait_for_http(f"{self.url}/subjects", timeout_s)
        except (ProcessFailed, TimeoutError) as exc:
            self.stop()
            raise RegistryStartError(
                f"Apicurio Registry on {self.host}:{self.port} did not start: {exc}"
            ) from exc
        except BaseException:
            self.stop()
            raise

    def _jvm(self) -> list[str]:
        return [
            _java(),
            HEAP,
            "-Xms64m",
            "-XX:+UseSerialGC",  # two cores: no parallel GC threads beside the tests
            "-Djava.awt.headless=true",
            *jvm_options("registry"),
            f"-Dquarkus.http.host={self.host}",
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.http.access-log.enabled=false",
        ]

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after `timeout_s`."""
        if self._process is not None:
            self._process.stop(timeout_s)

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
