"""`statefed init`, then the steps of the README it writes, run as a newcomer runs them
(the virtualenv's `statefed` and `python` on the PATH, nothing else set): the views of
their own answer with the orders their producer wrote.

The project's demo serves the README's fixed places (port 8100, Kafka on 9092), so it
cannot run beside another demo; its state is under the project's `.statefed/`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.newcomer.shell import Output, demo_places, readme_blocks, start, stop
from tooling.processes import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

BIN = Path(sys.executable).parent  # the virtualenv's, as `source .venv/bin/activate` gives
START_S = 480.0  # the demo: broker, Spark pipeline, nodes, gateway
STOP_S = 120.0
STEP_S = 60.0  # the producer, or one curl
ANSWER_S = 120.0  # the orders to reach the view through the pipeline


def _init(project: Path) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "statefed"), "init", str(project)]
    return subprocess.run(command, capture_output=True, text=True, timeout=STEP_S)


def _run(script: str, project: Path) -> str:
    """One step's block, as one bash script; its output (it must succeed)."""
    with start(["bash", "-e", "-o", "pipefail", "-c", script], project, BIN) as process:
        try:
            text, _ = process.communicate(timeout=STEP_S)
        finally:
            stop(process, signal.SIGKILL, 10.0)
    assert process.returncode == 0, f"{script}\nexited {process.returncode}:\n{text}"
    return text


def _top(answer: str) -> list[dict[str, Any]] | None:
    """The top customers of a curl's answer, or None while it has none."""
    try:
        body = json.loads(answer)
    except ValueError:
        return None
    rows = (body.get("data") or {}).get("topCustomers")
    return rows if rows and "errors" not in body else None


def test_init_then_the_steps_it_gives_serve_a_view_of_your_own(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    made = _init(project)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "produce.py", "views.py"]
    again = _init(project)
    assert again.returncode == 1 and "overwrites nothing" in again.stderr, again.stderr

    run, produce, ask = (b.text for b in readme_blocks((project / "README.md").read_text()))
    with demo_places(), start(["bash", "-c", run], project, BIN) as demo:
        assert demo.stdout is not None
        output = Output(demo.stdout)
        try:
            wait_until(
                lambda: any(line.startswith("GraphiQL: ") for line in output.lines),
                START_S,
                lambda: f"the project's demo to print the GraphiQL URL:\n{output.tail()}",
                1.0,
            )
            assert "1000 orders produced to topic orders" in _run(produce, project)
            rows = wait_until(
                lambda: _top(_run(ask, project)), ANSWER_S, "the top customers to answer", 1.0
            )
        finally:
            stopped = stop(demo, signal.SIGINT, STOP_S)
            output.finish()
    assert stopped, f"the demo outlived Ctrl-C by {STOP_S} s:\n{output.tail()}"
    counts = [row["count"] for row in rows]
    assert len(rows) == 3 and counts == sorted(counts, reverse=True) and counts[-1] > 0, rows
    assert all(row["customer"].startswith("customer-") for row in rows), rows
