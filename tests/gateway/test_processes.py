"""The gateway as several worker processes on one port (STATEFED_GATEWAY_PROCESSES), run
as `python -m gateway` over the real broker: both workers answer, `/metrics` answers for
both, and the parent's handle stops them all, also when one of them is lost."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime.topics import ensure_topics, statefed_topics
from schema import CATALOGUE
from tests.security.pems import write_pems
from tooling.broker import KafkaBroker, free_port
from tooling.processes import poll_client, wait_until

REPO = Path(__file__).resolve().parents[2]
VIEWS = {"query": "{ cluster { views { name } } }"}
_REQUESTS = "statefed_gateway_request_duration_seconds"


@contextmanager
def _gateway(
    broker: KafkaBroker, log: Path, port: int, **settings: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m gateway` with two worker processes (and `settings`), stopped (SIGKILL,
    with its workers) if the test left it running."""
    ensure_topics(broker.bootstrap, statefed_topics(4))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "STATEFED_BOOTSTRAP": broker.bootstrap,
        "STATEFED_GATEWAY_PORT": str(port),
        "STATEFED_GATEWAY_PROCESSES": "2",
        **settings,
    }
    with open(log, "wb") as out:
        # a process group of its own: workers that outlive their supervisor (what these
        # tests look for) are stopped with it
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def _per_worker(text: str, root_field: str) -> dict[str, float]:
    """Requests of `root_field` counted by each worker, from a scrape."""
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == f"{_REQUESTS}_count" and s.labels.get("root_field") == root_field:
                counts[s.labels["worker"]] = counts.get(s.labels["worker"], 0.0) + s.value
    return counts


def _wait_for_both_workers(
    url: str, process: subprocess.Popen[bytes], log: Path, verify: ssl.SSLContext | None = None
) -> list[int]:
    """Wait until a scrape shows both workers' series; the workers' pids."""

    def both() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            text = http.get(f"{url}/metrics").text
        except httpx.TransportError:
            return False
        return 'worker="0"' in text and 'worker="1"' in text

    with poll_client(timeout_s=2.0, verify=verify) as http:
        wait_until(both, 60, lambda: f"both workers in /metrics: {log.read_text()[-2000:]}")
    workers = psutil.Process(process.pid).children()
    assert len(workers) == 2
    return [w.pid for w in workers]


def test_two_workers_share_the_port_and_stop_with_the_parent(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    port, log = free_port(), tmp_path / "gateway.log"
    url = f"http://127.0.0.1:{port}"
    with _gateway(broker, log, port) as process:
        pids = _wait_for_both_workers(url, process, log)
        answers = []
        for _ in range(64):  # a connection each: the kernel picks a worker per connection
            with httpx.Client(base_url=url, trust_env=False, timeout=10) as http:
                answers.append(http.post("/graphql", json=VIEWS))
        scrape = httpx.get(f"{url}/metrics", timeout=10).text
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
        stayed = [pid for pid in pids if psutil.pid_exists(pid)]  # before the group is killed
    output = log.read_text()
    assert code == 0, output
    names = [{"name": v.name} for v in CATALOGUE]
    assert all(a.status_code == 200 for a in answers)
    assert all(a.json()["data"]["cluster"]["views"] == names for a in answers)
    counted = _per_worker(scrape, "cluster")
    assert set(counted) == {"0", "1"} and all(n > 0 for n in counted.values()), counted
    assert sum(counted.values()) == 64
    for index in (0, 1):
        assert f"ready on {url}/graphql (worker {index} of 2)" in output
        assert f"stopped (worker {index} of 2)" in output
    assert output.rstrip().endswith("statefed gateway: stopped")
    assert stayed == []


def test_every_worker_serves_https_with_the_gateway_certificate(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    """The certificate applies to the socket each worker binds: a client trusting the CA is
    answered by both workers, and plain HTTP is refused."""
    pems = write_pems(tmp_path)
    trusting = ssl.create_default_context(cafile=str(pems.ca))
    port, log = free_port(), tmp_path / "gateway.log"
    url = f"https://127.0.0.1:{port}"
    tls = {"STATEFED_GATEWAY_TLS_CERT": str(pems.cert), "STATEFED_GATEWAY_TLS_KEY": str(pems.key)}
    with _gateway(broker, log, port, **tls) as process:
        _wait_for_both_workers(url, process, log, trusting)
        answers = []
        for _ in range(32):  # a connection each: the kernel picks a worker per connection
            with poll_client(10, trusting) as http:
                answers.append(http.post(f"{url}/graphql", json=VIEWS).status_code)
        scrape = httpx.get(f"{url}/metrics", verify=trusting, trust_env=False, timeout=10).text
        with pytest.raises(httpx.TransportError):
            httpx.post(f"http://127.0.0.1:{port}/graphql", json=VIEWS, trust_env=False, timeout=10)
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
    assert code == 0, log.read_text()
    assert answers == [200] * 32
    counted = _per_worker(scrape, "cluster")
    assert set(counted) == {"0", "1"} and sum(counted.values()) == 32, counted
    assert f"ready on {url}/graphql (worker 1 of 2)" in log.read_text()


def test_a_lost_worker_stops_the_gateway(broker: KafkaBroker, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "gateway.log"
    with _gateway(broker, log, port) as process:
        pids = _wait_for_both_workers(f"http://127.0.0.1:{port}", process, log)
        os.kill(pids[1], signal.SIGKILL)
        code = process.wait(30)
        stayed = [pid for pid in pids if psutil.pid_exists(pid)]  # before the group is killed
    output = log.read_text()
    assert code == 1, output
    assert f"(pid {pids[1]}) exited with status -9; stopping the others" in output
    assert stayed == []


def test_workers_refuse_a_port_something_answers_on(broker: KafkaBroker, tmp_path: Path) -> None:
    """SO_REUSEPORT would let them join another gateway's workers there."""
    port, log = free_port(), tmp_path / "gateway.log"
    with socket.create_server(("127.0.0.1", port)), _gateway(broker, log, port) as process:
        code = process.wait(30)
    output = log.read_text()
    assert code != 0
    assert "STATEFED_GATEWAY_PORT" in output
    assert f"something already answers on 127.0.0.1:{port}" in output


def test_workers_stop_when_their_supervisor_is_killed(broker: KafkaBroker, tmp_path: Path) -> None:
    """A SIGKILLed supervisor cannot stop its workers: each sees it gone and stops itself,
    and the last one removes the workers' directory the supervisor made."""
    port, log = free_port(), tmp_path / "gateway.log"
    with _gateway(broker, log, port) as process:
        pids = _wait_for_both_workers(f"http://127.0.0.1:{port}", process, log)
        directory = Path(psutil.Process(pids[0]).cmdline()[-1])  # `worker INDEX COUNT DIR`
        assert directory.is_dir()
        process.kill()
        process.wait(10)
        wait_until(
            lambda: not any(_running(pid) for pid in pids),
            30,
            lambda: f"the workers {pids} to stop: {log.read_text()[-2000:]}",
        )
    assert log.read_text().count("is gone; this worker stops") == 2
    assert not directory.exists(), f"{directory} is left: {list(directory.iterdir())}"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
