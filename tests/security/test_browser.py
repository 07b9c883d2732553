"""Browser safety: what a page of another origin can make a browser do with the gateway.

CSRF: a request a browser sends without a CORS preflight (a form, a `no-cors` fetch, a
plain GET) never runs a mutation: POST bodies are JSON only, refused before they are read,
and GET runs queries only. CORS: only pages of the allowlist read answers; preflights are
answered with the allowlist's headers. Plain HTTP first, then in headless Chromium with a
real gateway and pages served from two other loopback origins, one of them listed.
Clickjacking: no other origin may frame GraphiQL (`frame-ancestors 'none'`).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from gateway.config import GatewayConfig
from gateway.cors import CorsPolicy
from gateway.edge.app import GatewayApp
from runtime.config import ConfigError
from tests.gateway.fakes import FakeNode, Model, client_for, feed_for
from tests.http.servers import ServedGateway, served_gateway
from tests.security.recording import RecordingProducer
from tooling.screenshots import CHROMIUM, FLAGS

P = 2
LISTED = "http://app.example.test"
MUTATION = 'mutation { produce(topic: "words", key: "csrf") { token } }'
QUERY = '{ wordCount(word: "kafka") { word count } }'


# -- plain HTTP --------------------------------------------------------------------------


@dataclass
class Exchange:
    """One request through the gateway's ASGI app, and whether it read the request body."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    body_read: bool = False


def exchange(
    method: str,
    path: str = "/graphql",
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    query_string: bytes = b"",
    origins: tuple[str, ...] = (LISTED,),
) -> tuple[Exchange, RecordingProducer, FakeNode]:
    """Send one request to a started gateway (produce on, CORS for `origins`) as ASGI."""
    node = FakeNode("n0", Model.of_counts({"kafka": 3}), range(P), P)
    producer = RecordingProducer()
    config = GatewayConfig(produce=True, cors_origins=origins)
    upstream = client_for([node])
    app = GatewayApp(config, feed=feed_for([node], P), client=upstream, producer=producer)
    seen = Exchange()

    async def receive() -> dict[str, Any]:
        seen.body_read = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            seen.status = message["status"]
            for name, value in message["headers"]:
                key = name.decode().lower()
                got = seen.headers.get(key)
                seen.headers[key] = value.decode() if got is None else f"{got}, {value.decode()}"
        else:
            seen.body += message.get("body", b"")

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query_string,
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }

    async def scenario() -> None:
        await app.startup()
        try:
            await app(scope, receive, send)
        finally:
            await app.shutdown()
            await upstream.aclose()

    asyncio.run(scenario())
    return seen, producer, node


def mutation_body() -> bytes:
    return httpx.Request("POST", "http://x", json={"query": MUTATION}).content


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=----x",
        None,
    ],
)
def test_a_post_a_form_could_send_is_refused_before_its_body_is_read(
    content_type: str | None,
) -> None:
    headers = {"origin": "http://evil.test"}
    if content_type is not None:
        headers["content-type"] = content_type
    seen, producer, _ = exchange("POST", headers=headers, body=mutation_body())
    assert seen.status == 415
    assert not seen.body_read
    assert producer.snapshot() == []
    assert b"UNSUPPORTED_MEDIA_TYPE" in seen.body


def test_a_json_post_runs_the_mutation() -> None:  # the one way in, preflighted by browsers
    headers = {"content-type": "application/json"}
    seen, producer, _ = exchange("POST", headers=headers, body=mutation_body())
    assert seen.status == 200 and b'"token"' in seen.body
    assert [r.key for r in producer.snapshot()] == ["csrf"]


