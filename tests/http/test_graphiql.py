"""GraphiQL 3.9 still runs queries against the gateway's negotiated GraphQL over HTTP: its
fetcher posts JSON accepting `application/json, multipart/mixed` (introspection with the
browser's default `*/*`), and gets `application/json` back. Headless Chromium, as
tests/e2e/test_graphiql.py, but over a gateway with a fake node instead of a cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Request

from tests.e2e.test_graphiql import Recorder, browser, run_in_graphiql
from tests.http.servers import ServedGateway, served_gateway

__all__ = ["browser"]  # the fixture, shared with the end-to-end test


@pytest.fixture
def gateway() -> Iterator[ServedGateway]:
    with served_gateway() as served:
        yield served


def test_graphiql_runs_a_query_and_reads_the_json_answer(
    gateway: ServedGateway, browser: tuple[BrowserContext, Recorder]
) -> None:
    context, recorder = browser
    page = context.pages[0] if context.pages else context.new_page()
    page.on("pageerror", lambda error: recorder.page_errors.append(str(error)))
    finished: list[Request] = []
    page.on("requestfinished", lambda request: finished.append(request))

    shown = run_in_graphiql(page, gateway.url, '{ wordCount(word: "kafka") { word count } }')

    assert shown == {
        "data": {"wordCount": {"word": "kafka", "count": 3}},
        "extensions": shown["extensions"],
    }
    assert recorder.page_errors == []
    posts = [r for r in finished if r.method == "POST"]
    assert posts, "GraphiQL sent no POST"
    for request in posts:
        response = request.response()
        assert request.headers["content-type"] == "application/json"
        assert response is not None and response.status == 200
        assert response.headers["content-type"] == "application/json; charset=utf-8"
    accepts = {request.headers.get("accept") for request in posts}
    assert "application/json, multipart/mixed" in accepts, accepts
