"""Apache Kafka on this machine: one KRaft broker, or a cluster of several, from its jars.

`make kafka` copies the pinned Kafka jars into `.cache/kafka/<version>/` with Maven (the
list is `tooling/kafka/pom.xml`). `KafkaBroker` formats a data directory and runs one JVM
that is both broker and KRaft controller (no ZooKeeper) on loopback ports with a small
heap; `KafkaCluster` runs several, each a voter of one controller quorum, for the tests
that need replication. Each is owned by its handle: `with KafkaBroker() as b:`. A broker's
client listener can speak TLS or SASL (`protocol`, with its keystore and JAAS in
`settings`), as the Kafka TLS tests ask; the controller listener is always PLAINTEXT.

This is what `statefed broker`, `make demo`, the tests and the bench run; production
points `STATEFED_BOOTSTRAP` at its own Kafka, and nothing else in statefed knows which
broker it talks to.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from confluent_kafka.admin import AdminClient

from tooling.java import JavaNotFound, find_java, jvm_options
from tooling.processes import die_with_parent

__all__ = [
    "KAFKA_VERSION",
    "BrokerStartError",
    "KafkaBroker",
    "KafkaCluster",
    "free_port",
    "kafka_jars",
]

# Security protocols of the client listener, which is named for its protocol
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# The pinned Kafka (with tooling/kafka/pom.xml): 4.x runs KRaft only.
KAFKA_VERSION = "4.1.1"
_REPOSITORY = Path(__file__).resolve().parent.parent
HEAP = "-Xmx512m"

# Broker settings of a local, loopback-only Kafka. Only what differs from Kafka's own
# defaults for a small machine and quick tests; everything else is as Kafka ships it.
LOCAL_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",  # a new group starts at once
    "offsets.topic.num.partitions": "5",  # Kafka's 50 cost seconds at the first group
    "transaction.state.log.num.partitions": "5",
    "auto.create.topics.enable": "false",  # statefed creates its topics; a typo is an error
    # one broker holds every replica (a KafkaCluster raises these to its size)
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


class BrokerStartError(RuntimeError):
    """Kafka could not be started; the message names the cause and the fix."""


# The lowest port free_port() picks: above the registered ports most services use.
_LOWEST_PICKED = 10_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_GIVEN: set[int] = set()  # the ports free_port() gave in this process
_GIVEN_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on `host` a moment ago, for a part to bind soon after.

    Picked at random below the kernel's range of ephemeral ports where there is room:
    a port bind(0) gives is from that range, where any outgoing connection (a Kafka
    client's, say) or another process's bind(0) may take it in the seconds before the
    part binds it. Seen in a clean clone's run: a gateway's port taken by a node of the
    other worker's cluster, whose /health then answered for it.

    A port this process was given before is never given again: parts pick their ports
    before any of them binds, and two random picks can meet (seen: a cluster's gateway
    picked its broker's port, and polled the broker for its health)."""
    room = _ephemeral_low() - _LOWEST_PICKED
    with _GIVEN_LOCK:
        for _ in range(100 if room > 0 else 0):
            port = _LOWEST_PICKED + secrets.randbelow(room)
            if port not in _GIVEN and _bindable(host, port):
                _GIVEN.add(port)
                return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        _GIVEN.add(port)
        return port


