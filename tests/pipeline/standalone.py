"""A Spark standalone cluster for tests, run the way Spark users run one: a master and
workers as processes of the pinned pyspark's own `spark-class`, and the pipeline started
with `spark-submit` and statefed's application file (client deploy mode).

Every process is owned by a handle here; `stop()` (or leaving the `with` block, also on a
failure) stops them all, newest first. Each process binds port 0 and the test reads the port
it got from its log: a port chosen in advance can be taken by another process's outgoing
connection during the 10-30 s a JVM takes to bind it on a loaded machine (seen here: Spark
then moves to the next port).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pyspark

from tooling.processes import ManagedProcess, ProcessFailed, poll_client, wait_until

SPARK_HOME = Path(pyspark.__file__).parent
REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


def app_path(env: Mapping[str, str]) -> str:
    """The application file, as a user finds it: `statefed pipeline --print-app-path`."""
    command = [sys.executable, "-m", "tooling.cli", "pipeline", "--print-app-path"]
    return subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout


def logged_port(process: ManagedProcess, service: str, timeout_s: float) -> int:
    """The port Spark's `service` (sparkMaster, MasterUI, SparkUI, ...) of `process` bound."""
    pattern = re.compile(rf"Successfully started service '{service}' on port (\d+)")

    def found() -> int | None:
        _alive(process)
        match = pattern.search(process.log_path.read_text(errors="replace"))
        return int(match.group(1)) if match else None

    return wait_until(found, timeout_s, f"{process.name} to log the port of {service}")


def get_json(url: str, timeout_s: float = 90.0) -> Any:
    """The JSON answer of a Spark web UI; on a loaded machine a JVM may answer after a
    request's timeout, so it is asked again until `timeout_s`."""

    def answered() -> list[Any] | None:
        try:
            response = http.get(url)
        except httpx.HTTPError:
            return None
        return [response.json()] if response.status_code == 200 else None

    with poll_client(timeout_s=10.0) as http:
        return wait_until(answered, timeout_s, f"a JSON answer from {url}")[0]


def _alive(process: ManagedProcess) -> bool:
    if not process.running():
        raise ProcessFailed(f"{process.name} exited; see {process.log_path}:\n{process.log_tail()}")
    return True


class StandaloneSpark:
    """A master and workers on loopback, and the spark-submit processes of the pipeline."""

    def __init__(self, base_dir: Path, env: Mapping[str, str]) -> None:
        self.base_dir = base_dir
        self.port = 0  # known once the master started
        self.webui_port = 0
        python_path = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        # the master, the workers and the executors compile and collect as the driver
        # does (SPARK_SUBMIT_OPTS, which tests/conftest.py sets for quick starts), and
        # keep their temporary files (RocksDB's native library, 15 MB) in the test's
        # directory
        java_tmp = base_dir / "java-tmp"
        java_tmp.mkdir(parents=True, exist_ok=True)
        self.jvm_options = f"{env.get('SPARK_SUBMIT_OPTS', '')} -Djava.io.tmpdir={java_tmp}"
        self.env = {
            **env,
            "SPARK_SUBMIT_OPTS": self.jvm_options,
            "SPARK_DAEMON_JAVA_OPTS": self.jvm_options,
            "SPARK_LOCAL_IP": HOST,
            # shuffle, block manager and RocksDB working files stay in the test's directory
            "SPARK_LOCAL_DIRS": str(base_dir / "local"),
            "SPARK_LOG_DIR": str(base_dir / "logs"),
            # the master's REST submission server would take the fixed port 6066
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            # the driver and the executors' Python workers import this checkout's packages
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": python_path,
            "PYTHONUNBUFFERED": "1",
        }
        self.master: ManagedProcess | None = None
        self.workers: list[ManagedProcess] = []
        self.drivers: list[ManagedProcess] = []

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def state(self) -> dict[str, Any]:
        """The master's view of the cluster (its web UI's JSON)."""
        state: dict[str, Any] = get_json(f"http://{HOST}:{self.webui_port}/json/")
        return state

    def start_master(self, timeout_s: float = 180.0) -> None:
        command = [
            *self._class("org.apache.spark.deploy.master.Master"),
            *("--host", HOST, "--port", "0", "--webui-port", "0"),
        ]
        self.master = master = self._start("spark-master", command)
        self.port = logged_port(master, "sparkMaster", timeout_s)
        self.webui_port = logged_port(master, "MasterUI", timeout_s)
        wait_until(
            lambda: _alive(master) and self.state()["status"] == "ALIVE",
            timeout_s,
            "the Spark master to be ALIVE",
        )

    def start_worker(self, timeout_s: float = 180.0) -> ManagedProcess:
        """A worker with 2 cores and 1 GiB for executors, once the master counts it alive."""
        name = f"spark-worker-{len(self.workers) + 1}"
        known = {w["id"] for w in self.state()["workers"]}
        command = [
            *self._class("org.apache.spark.deploy.worker.Worker"),
            self.url,
            *("--host", HOST, "--port", "0", "--webui-port", "0"),
            *("--cores", "2", "--memory", "1g", "--work-dir", str(self.base_dir / name)),
        ]
        worker = self._start(name, command)
        self.workers.append(worker)

        def registered() -> bool:
            workers = self.state()["workers"]
            return _alive(worker) and any(
                w["id"] not in known and w["state"] == "ALIVE" for w in workers
            )

        wait_until(registered, timeout_s, f"the master to count {name} alive")
        return worker

    def submit(self, options: Sequence[str], env: Mapping[str, str]) -> ManagedProcess:
        """`spark-submit --master <this cluster> <options> <statefed's application file>`, its
        executors started with the driver's JVM options."""
        full_env = {**self.env, **env}
        command = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            *("--master", self.url, "--deploy-mode", "client"),
            *("--conf", f"spark.executor.extraJavaOptions={self.jvm_options}"),
            *options,
            app_path(full_env).strip(),
        ]
        driver = self._start(f"spark-submit-{len(self.drivers) + 1}", command, full_env)
        self.drivers.append(driver)
        return driver

    def stop(self) -> None:
        """Stop every process started, newest first; one that fails to stop does not keep
        the others running."""
        failures: list[Exception] = []
        for process in reversed([*filter(None, [self.master]), *self.workers, *self.drivers]):
            try:
                process.stop()
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    def _class(self, name: str) -> list[str]:
        return [str(SPARK_HOME / "bin" / "spark-class"), name]

    def _start(
        self, name: str, command: list[str], env: Mapping[str, str] | None = None
    ) -> ManagedProcess:
        log = self.base_dir / "logs" / f"{name}.log"
        return ManagedProcess.of_command(name, command, env or self.env, log).start()

    def __enter__(self) -> StandaloneSpark:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
