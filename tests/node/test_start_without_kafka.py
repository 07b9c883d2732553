"""`statefed node` with no Kafka at its bootstrap servers: it exits with one line that
says what to check, not a traceback (nothing listens at the port given)."""

from __future__ import annotations

import os
from pathlib import Path

from tooling.broker import free_port
from tooling.processes import ManagedProcess, wait_until


def test_a_node_that_reaches_no_kafka_says_what_to_check_in_one_line(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"  # refused
    env = {
        **os.environ,
        "STATEFED_BOOTSTRAP": bootstrap,
        "STATEFED_NODE_ID": "n1",
        "STATEFED_NODE_PORT": str(free_port()),
        "STATEFED_STATE_DIR": str(tmp_path / "state"),
        "STATEFED_LOG_FORMAT": "text",
    }
    node = ManagedProcess("node n1", ["node"], env, tmp_path / "node.log").start()
    try:
        # the metadata request gives up in 10 s
        wait_until(lambda: not node.running(), 60, "the node to exit")
        output = node.log_of_this_run()
    finally:
        node.stop()
    assert node.returncode != 0, output
    failed = [line for line in output.splitlines() if "node n1 failed to start" in line]
    assert len(failed) == 1, output
    assert f"node n1 failed to start: no metadata from Kafka at {bootstrap}" in failed[0]
    assert f"check STATEFED_BOOTSTRAP ({bootstrap})" in failed[0]
    assert "Traceback" not in output