@pytest.mark.parametrize("content_type", [None, "application/json"])
def test_a_get_mutation_is_405_and_runs_nothing(content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    query = httpx.QueryParams({"query": MUTATION})
    seen, producer, _ = exchange("GET", headers=headers, query_string=str(query).encode())
    assert seen.status == 405 and seen.headers["allow"] == "POST"
    assert producer.snapshot() == []


@pytest.mark.parametrize("content_type", [None, "application/json", "text/plain"])
def test_a_get_query_runs_whatever_its_content_type(content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    query = httpx.QueryParams({"query": QUERY})
    seen, _, node = exchange("GET", headers=headers, query_string=str(query).encode())
    assert seen.status == 200
    assert b'"count":3' in seen.body
    assert node.requests == 1


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_are_405(method: str) -> None:
    headers = {"content-type": "application/json"}
    seen, producer, _ = exchange(method, headers=headers, body=mutation_body())
    assert seen.status == 405 and not seen.body_read
    assert producer.snapshot() == []


def preflight(
    origin: str, origins: tuple[str, ...] = (LISTED,), path: str = "/graphql"
) -> Exchange:
    headers = {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, authorization",
    }
    return exchange("OPTIONS", path, headers, origins=origins)[0]


def cors_headers(seen: Exchange) -> dict[str, str]:
    return {k: v for k, v in seen.headers.items() if k.startswith("access-control-")}


def test_a_preflight_from_a_listed_origin_is_allowed() -> None:
    seen = preflight(LISTED)
    assert seen.status == 204 and seen.body == b""
    headers = cors_headers(seen)
    assert headers.pop("access-control-allow-origin") == LISTED
    assert headers.pop("access-control-allow-credentials") == "true"
    assert headers.pop("access-control-allow-methods") == "GET, POST, PUT, DELETE"
    assert int(headers.pop("access-control-max-age")) > 0
    allowed = {h.strip() for h in headers.pop("access-control-allow-headers").split(",")}
    assert {
        "content-type",
        "authorization",
        "apollo-require-preflight",
        "x-apollo-operation-name",
        "traceparent",
        "x-graphql-event-stream-token",
    } <= allowed
    assert headers == {}
    assert seen.headers["vary"] == "origin"


@pytest.mark.parametrize(
    "origin", ["http://evil.test", LISTED + ":8080", "https://app.example.test"]
)
def test_a_preflight_from_another_origin_gets_no_cors_headers(origin: str) -> None:
    seen = preflight(origin)
    assert seen.status == 204
    assert cors_headers(seen) == {}
    assert seen.headers["vary"] == "origin"


def test_without_an_allowlist_there_are_no_cors_headers_at_all() -> None:
    seen = preflight(LISTED, origins=())
    assert seen.status == 204 and cors_headers(seen) == {} and "vary" not in seen.headers
    headers = {"origin": LISTED, "content-type": "application/json"}
    answer, _, _ = exchange("POST", headers=headers, body=mutation_body(), origins=())
    assert answer.status == 200 and cors_headers(answer) == {} and "vary" not in answer.headers


@pytest.mark.parametrize("path", ["/graphql", "/health"])
def test_answers_to_a_listed_origin_carry_its_origin(path: str) -> None:
    headers = {"origin": LISTED, "content-type": "application/json"}
    method = "POST" if path == "/graphql" else "GET"
    body = mutation_body() if method == "POST" else b""
    seen, _, _ = exchange(method, path, headers, body)
    assert seen.status == 200
    assert cors_headers(seen) == {
        "access-control-allow-origin": LISTED,
        "access-control-allow-credentials": "true",
        "access-control-expose-headers": "x-request-id",
    }
    assert seen.headers["vary"] == "origin"


def test_answers_to_other_origins_or_none_carry_no_cors_headers() -> None:
    for headers in ({"origin": "http://evil.test"}, {}):
        query = str(httpx.QueryParams({"query": QUERY})).encode()
        seen, _, _ = exchange("GET", headers=headers, query_string=query)
        assert seen.status == 200 and cors_headers(seen) == {}


def test_a_star_allows_any_origin_without_credentials() -> None:
    seen = preflight("http://anyone.test", origins=("*",))
    headers = cors_headers(seen)
    assert headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in headers
    query = str(httpx.QueryParams({"query": QUERY})).encode()
    answer, _, _ = exchange(
        "GET", headers={"origin": "http://x.test"}, query_string=query, origins=("*",)
    )
    assert cors_headers(answer)["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in cors_headers(answer)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("*, https://app.example", "alone"),
        ("https://app.example/", "path"),
        ("https://app.example/graphql", "path"),
        ("app.example", "no origin"),
        ("ftp://app.example", "no origin"),
        ("https://App.Example", "lower case"),
        ("https://app.example:443", "default port"),
        ("https://app.example:x", "port"),
    ],
)
def test_an_allowlist_entry_that_is_no_origin_is_a_config_error(value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match="STATEFED_GATEWAY_CORS_ORIGINS") as raised:
        GatewayConfig.from_env({"STATEFED_GATEWAY_CORS_ORIGINS": value})
    assert problem in str(raised.value)


def test_the_allowlist_is_read_comma_separated() -> None:
    config = GatewayConfig.from_env(
        {"STATEFED_GATEWAY_CORS_ORIGINS": " https://a.example ,http://127.0.0.1:5173,"}
    )
    assert config.cors_origins == ("https://a.example", "http://127.0.0.1:5173")
    assert CorsPolicy(config.cors_origins).listed == {
        b"https://a.example",
        b"http://127.0.0.1:5173",
    }


# -- in a browser ------------------------------------------------------------------------


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        content = b"<!doctype html><title>another origin</title><body></body>"
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def origin_pages() -> Iterator[tuple[str, str]]:
    """Two static sites on loopback ports: (unlisted, listed) origins."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        unlisted, listed = (f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
        yield unlisted, listed
    finally:
        for server, thread in zip(servers, threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join(10)


@pytest.fixture
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Site:
    gateway: ServedGateway
    producer: RecordingProducer
    unlisted: Page
    listed: Page


@pytest.fixture
def gateway(origin_pages: tuple[str, str]) -> Iterator[tuple[ServedGateway, RecordingProducer]]:
    """A gateway (produce on) whose CORS allowlist is the second origin. Set up before the
    browser, so it stops after Playwright's event loop has gone."""
    producer = RecordingProducer()
    config = GatewayConfig(produce=True, cors_origins=(origin_pages[1],))
    with served_gateway(config, producer) as served:
        yield served, producer


@pytest.fixture
def site(
    origin_pages: tuple[str, str],
    gateway: tuple[ServedGateway, RecordingProducer],
    chromium: Browser,
) -> Iterator[Site]:
    context = chromium.new_context()
    try:
        pages = [context.new_page(), context.new_page()]
        for page, origin in zip(pages, origin_pages, strict=True):
            page.goto(origin + "/")
        yield Site(*gateway, pages[0], pages[1])
    finally:
        context.close()


FETCH = """async ([url, init]) => {
  try {
    const response = await fetch(url, init);
    if (response.type === 'opaque') return {opaque: true};
    return {status: response.status, body: await response.json(),
            requestId: response.headers.get('x-request-id')};
  } catch (error) {
    return {error: error.name};
  }
}"""


def fetch(page: Page, url: str, query: str, **init: Any) -> dict[str, Any]:

    init.setdefault("method", "POST")
    init.setdefault("headers", {"content-type": "application/json"})
    init["body"] = json.dumps({"query": query})
    result: dict[str, Any] = page.evaluate(FETCH, [url, init])
    return result


FORM = """([url, name, value]) => {
  const form = document.createElement('form');
  form.method = 'POST';
  form.action = url;
  form.enctype = 'text/plain';
  const input = document.createElement('input');
  input.name = name;
  input.value = value;
  form.appendChild(input);
  document.body.appendChild(form);
  form.submit();
}"""


def test_a_no_cors_text_plain_mutation_from_another_origin_writes_nothing(site: Site) -> None:
    with site.unlisted.expect_response(site.gateway.url) as answered:
        result = fetch(
            site.unlisted,
            site.gateway.url,
            MUTATION,
            mode="no-cors",
            headers={"content-type": "text/plain"},
        )
    assert result == {"opaque": True}  # sent, and the page may not look at the answer
    assert answered.value.status == 415
    assert site.producer.snapshot() == []


def test_a_form_post_from_another_origin_writes_nothing(site: Site) -> None:
    # the text/plain form trick: name={"query":"...","x":" and value="} make a JSON body
    name = '{"query": "mutation { produce(topic: \\"words\\", key: \\"form\\") { token } }", "x": "'
    with site.unlisted.expect_response(site.gateway.url) as answered:
        site.unlisted.evaluate(FORM, [site.gateway.url, name, '"}'])
    assert answered.value.status == 415
    assert answered.value.request.post_data is not None
    assert answered.value.request.post_data.startswith('{"query": "mutation')
    assert site.producer.snapshot() == []


def test_another_origin_cannot_read_answers(site: Site) -> None:
    # a JSON POST needs a preflight the allowlist refuses: it is never sent
    assert fetch(site.unlisted, site.gateway.url, QUERY) == {"error": "TypeError"}
    assert fetch(site.unlisted, site.gateway.url, MUTATION) == {"error": "TypeError"}
    assert site.gateway.node.requests == 0
    assert site.producer.snapshot() == []
    # a simple GET is sent and answered (it changes nothing), but the page cannot read it
    url = f"{site.gateway.url}?{httpx.QueryParams({'query': QUERY})}"
    read = site.unlisted.evaluate(
        "async url => { try { return await (await fetch(url)).text() }"
        " catch (error) { return error.name } }",
        url,
    )
    assert read == "TypeError"


def test_the_listed_origin_reads_answers_and_writes(site: Site) -> None:
    read = fetch(site.listed, site.gateway.url, QUERY, credentials="include")
    assert read["status"] == 200
    assert read["body"]["data"] == {"wordCount": {"word": "kafka", "count": 3}}
    assert read["requestId"]  # exposed to the page, to quote in a bug report
    wrote = fetch(site.listed, site.gateway.url, MUTATION)
    assert wrote["status"] == 200 and wrote["body"]["data"]["produce"]["token"]
    assert [r.key for r in site.producer.snapshot()] == ["csrf"]


FRAME = """url => new Promise(resolve => {
  const frame = document.createElement('iframe');
  frame.onload = () => resolve(null);
  frame.src = url;
  document.body.appendChild(frame);
})"""


def test_another_origin_cannot_frame_graphiql(site: Site) -> None:
    # a hidden frame of GraphiQL would run the mutations its visitor is tricked into clicking
    with site.unlisted.expect_response(site.gateway.url) as answered:
        site.unlisted.evaluate(FRAME, site.gateway.url)
    assert answered.value.status == 200  # served, and the browser would not show it
    (frame,) = site.unlisted.main_frame.child_frames
    assert frame.locator("#graphiql").count() == 0
