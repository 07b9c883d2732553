"""`statefed gateway` in a terminal: Ctrl-C (SIGINT) stops it cleanly, exit status 0 and
no traceback, and its ready and stopped lines are log lines (JSON in JSON mode), the Kafka
clients' lines too.

The gateway runs as a process with Kafka refused (nothing listens at its bootstrap): it
serves /health regardless, which is all these tests need.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tooling.broker import free_port
from tooling.processes import poll_client, wait_until

REPO = Path(__file__).resolve().parents[2]


def _interrupted_gateway(tmp_path: Path, log_format: str, logged: str = "") -> tuple[int, str, int]:
    """Start `statefed gateway`, wait for /health (and for `logged` in its log), send
    SIGINT; its exit status, its stderr and its port."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "STATEFED_BOOTSTRAP": f"127.0.0.1:{free_port()}",  # refused: no Kafka needed
        "STATEFED_GATEWAY_PORT": str(port),
        "STATEFED_LOG_FORMAT": log_format,
        "STATEFED_LOG_LEVEL": "info",
    }
    env.pop("STATEFED_GATEWAY_LOG_LEVEL", None)
    log = tmp_path / "gateway.log"
    with open(log, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tooling.cli", "gateway"],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:

        def healthy() -> bool:
            assert process.poll() is None, f"the gateway exited:\n{log.read_text()}"
            try:
                url = f"http://127.0.0.1:{port}/health"
                return http.get(url).status_code == 200
            except httpx.TransportError:
                return False

        with poll_client(timeout_s=1.0) as http:
            wait_until(healthy, 60, "the gateway to answer /health", 0.1)
        wait_until(lambda: logged in log.read_text(), 60, f"{logged!r} in the gateway's log")
        process.send_signal(signal.SIGINT)
        code = process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    return code, log.read_text(), port


def test_ctrl_c_stops_the_gateway_cleanly_with_its_lines_in_text(tmp_path: Path) -> None:
    code, output, port = _interrupted_gateway(tmp_path, "text")
    assert code == 0, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    assert f"statefed gateway: ready on http://127.0.0.1:{port}/graphql" in output
    assert "INFO gateway.edge.server: statefed gateway: stopped" in output
    assert "INFO uvicorn: Finished server process" in output  # not `uvicorn.error`
    assert "uvicorn.error" not in output


def test_ctrl_c_stops_the_gateway_cleanly_with_every_line_json(tmp_path: Path) -> None:
    # the Kafka clients' lines (here: Kafka refused) come when a reader gives up, in 10 s
    code, output, port = _interrupted_gateway(tmp_path, "json", '"logger":"runtime.kafka"')
    assert code == 0, output
    lines = [json.loads(line) for line in output.splitlines()]  # not librdkafka's `%3|...`
    messages = [(line["logger"], line["message"]) for line in lines]
    refused = [m for logger, m in messages if logger == "runtime.kafka" and "refused" in m]
    assert 1 <= len(refused) <= 2, refused  # held back: it was hundreds in 10 s
    url = f"http://127.0.0.1:{port}/graphql"
    assert ("gateway.edge.server", f"statefed gateway: ready on {url}") in messages
    assert ("gateway.edge.server", "statefed gateway: stopped") in messages
    assert {logger for logger, _ in messages} >= {"uvicorn"}
    assert "uvicorn.error" not in {logger for logger, _ in messages}
    assert not any("exception" in line for line in lines), output
