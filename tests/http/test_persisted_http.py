"""Persisted queries over HTTP against a real gateway (uvicorn on loopback, one fake node):
APQ by POST and by GET, the answers Apollo clients expect, CSRF and method rules for
hash-only requests, the metrics, and the trusted-documents mode; and the node's shared
layer, which has no persisted queries, refusing a hash-only request as before."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.execute.persisted import sha256_hex
from runtime.config import ConfigError
from tests.gateway.fakes import FakeNode, Model, client_for, feed_for
from tests.http.persisted import persisted_counts
from tests.http.servers import ServedGateway, served_gateway
from tests.http.test_graphql_http import call
from tests.node.harness import P

LOOKUP = '{ wordCount(word: "kafka") { count } }'
ANSWER = {"wordCount": {"count": 3}}
MUTATION = 'mutation { produce(topic: "t", key: "k", value: {}) { token } }'
UNCACHED = "private, no-cache, must-revalidate"


def _extensions(query: str) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": sha256_hex(query)}}


def post(url: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(url, json=body, headers=headers, trust_env=False)


def get_by_hash(url: str, query: str, **headers: str) -> httpx.Response:
    params = {"extensions": json.dumps(_extensions(query))}
    return httpx.get(url, params=params, headers=headers, trust_env=False)


@pytest.fixture(scope="module")
def gateway() -> Iterator[ServedGateway]:
    with served_gateway() as served:
        yield served


def test_apq_not_found_then_registered_then_answered_by_post_and_get(
    gateway: ServedGateway,
) -> None:
    url, query = gateway.url, LOOKUP + " # apq round trip"
    before = gateway.node.requests
    missing = post(url, {"extensions": _extensions(query)})
    assert missing.status_code == 200 and missing.headers["cache-control"] == UNCACHED
    assert missing.json() == {
        "errors": [
            {
                "message": "PersistedQueryNotFound",
                "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"},
            }
        ]
    }
    assert gateway.node.requests == before  # refused before any planning
    registered = post(url, {"query": query, "extensions": _extensions(query)})
    assert registered.status_code == 200 and registered.json()["data"] == ANSWER
    by_post = post(url, {"extensions": _extensions(query)})
    assert by_post.json()["data"] == ANSWER
    accept = "application/graphql-response+json, application/json;q=0.9"
    by_get = get_by_hash(url, query, accept=accept)
    assert by_get.status_code == 200 and by_get.json()["data"] == ANSWER
    counts = persisted_counts(url)
    assert counts["miss"] >= 1 and counts["registered"] >= 1 and counts["hit"] >= 2


def test_a_hash_that_is_not_the_texts_is_refused_and_not_registered(
    gateway: ServedGateway,
) -> None:
    query, other = LOOKUP + " # forged", LOOKUP + " # victim"
    forged = post(gateway.url, {"query": query, "extensions": _extensions(other)})
    assert forged.status_code == 400
    assert forged.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_HASH_MISMATCH"
    assert post(gateway.url, {"extensions": _extensions(other)}).json()["errors"][0]["extensions"][
        "code"
    ] == ("PERSISTED_QUERY_NOT_FOUND")


def test_a_mutation_by_hash_is_refused_over_get(gateway: ServedGateway) -> None:
    # registered by POST (the produce mutation is off: the answer is an error, the text kept)
    post(gateway.url, {"query": MUTATION, "extensions": _extensions(MUTATION)})
    refused = get_by_hash(gateway.url, MUTATION)
    assert (refused.status_code, refused.headers["allow"]) == (405, "POST")
    assert refused.json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"


def test_hash_only_requests_follow_the_csrf_rules_of_any_request(gateway: ServedGateway) -> None:
    query = LOOKUP + " # csrf"
    post(gateway.url, {"query": query, "extensions": _extensions(query)})
    body = json.dumps({"extensions": _extensions(query)})
    form = httpx.post(
        gateway.url, content=body, headers={"content-type": "text/plain"}, trust_env=False
    )
    assert form.status_code == 415  # a cross-site form's body is refused unread
    # a plain GET with no custom header is answered, as any GET query (runtime.graphql_http.csrf)
    assert get_by_hash(gateway.url, query).json()["data"] == ANSWER


def test_graphiql_is_still_served_to_a_get_without_query_or_extensions(
    gateway: ServedGateway,
) -> None:
    page = httpx.get(gateway.url, trust_env=False)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_with_apq_off_a_hash_is_not_supported() -> None:
    with served_gateway(GatewayConfig(apq=False)) as served:
        refused = post(served.url, {"query": LOOKUP, "extensions": _extensions(LOOKUP)})
        assert refused.status_code == 200 and refused.headers["cache-control"] == UNCACHED
        assert refused.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_SUPPORTED"
        assert post(served.url, {"query": LOOKUP}).json()["data"] == ANSWER


def test_the_nodes_layer_refuses_a_hash_only_request_as_one_without_a_document() -> None:
    response, toy = call("POST", json={"extensions": _extensions('{ hello(name: "a") }')})
    assert response.status_code == 400 and toy.executed == 0
    assert "no GraphQL document" in response.json()["errors"][0]["message"]


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    manifest = tmp_path_factory.mktemp("trusted") / "manifest.json"
    operations = [{"id": sha256_hex(LOOKUP), "body": LOOKUP, "name": "Lookup", "type": "query"}]
    manifest.write_text(
        json.dumps(
            {"format": "apollo-persisted-query-manifest", "version": 1, "operations": operations}
        )
    )
    config = dataclasses.replace(GatewayConfig(), trusted_documents=manifest)
    with served_gateway(config) as served:
        yield served


def test_trusted_documents_run_only_the_manifest(trusted: ServedGateway) -> None:
    url = trusted.url
    assert post(url, {"extensions": _extensions(LOOKUP)}).json()["data"] == ANSWER
    assert get_by_hash(url, LOOKUP).json()["data"] == ANSWER
    assert post(url, {"query": LOOKUP}).json()["data"] == ANSWER
    before = trusted.node.requests
    for body in (
        {"query": '{ wordCount(word: "spark") { count } }'},
        {"query": "{ __schema { queryType { name } } }"},  # introspection is not exempt
        {"query": LOOKUP + " ", "extensions": _extensions(LOOKUP + " ")},  # no registering
    ):
        refused = post(url, body)
        assert refused.status_code == 403, body
        error = refused.json()["errors"][0]
        assert error["extensions"]["code"] == "PERSISTED_QUERY_NOT_IN_LIST"
        assert "STATEFED_GATEWAY_TRUSTED_DOCUMENTS" in error["message"]
    unknown = post(url, {"extensions": _extensions(LOOKUP + " ")})
    assert unknown.status_code == 404
    assert unknown.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
    assert trusted.node.requests == before  # nothing refused reached a node
    page = httpx.get(url, trust_env=False)  # the page is served; it runs only the manifest
    assert page.status_code == 200
    counts = persisted_counts(url)
    assert counts == {"hit": 2.0, "miss": 1.0, "registered": 0.0, "refused": 3.0}


def test_trusted_documents_hold_for_subscriptions_over_sse(trusted: ServedGateway) -> None:
    stream = trusted.url + "/stream"
    query = 'subscription { wordCount(word: "kafka") { count } }'
    refused = httpx.post(
        stream, json={"query": query}, headers={"accept": "text/event-stream"}, trust_env=False
    )
    assert refused.status_code == 403
    assert refused.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_IN_LIST"


def test_a_gateway_with_an_unusable_manifest_does_not_start(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    config = dataclasses.replace(GatewayConfig(), trusted_documents=manifest)
    node = FakeNode("n0", Model.of_counts({"kafka": 3}), range(P), P)
    upstream = client_for([node])
    app = GatewayApp(config, feed=feed_for([node], P), client=upstream)
    with pytest.raises(ConfigError, match=r"^STATEFED_GATEWAY_TRUSTED_DOCUMENTS: .*no operations"):
        asyncio.run(app.startup())  # the manifest is read first: nothing else was opened
    asyncio.run(upstream.aclose())
