"""The local Apache Kafka (`tooling.broker`, `statefed broker`): it keeps its data where
it is told to, and a start that cannot work names the cause and the fix."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from confluent_kafka.admin import AdminClient

from runtime.topics import ensure_topics
from tests.classdata import assert_maps_its_archive
from tooling.broker import BrokerStartError, KafkaBroker, free_port
from tooling.cli import main
from tooling.processes import wait_until


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_taken_port_names_the_port_and_the_setting(taken_port: int) -> None:
    broker = KafkaBroker(port=taken_port)
    with pytest.raises(BrokerStartError, match=rf"port 127.0.0.1:{taken_port} is taken"):
        broker.start()
    with pytest.raises(BrokerStartError, match="STATEFED_BROKER_PORT"):
        broker.start()
    assert not broker.running


def test_a_picked_port_taken_before_kafka_binds_it_is_traded_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process can bind a port between its check and the JVM's bind (two test
    workers, a client's ephemeral port): the broker starts on ports picked anew."""
    monkeypatch.setattr("tooling.broker._check_free", lambda host, port, what: None)
    broker = KafkaBroker()
    first = broker.port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", first))
        sock.listen()
        with broker:
            assert broker.port != first
            assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)


def test_a_given_port_taken_before_kafka_binds_it_fails_quoting_kafka(
    monkeypatch: pytest.MonkeyPatch, taken_port: int
) -> None:
    monkeypatch.setattr("tooling.broker._check_free", lambda host, port, what: None)
    broker = KafkaBroker(port=taken_port)
    with pytest.raises(BrokerStartError, match=r"the end of its output:(?s:.)*already in use"):
        broker.start()
    broker.stop()
    assert not broker.running


def test_no_java_names_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(BrokerStartError, match=r"no `java` on the PATH .*Kafka needs Java 17"):
        KafkaBroker(data_dir=tmp_path / "kafka").start()


def test_the_jvm_runs_with_the_options_of_statefed_jvm_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = ["-XX:TieredStopAtLevel=1", "-Dstatefed.test=two words"]
    monkeypatch.setenv(
        "STATEFED_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 '-Dstatefed.test=two words'"
    )
    with KafkaBroker() as broker:
        assert broker.pid is not None
        arguments = Path(f"/proc/{broker.pid}/cmdline").read_bytes().decode().split("\0")
        assert all(option in arguments for option in options), arguments


def test_the_jvm_maps_the_class_data_archive_make_install_wrote() -> None:
    with KafkaBroker() as broker:
        assert broker.pid is not None
        assert_maps_its_archive("kafka", broker.pid)


def test_missing_jars_name_the_make_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STATEFED_BROKER_JARS", str(tmp_path))
    with pytest.raises(BrokerStartError, match=r"not in .* run `make kafka`"):
        KafkaBroker(data_dir=tmp_path / "kafka").start()


def test_the_command_says_why_it_did_not_start(taken_port: int, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tooling.cli", "broker", "--port", str(taken_port)]
    command += ["--dir", str(tmp_path / "kafka")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert f"statefed broker: Kafka's client port 127.0.0.1:{taken_port} is taken" in (
        result.stderr
    )


def test_a_broker_on_a_data_directory_keeps_its_topics_across_a_restart(
    tmp_path: Path,
) -> None:
    data = tmp_path / "kafka"
    broker = KafkaBroker(port=free_port(), data_dir=data, log_path=tmp_path / "kafka.log")
    with broker:
        ensure_topics(broker.bootstrap, {"kept": 2})
    assert (data / "log" / "meta.properties").exists()
    with broker:  # the same ports and directory, started again: not formatted anew
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert len(topics.topics["kept"].partitions) == 2


def _command(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`statefed broker` started on a free port and a directory of `tmp_path`, and the file
    its stderr goes to; the caller stops it."""
    command = [sys.executable, "-m", "tooling.cli", "broker", "--port", str(free_port())]
    command += ["--dir", str(tmp_path / "kafka")]
    output = tmp_path / "stderr.txt"
    with output.open("w") as stderr:
        return subprocess.Popen(command, stderr=stderr), output


def test_the_command_exits_naming_the_code_when_its_kafka_dies(tmp_path: Path) -> None:
    """`statefed broker` serves until Ctrl-C: a Kafka that dies meanwhile (killed, out of
    memory) ends it with status 1 and the end of Kafka's output, not a silent wait."""
    process, output = _command(tmp_path)
    try:
        wait_until(lambda: "ready" in output.read_text(), 90, f"statefed broker ({output})")
        (kafka,) = psutil.Process(process.pid).children()
        kafka.kill()
        process.wait(30)
    finally:
        process.kill()
        process.wait(10)
    said = output.read_text()
    assert process.returncode == 1, said
    assert "statefed broker: Kafka on 127.0.0.1:" in said and " exited with code -9" in said


@pytest.mark.parametrize("host", ["0.0.0.0", "10.9.9.9", "kafka.example"])
def test_the_command_refuses_an_address_beyond_loopback_before_starting(host: str) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["broker", "--host", host, "--port", str(free_port())])
    message = str(refused.value.code)
    assert message.startswith(
        f"statefed broker: --host (STATEFED_BROKER_HOST): must be a loopback address "
        f"(127.0.0.1, ::1 or localhost), got '{host}': the local broker is plaintext"
    )


def test_the_command_names_a_data_directory_it_cannot_make(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as refused:
        main(["broker", "--dir", str(blocker / "kafka"), "--port", str(free_port())])
    assert str(refused.value.code).startswith(
        f"statefed broker: cannot make {blocker / 'kafka'} (Not a directory): choose another "
    )


def test_sigterm_while_the_command_starts_its_kafka_stops_the_jvm_cleanly(tmp_path: Path) -> None:
    """Python's default SIGTERM ended `statefed broker` without its `finally`, so the JVM it
    was starting died by the parent-death signal's SIGKILL (an unclean stop of a data
    directory that is kept); it is now stopped cleanly, and the command exits."""
    process, output = _command(tmp_path)
    try:
        log = tmp_path / "kafka" / "kafka.log"
        wait_until(lambda: log.exists() and log.stat().st_size > 0, 60, "Kafka to start")
        kafka = _jvm_of(process.pid)
        assert kafka is not None and "ready" not in output.read_text()  # still starting
        process.terminate()
        process.wait(60)
    finally:
        process.kill()
        process.wait(10)
    said = output.read_text()
    # its `finally` ran (the JVM stopped by its handle), not Python's default end by SIGTERM
    assert process.returncode == 130 and "statefed broker: interrupted" in said, said
    assert not kafka.is_running() or kafka.status() == psutil.STATUS_ZOMBIE


def _jvm_of(pid: int) -> psutil.Process | None:
    """The Java child of process `pid`, once it runs."""
    children = psutil.Process(pid).children()
    return next((c for c in children if "java" in c.name()), None)
