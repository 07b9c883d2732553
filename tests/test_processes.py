"""How a test knows a part it started is ready: `ManagedProcess.wait_for_log` waits for a
line of the process's current run (a part restarted on the log of its previous run, as the
pipeline after a SIGKILL, is not ready for what that run wrote), and a cluster's wait for
routable partitions fails at once when its gateway exited."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooling import localcluster
from tooling.processes import ManagedProcess, ProcessFailed, wait_until


def _shell(script: str, log: Path) -> ManagedProcess:
    return ManagedProcess.of_command("part", ["sh", "-c", script], {}, log)


def test_a_restart_on_the_same_log_waits_for_its_own_line(tmp_path: Path) -> None:
    log = tmp_path / "part.log"
    first = _shell("echo 'part: ready'; exec sleep 60", log).start()
    try:
        first.wait_for_log("part: ready", 10)
    finally:
        first.kill()
    second = _shell("exec sleep 60", log).start()
    try:
        with pytest.raises(TimeoutError, match="part: ready"):
            second.wait_for_log("part: ready", 1)
        assert "part: ready" in log.read_text()  # the first run's line is still there
    finally:
        second.kill()
    third = _shell("sleep 0.2; echo 'part: ready'; exec sleep 60", log).start()
    try:
        third.wait_for_log("part: ready", 10)
        assert third.log_of_this_run() == "part: ready\n"
    finally:
        third.kill()


def test_a_cluster_whose_gateway_exited_fails_at_once_naming_it(tmp_path: Path) -> None:
    """LocalCluster waits for every partition to be routable by asking its gateway's port;
    a gateway that died (its port taken, say) fails that wait at once, with its log."""
    # the module, not the class: a test module holding LocalCluster is of the kafka tier
    with localcluster.LocalCluster(tmp_path) as cluster:
        gateway = _shell("echo 'address already in use'; exit 1", tmp_path / "gateway.log")
        cluster.gateway = gateway.start()
        wait_until(lambda: not gateway.running(), 10, "the gateway to exit")
        with pytest.raises(ProcessFailed, match="address already in use"):
            cluster.wait_routable(timeout_s=30)


def test_a_part_that_exited_on_its_own_has_its_children_stopped_with_it(tmp_path: Path) -> None:
    """A part whose own process died (a pipeline's Python OOM-killed) leaves its children
    (Spark's JVM) in its process group: asking whether it runs must not reap it, or its
    stop could no longer name the group, and the children would outlive it."""
    pid_file = tmp_path / "child.pid"
    part = _shell(f"sleep 60 & echo $! > {pid_file}; exit 3", tmp_path / "part.log").start()
    try:
        wait_until(lambda: not part.running(), 10, "the part's own process to exit")
        assert part.returncode == 3
        child = int(pid_file.read_text())
        assert _alive(child)  # still running, in the part's process group
    finally:
        part.stop()
    wait_until(lambda: not _alive(child), 10, "the part's child to be stopped with it")
    assert part.returncode == 3


def _alive(pid: int) -> bool:
    """Whether `pid` runs (not a zombie: an orphan is reaped by init)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


class _InterruptedStop(ManagedProcess):
    """A part whose clean stop is interrupted by a second Ctrl-C."""

    def stop(self, timeout_s: float = 20.0) -> int | None:
        raise KeyboardInterrupt


def test_a_ctrl_c_while_stopping_kills_every_part_left_and_says_which(tmp_path: Path) -> None:
    """The demo's stop (LocalCluster.stop) went no further than a second Ctrl-C: the parts
    after it were left to the parent-death signal, unreported. A part that had exited is
    reported as such."""
    cluster = localcluster.LocalCluster(tmp_path)
    gateway = _InterruptedStop.of_command("gateway", ["sleep", "60"], {}, tmp_path / "g.log")
    cluster.gateway = gateway.start()
    try:
        cluster.nodes = {n: _shell("exec sleep 60", tmp_path / f"{n}.log").start() for n in "ab"}
        pipeline = cluster.pipeline = _shell("exit 3", tmp_path / "pipeline.log").start()
        wait_until(lambda: not pipeline.running(), 10, "the pipeline to exit")
        stopped = cluster.stop()
        assert stopped == ["gateway", "part", "part", "part (had exited: 3)"]
        assert not gateway.running()
        assert not any(part.running() for part in cluster.nodes.values())
    finally:
        for part in (gateway, *cluster.nodes.values()):
            part.kill()
