"""`ManagedProcess.wait_for_log` waits for a line of the process's current run: a part
restarted on the log of its previous run (the pipeline after a SIGKILL) is not ready for
what that run wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooling.processes import ManagedProcess


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
