"""The real gateway and a real node speak the same GraphQL over HTTP: the graphql-http audit
suite passes with no failed MUST or SHOULD on both, and both answer the requests the spec
leaves to the server the same way, over loopback HTTP to uvicorn."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest

from runtime.graphql_http import MAX_REQUEST_TARGET_BYTES
from tests.http.audits import failed_audits, run_audits
from tests.http.servers import ServedGateway, ServedNode, served_gateway, served_node
from tooling.broker import KafkaBroker
from tooling.processes import client_tls

pytestmark = pytest.mark.timeout(300)

JSON = {"content-type": "application/json"}
TYPENAME = {"query": "{ __typename }"}


@pytest.fixture(scope="module")
def gateway() -> Iterator[ServedGateway]:
    with served_gateway() as served:
        yield served


@pytest.fixture(scope="module")
def node(broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedNode]:
    with served_node(broker, tmp_path_factory.mktemp("node")) as served:
        yield served


@pytest.fixture(scope="module")
def urls(gateway: ServedGateway, node: ServedNode) -> dict[str, str]:
    return {"gateway": gateway.url, "node": node.url}


def post(url: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(
        url, json=body, headers=headers, trust_env=False, timeout=10, verify=client_tls()
    )


@pytest.mark.parametrize("server", ["gateway", "node"])
def test_the_graphql_over_http_audits_pass(urls: dict[str, str], server: str) -> None:
    results = run_audits(urls[server])
    assert len(results) > 50 and {r["status"] for r in results} <= {"ok", "notice", "warn", "error"}
    assert failed_audits(results) == []


def test_a_post_that_is_not_json_is_refused_unread(
    gateway: ServedGateway, node: ServedNode
) -> None:
    lookup = '{"query": "{ wordCount(word: \\"kafka\\") { count } }"}'
    before = gateway.node.requests, node.registry.reads
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        for url in (gateway.url, node.url):
            headers = {"content-type": content_type}
            refused = httpx.post(url, content=lookup, headers=headers, trust_env=False)
            assert refused.status_code == 415, refused.text
            assert refused.json()["errors"][0]["extensions"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    for url in (gateway.url, node.url):  # no content-type at all
        refused = httpx.post(url, content=lookup.encode(), trust_env=False)
        assert refused.status_code == 415
    assert (gateway.node.requests, node.registry.reads) == before  # nothing was executed
    for url in (gateway.url, node.url):  # the same lookup as JSON is executed
        assert "data" in httpx.post(url, content=lookup, headers=JSON, trust_env=False).json()
    assert gateway.node.requests > before[0] and node.registry.reads > before[1]


def test_several_operations_need_an_operation_name(urls: dict[str, str]) -> None:
    two = "query A { __typename } query B { __typename }"
    for url in urls.values():
        refused = post(url, {"query": two})
        assert refused.status_code == 400
        (error,) = refused.json()["errors"]
        assert error["extensions"] == {"code": "BAD_REQUEST"}
        assert "operationName" in error["message"] and "data" not in refused.json()
        chosen = post(url, {"query": two, "operationName": "B"})
        assert (chosen.status_code, chosen.json()["data"]) == (200, {"__typename": "Query"})


@pytest.mark.parametrize("extensions", ["x", 1, True, [1]])
def test_non_object_extensions_get_the_same_answer_from_both(
    urls: dict[str, str], extensions: Any
) -> None:
    gateway, node = (post(url, {**TYPENAME, "extensions": extensions}) for url in urls.values())
    assert gateway.status_code == node.status_code == 400
    assert gateway.json() == node.json()
    assert gateway.json()["errors"][0]["extensions"] == {"code": "BAD_REQUEST"}
    for url in urls.values():  # null and objects are fine
        for fine in (None, {"any": "thing"}):
            answered = post(url, {**TYPENAME, "extensions": fine})
            assert answered.status_code == 200 and "errors" not in answered.json()


def test_media_types_and_status_codes(urls: dict[str, str]) -> None:
    new = "application/graphql-response+json"
    for url in urls.values():
        invalid = {"query": "{ nope }"}
        as_json = post(url, invalid)
        assert as_json.status_code == 200
        assert as_json.headers["content-type"] == "application/json; charset=utf-8"
        as_new = post(url, invalid, accept=f"{new}, application/json;q=0.9")
        assert as_new.status_code == 400 and "data" not in as_new.json()
        assert as_new.headers["content-type"] == f"{new}; charset=utf-8"
        assert as_new.json()["errors"] == as_json.json()["errors"]
        executed = post(url, TYPENAME, accept=new)
        assert executed.status_code == 200 and "errors" not in executed.json()
        assert executed.json()["extensions"] == {"freshness": []}  # executed: freshness
        assert "extensions" not in as_json.json()  # refused before execution: none
        refused = post(url, TYPENAME, accept="text/html")
        assert refused.status_code == 406
        mutation = httpx.get(url, params={"query": "mutation { __typename }"}, trust_env=False)
        assert (mutation.status_code, mutation.headers["allow"]) == (405, "POST")


def padded_target(url: str, target_bytes: int) -> str:
    """A GET of `{ __typename }` whose request target (path and query) has this length."""
    target = f"{httpx.URL(url).path}?query={quote('{ __typename }')}&pad="
    padded = target + "x" * (target_bytes - len(target))
    assert len(padded) == target_bytes
    return padded


def get_with_target(url: str, target_bytes: int) -> httpx.Response:
    raw_path = padded_target(url, target_bytes).encode()
    return httpx.get(httpx.URL(url).copy_with(raw_path=raw_path), trust_env=False, timeout=10)


def raw_get(url: str, target_bytes: int) -> tuple[bytes, bytes]:
    """Status line and body of a GET sent over a plain socket: httpx refuses to send a URL
    component over 64 KiB, and the server must answer such a request too."""
    parsed = httpx.URL(url)
    request = f"GET {padded_target(url, target_bytes)} HTTP/1.1\r\nHost: {parsed.host}\r\n\r\n"
    with socket.create_connection((parsed.host, parsed.port or 80), timeout=10) as sock:
        with contextlib.suppress(ConnectionResetError):  # it may close before reading all
            sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body


def test_get_requests_up_to_the_parser_limit_are_answered_longer_ones_get_414(
    urls: dict[str, str],
) -> None:
    for url in urls.values():
        longest = get_with_target(url, MAX_REQUEST_TARGET_BYTES)
        assert longest.status_code == 200, longest.text[:200]
        assert longest.json()["data"] == {"__typename": "Query"}
        too_long = get_with_target(url, MAX_REQUEST_TARGET_BYTES + 1)
        assert too_long.status_code == 414
        assert too_long.headers["content-type"] == "application/json; charset=utf-8"
        (error,) = too_long.json()["errors"]
        assert error["extensions"] == {"code": "URI_TOO_LONG"}
        status, body = raw_get(url, 16 * MAX_REQUEST_TARGET_BYTES)
        assert status == b"HTTP/1.1 414 URI Too Long"
        assert orjson.loads(body)["errors"][0]["extensions"] == {"code": "URI_TOO_LONG"}
        after = httpx.get(url, params=TYPENAME, trust_env=False)  # the server is still fine
        assert after.json()["data"] == {"__typename": "Query"}