def _ephemeral_low() -> int:
    """The lowest ephemeral port (Linux's ip_local_port_range; 32768 where unreadable)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def kafka_jars(environ: Mapping[str, str] = os.environ) -> Path:
    """The directory of Kafka's jars: `STATEFED_BROKER_JARS`, or the checkout's cache."""
    configured = environ.get("STATEFED_BROKER_JARS")
    jars = Path(configured) if configured else _REPOSITORY / ".cache" / "kafka" / KAFKA_VERSION
    if not any(jars.glob("kafka_2.13-*.jar")):
        where = "STATEFED_BROKER_JARS" if configured else "the checkout's cache"
        raise BrokerStartError(
            f"Apache Kafka's jars are not in {jars} ({where}): run `make kafka` (it copies "
            f"Kafka {KAFKA_VERSION} there with Maven), or point STATEFED_BROKER_JARS at a "
            "directory holding kafka_2.13-*.jar and its dependencies"
        )
    return jars


def _java() -> str:
    try:
        return find_java("Apache Kafka")
    except JavaNotFound as exc:
        raise BrokerStartError(str(exc)) from None


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka's own ids never start with a dash
            return text


_BIND_TRIES = 3
_BIND_FAILED = "Address already in use"  # what Kafka logs when a listener cannot bind
_TAIL_BYTES = 2_000


def _check_free(host: str, port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise BrokerStartError(
                f"Kafka's {what} port {host}:{port} is taken ({exc.strerror}): stop what "
                "listens there, or choose another port (STATEFED_BROKER_PORT for "
                "`statefed broker`)"
            ) from exc


class KafkaBroker:
    """One Kafka JVM on loopback ports, owned by this handle: broker and KRaft controller.

    `data_dir` keeps its log directory (a restart keeps every topic); without one, a
    temporary directory is made and removed on `stop`. `node_id`, `voters` and `cluster_id`
    make it a member of a `KafkaCluster`. `settings` are broker properties over the local
    defaults. `protocol` is what the one client listener (also the inter-broker one) speaks;
    its TLS and SASL settings go in `settings` (ssl.keystore.*, sasl.enabled.mechanisms, the
    JAAS), and `client` holds the librdkafka settings the readiness check connects with.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
        data_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        node_id: int = 1,
        controller_port: int = 0,
        voters: str | None = None,
        cluster_id: str | None = None,
        protocol: str = "PLAINTEXT",
        client: Mapping[str, str] | None = None,
    ) -> None:
        if protocol not in _PROTOCOLS:
            raise ValueError(
                f"listener protocol {protocol!r} is not one of {', '.join(_PROTOCOLS)}"
            )
        self.host = host
        # ports picked here, not given: a start that finds one taken since picks others
        self._picked_ports = not port and not controller_port and voters is None
        self.port = port or free_port(host)
        self.controller_port = controller_port or free_port(host)
        self.node_id = node_id
        self._given_voters = voters
        self.cluster_id = cluster_id or _cluster_id()
        self.log_path = log_path
        self.settings = dict(settings or {})
        self.protocol = protocol
        self.client = dict(client or {})
        self._given_dir = data_dir
        self._temp_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        self._output_from = 0  # where the output of the last launch starts in output_path

    @property
    def voters(self) -> str:
        """The KRaft controller quorum: as given, else this broker alone."""
        return self._given_voters or f"{self.node_id}@{self.host}:{self.controller_port}"

    @property
    def bootstrap(self) -> str:
        """Where the broker listens for clients."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        if self._given_dir is not None:
            return self._given_dir
        if self._temp_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix=f"statefed-kafka-{self.node_id}-"))
        return self._temp_dir

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def properties(self) -> dict[str, str]:
        """The broker's `server.properties`."""
        listener = f"{self.protocol}://{self.host}:{self.port}"
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"{listener},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": listener,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": self.protocol,
            "listener.security.protocol.map": (
                f"CONTROLLER:PLAINTEXT,{self.protocol}:{self.protocol}"
            ),
            "log.dirs": str(self.data_dir / "log"),
            **LOCAL_SETTINGS,
            **self.settings,
        }

    def start(self, timeout_s: float = 60.0) -> None:
        """Format the data directory (once), start the JVM and wait until it serves.

        Ports this handle picked were free when picked, but another process can bind one
        before the JVM does (two test workers, or a client's ephemeral port): a start that
        fails to bind is tried again on new ports, up to `_BIND_TRIES` times."""
        for tries_left in range(_BIND_TRIES - 1, -1, -1):
            self.launch()
            try:
                self.wait_ready(timeout_s)
                return
            except BrokerStartError:
                if not (self._picked_ports and tries_left and _BIND_FAILED in self._output()):
                    raise
            self.port, self.controller_port = free_port(self.host), free_port(self.host)

    def launch(self) -> None:
        """Format the data directory (once) and start the JVM, without waiting for it."""
        if self.running:
            return
        _check_free(self.host, self.port, "client")
        _check_free(self.host, self.controller_port, "controller")
        config = self._write_config()
        if not (self.data_dir / "log" / "meta.properties").exists():
            self._format(config)
        if self._log is None:
            self._log = open(self.output_path, "ab")  # noqa: SIM115 - closed in stop()
        self._output_from = self._log.tell()  # this start's output follows
        self._process = subprocess.Popen(
            [*self._jvm(), "kafka.Kafka", str(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )

    def _jvm(self) -> list[str]:
        log4j = self.data_dir / "log4j2.properties"
        return [
            _java(),
            HEAP,
            "-Xms64m",
            "-XX:+UseSerialGC",  # two cores: no parallel GC threads beside the tests
            "-Djava.awt.headless=true",
            # its temporary files (the compression codecs' native libraries, left at every
            # start) in the data directory, emptied at each start, not the system's
            f"-Djava.io.tmpdir={self.data_dir / 'tmp'}",
            *jvm_options("kafka"),
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{kafka_jars()}/*",
        ]

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.data_dir / "tmp", ignore_errors=True)
        (self.data_dir / "tmp").mkdir()
        (self.data_dir / "log4j2.properties").write_text(
            "rootLogger.level = WARN\n"
            "rootLogger.appenderRef.stdout.ref = STDOUT\n"
            "appender.stdout.type = Console\n"
            "appender.stdout.name = STDOUT\n"
            "appender.stdout.layout.type = PatternLayout\n"
            "appender.stdout.layout.pattern = [%d] %p %m (%c)%n\n"
            "logger.kafka.name = kafka.server.KafkaServer\n"
            "logger.kafka.level = INFO\n"
        )
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        return config

    def _format(self, config: Path) -> None:
        command = [*self._jvm(), "kafka.tools.StorageTool", "format"]
        command += ["--cluster-id", self.cluster_id, "--config", str(config)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerStartError(
                f"formatting Kafka's data directory {self.data_dir} failed "
                f"(exit {result.returncode}): {(result.stdout + result.stderr).strip()[-2000:]}"
            )

    def wait_ready(self, timeout_s: float = 60.0, brokers: int = 1) -> None:
        """Wait until the broker answers metadata naming `brokers` live brokers."""
        admin = AdminClient({**self.client, "bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            process = self._process
            if process is not None and process.poll() is not None:
                self._close_log()
                raise BrokerStartError(
                    f"Kafka exited with code {process.returncode} while starting on "
                    f"{self.bootstrap}{self._log_hint()}"
                )
            try:
                if len(admin.list_topics(timeout=1).brokers) >= brokers:
                    return
            except Exception:  # not up yet: poll again until the deadline
                pass
            time.sleep(0.1)
        hint = self._log_hint()  # before stop removes a temporary data directory
        self.stop()
        raise BrokerStartError(f"Kafka on {self.bootstrap} was not ready in {timeout_s} s{hint}")

    @property
    def output_path(self) -> Path:
        """Where the JVM's output goes: `log_path`, else a file in the data directory."""
        return self.log_path if self.log_path is not None else self.data_dir / "kafka.log"

    def _output(self) -> str:
        """The end of what the JVM wrote since the last launch."""
        try:
            with open(self.output_path, "rb") as output:
                output.seek(self._output_from)
                return output.read()[-_TAIL_BYTES:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _log_hint(self) -> str:
        # quoted: a temporary data directory, and the output in it, goes with the broker
        seen = f" (see {self.log_path})" if self.log_path is not None else ""
        output = self._output()
        return f"{seen}; the end of its output:\n{output}" if output else seen

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def exited(self) -> str | None:
        """None while the broker runs (or was never started); once it exited on its own,
        what to tell its user: the exit code and the end of its output."""
        process = self._process
        if process is None or process.poll() is None:
            return None
        return f"Kafka on {self.bootstrap} exited with code {process.returncode}{self._log_hint()}"

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open and nothing answers, like a
        broker host that hangs. `resume()` undoes it; a paused broker is resumed on `stop`."""
        os.kill(self._running().pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Let a `pause`d broker run again (SIGCONT)."""
        os.kill(self._running().pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as a crash: the data directory stays, and `start()` brings it back."""
        process = self._running()
        process.kill()
        process.wait(10)

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError(f"the Kafka broker on {self.bootstrap} is not running")
        return self._process

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after `timeout_s`. A broker on a temporary
        data directory is SIGKILLed at once (nothing of it is kept) and the directory
        removed."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGCONT)  # a paused broker cannot act on SIGTERM
            if self._temp_dir is not None:
                self._process.kill()
            else:
                self._process.terminate()
            try:
                self._process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout_s)
        self._close_log()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class KafkaCluster:
    """`size` Kafka brokers on loopback, each a KRaft controller voter, owned by this
    handle. `brokers[i]` can be killed, paused and started again on its own."""

    def __init__(
        self,
        size: int = 3,
        log_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        controller_ports = [free_port(host) for _ in range(size)]
        voters = ",".join(f"{i + 1}@{host}:{p}" for i, p in enumerate(controller_ports))
        replicated = {
            "offsets.topic.replication.factor": str(min(size, 3)),
            "transaction.state.log.replication.factor": str(min(size, 3)),
            "transaction.state.log.min.isr": str(min(size, 2)),
            "default.replication.factor": str(min(size, 3)),
        }
        cluster_id = _cluster_id()
        self.brokers: list[KafkaBroker] = [
            KafkaBroker(
                host=host,
                node_id=i + 1,
                controller_port=port,
                voters=voters,
                cluster_id=cluster_id,
                settings={**replicated, **(settings or {})},
                log_path=None if log_dir is None else log_dir / f"kafka-{i + 1}.log",
            )
            for i, port in enumerate(controller_ports)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self, timeout_s: float = 90.0) -> None:
        """Start every broker together (the quorum needs a majority) and wait for all."""
        try:
            for broker in self.brokers:
                broker.launch()
            for broker in self.brokers:
                broker.wait_ready(timeout_s, brokers=len(self.brokers))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
