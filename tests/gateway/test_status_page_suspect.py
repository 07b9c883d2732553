"""The /status page in headless Chromium over fake nodes: a node whose heartbeat is 2.5
intervals behind the other's is alive, but reads avoid it, and the page shows it SUSPECT
(the other RUNNING)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from runtime.clock import wall_clock_ms
from tests.gateway.fakes import WORDS, ServerThread, client_for
from tests.gateway.test_hedging import CopyNode, feed_of
from tests.security.test_status_browser import chromium

__all__ = ["chromium"]  # the fixture, imported for this module's test

TIMEOUT_MS = 15_000


@pytest.fixture
def status_url() -> Iterator[str]:
    """The gateway's /status over n0 (2.5 heartbeats behind) and n1, under uvicorn."""
    nodes = [CopyNode("n0", {0, 1}), CopyNode("n1", {2, 3})]
    upstream = client_for(nodes)
    feed = feed_of(nodes, {"n0": wall_clock_ms() - 2500})
    app = GatewayApp(GatewayConfig(), feed=feed, client=upstream, catalogue=(WORDS,))
    try:
        with ServerThread(app, lifespan="on") as server:
            yield f"{server.url}/status"
    finally:
        asyncio.run(upstream.aclose())


def test_the_status_page_shows_a_node_reads_avoid_as_suspect(
    status_url: str, chromium: Browser
) -> None:  # the gateway set up first, so it stops after the browser
    page = chromium.new_page()
    page.goto(status_url)
    page.wait_for_selector('#nodes tr[data-node="n1"] td.alive', timeout=TIMEOUT_MS)
    assert page.locator('#nodes tr[data-node="n0"] td.suspect').inner_text() == "SUSPECT"
    assert page.locator('#nodes tr[data-node="n1"] td.alive').inner_text() == "RUNNING"
    page.close()
