"""GraphiQL in a real browser, offline: headless Chromium (Debian's /usr/bin/chromium, driven
by Playwright; `make browser` installs it) opens the cluster's gateway, a query is typed and
run, and the answer shown in the page is the count the pipeline computed. Every request
the page makes must go to the loopback gateway; any other is refused and fails the test."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page, Route, sync_playwright

from tests.e2e.conftest import Cluster
from tooling.screenshots import CHROMIUM, FLAGS

WORD = "graphiql-e2e"
QUERY = f'{{ wordCount(word: "{WORD}") {{ word count }} }}'
QUERY_EDITOR = ".graphiql-query-editor .CodeMirror"
RESPONSE = ".graphiql-response .CodeMirror"
TIMEOUT_MS = 30_000


class Recorder:
    """Every request the browser context makes; what is not loopback is aborted."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.refused: list[str] = []
        self.page_errors: list[str] = []

    def route(self, route: Route) -> None:
        url = route.request.url
        self.urls.append(url)
        if urlsplit(url).hostname == "127.0.0.1":
            route.continue_()
        else:
            self.refused.append(url)
            route.abort("addressunreachable")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[tuple[BrowserContext, Recorder]]:
    """A fresh headless Chromium profile under `tmp_path`, closed after the test."""
    if shutil.which("chromium") is None:
        pytest.fail("Debian's chromium is not installed: `make browser` installs it")
    recorder = Recorder()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path / "profile",
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 720},
        )
        try:
            context.route("**/*", recorder.route)
            yield context, recorder
        finally:
            context.close()


def editor_value(page: Page, selector: str) -> str:
    value: str = page.evaluate("s => document.querySelector(s).CodeMirror.getValue()", selector)
    return value


def run_in_graphiql(page: Page, url: str, query: str, operation: str = "query") -> dict[str, Any]:
    """Open GraphiQL, type `query` (an `operation`) into its editor, press run; the response
    it shows."""
    page.goto(url)
    page.wait_for_selector(QUERY_EDITOR, timeout=TIMEOUT_MS)
    page.locator(QUERY_EDITOR).click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")
    page.keyboard.type(query)
    # the editor closes brackets as they are typed; typing the closing ones steps over them
    assert editor_value(page, QUERY_EDITOR) == query
    # GraphiQL parses the editor after typing stops and picks HTTP or WebSocket by the parsed
    # operation: run once it has parsed what was typed
    page.wait_for_function(
        "([s, op]) => document.querySelector(s).CodeMirror.documentAST"
        "?.definitions?.[0]?.operation === op",
        arg=[QUERY_EDITOR, operation],
        timeout=TIMEOUT_MS,
    )
    page.locator(".graphiql-execute-button").click()
    page.wait_for_function(
        "s => document.querySelector(s).CodeMirror.getValue().includes('\"data\"')",
        arg=RESPONSE,
        timeout=TIMEOUT_MS,
    )
    shown: dict[str, Any] = json.loads(editor_value(page, RESPONSE))
    return shown


def test_graphiql_runs_a_typed_query_offline(
    cluster: Cluster, browser: tuple[BrowserContext, Recorder], tmp_path: Path
) -> None:
    cluster.produce([WORD] * 3)
    cluster.wait_counts_equal_truth([WORD])
    expected = cluster.truth[WORD]
    context, recorder = browser
    page = context.pages[0] if context.pages else context.new_page()
    page.on("pageerror", lambda error: recorder.page_errors.append(str(error)))

    shown = run_in_graphiql(page, cluster.local.gateway_url, QUERY)

    assert shown["data"] == {"wordCount": {"word": WORD, "count": expected}}, shown
    assert "errors" not in shown
    rendered = page.locator(RESPONSE).inner_text()  # what a person sees, not only the model
    assert f'"count": {expected}' in rendered, rendered
    screenshot = tmp_path / "graphiql.png"
    page.screenshot(path=screenshot)
    assert screenshot.read_bytes().startswith(b"\x89PNG")
    assert recorder.page_errors == []
    assert recorder.refused == [], f"GraphiQL reached beyond loopback: {recorder.refused}"
    hosts = {urlsplit(url).hostname for url in recorder.urls}
    assert hosts == {"127.0.0.1"}, recorder.urls
    paths = {urlsplit(url).path for url in recorder.urls}
    assert {"/graphql", "/static/graphiql.min.js", "/static/graphiql.min.css"} <= paths


LIVE_WORD = "graphiql-live"
SUBSCRIPTION = f'subscription {{ wordCount(word: "{LIVE_WORD}") {{ word count offset }} }}'


def shows_count(page: Page, count: int) -> None:
    """Wait until GraphiQL's response pane shows `count` for LIVE_WORD."""
    page.wait_for_function(
        '([s, c]) => document.querySelector(s).CodeMirror.getValue().includes(`"count": ${c}`)',
        arg=[RESPONSE, count],
        timeout=TIMEOUT_MS,
    )


def test_graphiql_runs_a_subscription_and_the_value_moves_after_a_produce(
    cluster: Cluster, browser: tuple[BrowserContext, Recorder], tmp_path: Path
) -> None:
    cluster.produce([LIVE_WORD] * 2)
    cluster.wait_counts_equal_truth([LIVE_WORD])
    context, recorder = browser
    page = context.pages[0] if context.pages else context.new_page()
    page.on("pageerror", lambda error: recorder.page_errors.append(str(error)))
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))

    first = run_in_graphiql(page, cluster.local.gateway_url, SUBSCRIPTION, "subscription")
    assert first["data"]["wordCount"]["count"] == cluster.truth[LIVE_WORD], first
    cluster.produce([LIVE_WORD])
    shows_count(page, cluster.truth[LIVE_WORD])  # pushed, not asked again

    moved: dict[str, Any] = json.loads(editor_value(page, RESPONSE))
    assert moved["data"]["wordCount"]["word"] == LIVE_WORD, moved
    # offsets are Longs: strings of decimal digits
    offsets = (int(first["data"]["wordCount"]["offset"]), int(moved["data"]["wordCount"]["offset"]))
    assert offsets[1] > offsets[0], (first, moved)
    rendered = page.locator(RESPONSE).inner_text()
    assert f'"count": {cluster.truth[LIVE_WORD]}' in rendered, rendered
    screenshot = tmp_path / "graphiql-subscription.png"
    page.screenshot(path=screenshot)
    assert screenshot.read_bytes().startswith(b"\x89PNG")
    assert recorder.page_errors == []
    assert recorder.refused == [], f"GraphiQL reached beyond loopback: {recorder.refused}"
    # the subscription ran over the gateway's own WebSocket, not by polling /graphql
    gateway = urlsplit(cluster.local.gateway_url)
    assert [urlsplit(url)[1:3] for url in sockets] == [(gateway.netloc, gateway.path)], sockets
