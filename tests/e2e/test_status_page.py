"""The gateway's /status page in headless Chromium (as tests/e2e/test_graphiql.py drives it)
over a real cluster: the embedded broker, three node processes with a standby each, the
gateway under uvicorn reading membership and pipeline statuses from Kafka. The page shows
the partition map; after the owner of partition 0 is SIGKILLed it shows that partition
owned by another node without the test reloading it, and a screenshot is kept."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext

from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow, View
from tests.e2e.test_graphiql import Recorder, browser
from tests.gateway.fakes import ServerThread
from tests.node.harness import P, node_config, produce_counts, spawn_node, unique_count_view
from tooling.broker import KafkaBroker

__all__ = ["browser"]  # the fixture, imported for this module's test

pytestmark = pytest.mark.timeout(240)

NODES = 3
# The broker is shared by the session: membership may show other tests' nodes, so the checks
# look at the test's own (`ids`). Settled: each of them alive, and every partition with an
# ACTIVE copy on one of them and a STANDBY copy on one of them.
SETTLED = f"""(ids) => {{
  const mine = (cell) => ids.some((id) => cell.textContent.split(" ").includes(id));
  const rows = [...document.querySelectorAll("#partitions tbody tr")].slice(0, {P});
  return rows.length === {P} && ids.every((id) => {{
      const row = document.querySelector(`#nodes tr[data-node="${{id}}"]`);
      return row && row.querySelector("td.alive") !== null;
    }})
    && rows.every((r) => mine(r.querySelector("td.active")) && mine(r.querySelector("td.standby")));
}}"""
# partition 0 is ACTIVE on another of the test's nodes, and `victim` is shown dead or gone
MOVED = """([victim, ids]) => {
  const owner = document.querySelector('#partitions tr[data-partition="0"] td.active');
  const owners = owner ? owner.textContent.split(" ") : [];
  const dead = document.querySelector(`#nodes tr[data-node="${victim}"]`);
  return !owners.includes(victim) && owners.some((id) => ids.includes(id))
    && (!dead || dead.querySelector("td.dead") !== null);
}"""


@dataclass
class Nodes:
    view: View
    processes: dict[str, subprocess.Popen[bytes]]


@pytest.fixture
def nodes(broker: KafkaBroker, tmp_path: Path) -> Iterator[Nodes]:
    """Three node processes serving a fresh count view, one standby each; killed at the end."""
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    produce_counts(broker.bootstrap, view, [CountRow(f"w{i}", i + 1, 0) for i in range(60)])
    group = f"g-{view.name}"
    running: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for n in range(NODES):
            config = node_config(broker.bootstrap, tmp_path, f"st{n}-{uuid.uuid4().hex[:4]}", group)
            running[config.node_id] = spawn_node(config, view, tmp_path / f"{config.node_id}.log")
        yield Nodes(view, running)
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
            process.wait(10)


def test_the_status_page_shows_the_map_change_after_a_node_is_killed(
    broker: KafkaBroker,
    nodes: Nodes,
    browser: tuple[BrowserContext, Recorder],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    context, recorder = browser
    processes = nodes.processes
    app = GatewayApp(GatewayConfig(bootstrap=broker.bootstrap), catalogue=(nodes.view,))
    with ServerThread(app, lifespan="on") as server:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{server.url}/status")
        ids = list(processes)
        page.wait_for_function(SETTLED, arg=ids, timeout=120_000, polling=200)
        owners = page.locator('#partitions tr[data-partition="0"] td.active').inner_text()
        victim = next(node for node in owners.split(" ") if node in processes)
        processes[victim].send_signal(signal.SIGKILL)
        processes[victim].wait(10)
        page.wait_for_function(MOVED, arg=[victim, ids], timeout=60_000, polling=200)
        owners = page.locator('#partitions tr[data-partition="0"] td.active').inner_text()
        assert victim not in owners.split(" ")
        # the lag chart draws once a lag is known (a line per run of samples, a dot for a
        # run of one): right after the kill, the moved partitions' lag may be unknown
        page.wait_for_function(
            "() => document.querySelectorAll('#lag polyline, #lag circle').length > 0",
            timeout=60_000,
            polling=200,
        )
        screenshot = tmp_path / "status.png"
        page.screenshot(path=str(screenshot), full_page=True)
        record_property("screenshot", str(screenshot))
        print(f"status page screenshot: {screenshot}")
        assert screenshot.stat().st_size > 0
        assert page.locator("#problem").is_hidden()
        page.close()
    assert not errors, errors
    assert not recorder.refused, recorder.refused  # no request left loopback
