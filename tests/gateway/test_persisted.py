"""gateway.execute.persisted on its own: the APQ store, manifests, and how a request's document is
settled (or refused) in APQ and trusted-documents modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from gateway.execute.persisted import DocumentStore, PersistedQueries, TrustedDocuments, sha256_hex
from runtime.config import ConfigError
from runtime.graphql_http import GraphQLRequest, RequestError
from runtime.graphql_http.request import decode_body, decode_query_string

QUERY = "query Top { cluster { nodes { id } } }"
OTHER = "{ cluster { views { name } } }"
MANIFEST = "STATEFED_GATEWAY_TRUSTED_DOCUMENTS"


def _by_hash(digest: str, query: str | None = None, version: Any = 1) -> GraphQLRequest:
    body: dict[str, Any] = {
        "extensions": {"persistedQuery": {"version": version, "sha256Hash": digest}}
    }
    if query is not None:
        body["query"] = query
    return decode_body(json.dumps(body).encode())


def _refusal(persisted: PersistedQueries, request: GraphQLRequest) -> RequestError:
    with pytest.raises(RequestError) as caught:
        persisted.resolve(request)
    return caught.value


def test_sha256_hex_is_the_hash_apollo_clients_send() -> None:
    # the id Apollo's docs give `{__typename}`
    assert sha256_hex("{__typename}") == (
        "ecf4edb46db40b5132295c0291d62fb65d6759a9eedfa4d5d612dd5ec54a6b38"
    )


def test_a_hash_only_request_is_read_from_a_body_and_from_a_query_string() -> None:
    digest = sha256_hex(QUERY)
    assert _by_hash(digest).query == ""
    extensions = json.dumps({"persistedQuery": {"version": 1, "sha256Hash": digest}})
    found = decode_query_string(urlencode({"extensions": extensions}).encode(), "GET")
    assert found is not None and found.query == "" and found.method == "GET"
    assert found.extensions == {"persistedQuery": {"version": 1, "sha256Hash": digest}}
    # extensions without a persisted query still need a document
    with pytest.raises(RequestError, match="no GraphQL document"):
        decode_body(b'{"extensions": {"tracing": true}}')
    with pytest.raises(RequestError, match="no GraphQL document"):
        decode_query_string(urlencode({"extensions": "{}"}).encode(), "GET")
    assert decode_query_string(b"", "GET") is None  # GraphiQL's page


def test_apq_answers_not_found_then_registers_then_runs_the_text_by_hash() -> None:
    persisted = PersistedQueries(1 << 20)
    digest = sha256_hex(QUERY)
    missing = _refusal(persisted, _by_hash(digest))
    assert (missing.status, missing.code, str(missing)) == (
        200,
        "PERSISTED_QUERY_NOT_FOUND",
        "PersistedQueryNotFound",
    )
    assert (b"cache-control", b"private, no-cache, must-revalidate") in missing.headers
    registering = _by_hash(digest, QUERY)
    persisted.resolve(registering)
    assert registering.query == QUERY
    by_hash = _by_hash(digest)
    persisted.resolve(by_hash)
    assert by_hash.query == QUERY
    assert persisted.counts == {"hit": 1, "miss": 1, "registered": 1, "refused": 0}


def test_apq_refuses_a_hash_that_is_not_the_texts_and_remembers_nothing() -> None:
    persisted = PersistedQueries(1 << 20)
    forged = _refusal(persisted, _by_hash(sha256_hex(OTHER), QUERY))
    assert (forged.status, forged.code) == (400, "PERSISTED_QUERY_HASH_MISMATCH")
    assert str(forged).startswith("provided sha does not match query")
    assert _refusal(persisted, _by_hash(sha256_hex(OTHER))).code == "PERSISTED_QUERY_NOT_FOUND"
    assert persisted.store is not None and len(persisted.store) == 0


@pytest.mark.parametrize(
    ("persisted_query", "message"),
    [
        ({"version": 2, "sha256Hash": "ab"}, "Unsupported persisted query version"),
        ({"sha256Hash": "ab"}, "Unsupported persisted query version"),
        ({"version": 1, "sha256Hash": 7}, "must be a string"),
        ({"version": 1}, "must be a string"),
        ("ab", "must be an object"),
    ],
)
def test_a_malformed_persisted_query_is_a_bad_request(persisted_query: Any, message: str) -> None:
    request = decode_body(json.dumps({"extensions": {"persistedQuery": persisted_query}}).encode())
    refused = _refusal(PersistedQueries(1 << 20), request)
    assert (refused.status, refused.code) == (400, "BAD_REQUEST")
    assert message in str(refused)


def test_with_apq_off_a_hash_is_not_supported_and_plain_requests_run() -> None:
    persisted = PersistedQueries(None)
    for request in (_by_hash(sha256_hex(QUERY)), _by_hash(sha256_hex(QUERY), QUERY)):
        refused = _refusal(persisted, request)
        assert (refused.status, refused.code, str(refused)) == (
            200,
            "PERSISTED_QUERY_NOT_SUPPORTED",
            "PersistedQueryNotSupported",
        )
    plain = decode_body(json.dumps({"query": QUERY}).encode())
    persisted.resolve(plain)
    assert plain.query == QUERY


def test_the_store_evicts_the_least_recently_used_texts_past_its_bytes() -> None:
    texts = [f"{{ cluster {{ nodes {{ id }} }} }} # {i}" for i in range(4)]
    one = len(sha256_hex(texts[0])) + len(texts[0]) + 200
    store = DocumentStore(3 * one)
    for text in texts[:3]:
        store.put(sha256_hex(text), text)
    assert store.get(sha256_hex(texts[0])) == texts[0]  # now the most recently used
    store.put(sha256_hex(texts[3]), texts[3])
    assert store.get(sha256_hex(texts[1])) is None  # the least recently used went
    assert [store.get(sha256_hex(t)) for t in (texts[0], texts[2], texts[3])] == [
        texts[0],
        texts[2],
        texts[3],
    ]
    assert (len(store), store.bytes) == (3, 3 * one)
    huge = "#" * (4 * one)
    store.put(sha256_hex(huge), huge)  # larger than the store: not kept, nothing evicted
    assert (len(store), store.get(sha256_hex(huge))) == (3, None)


def _apollo_manifest(*bodies: str) -> dict[str, Any]:
    return {
        "format": "apollo-persisted-query-manifest",
        "version": 1,
        "operations": [
            {"id": sha256_hex(b), "body": b, "name": f"Op{i}", "type": "query"}
            for i, b in enumerate(bodies)
        ],
    }


def _trusted(tmp_path: Path, manifest: dict[str, Any]) -> PersistedQueries:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    persisted = PersistedQueries(1 << 20, path)
    persisted.start()
    return persisted


@pytest.mark.parametrize(
    "manifest",
    [_apollo_manifest(QUERY), {sha256_hex(QUERY): QUERY}],
    ids=["apollo", "map"],
)
def test_trusted_documents_run_by_id_or_by_text_and_refuse_anything_else(
    tmp_path: Path, manifest: dict[str, Any]
) -> None:
    persisted = _trusted(tmp_path, manifest)
    assert persisted.store is None  # nothing is registered in this mode
    by_id = _by_hash(sha256_hex(QUERY))
    persisted.resolve(by_id)
    assert by_id.query == QUERY
    for request in (
        decode_body(json.dumps({"query": QUERY}).encode()),
        _by_hash(sha256_hex(QUERY), QUERY),
    ):
        persisted.resolve(request)
        assert request.query == QUERY
    other = _refusal(persisted, decode_body(json.dumps({"query": OTHER}).encode()))
    assert (other.status, other.code) == (403, "PERSISTED_QUERY_NOT_IN_LIST")
    assert MANIFEST in str(other)
    # registering as APQ would: refused, and still unknown by hash afterwards
    assert _refusal(persisted, _by_hash(sha256_hex(OTHER), OTHER)).status == 403
    unknown = _refusal(persisted, _by_hash(sha256_hex(OTHER)))
    assert (unknown.status, unknown.code) == (404, "PERSISTED_QUERY_NOT_FOUND")
    assert MANIFEST in str(unknown)
    forged = _refusal(persisted, _by_hash(sha256_hex(OTHER), QUERY))
    assert forged.code == "PERSISTED_QUERY_HASH_MISMATCH"
    assert persisted.counts == {"hit": 1, "miss": 1, "registered": 0, "refused": 2}


def test_trusted_ids_need_not_be_sha256_of_the_body(tmp_path: Path) -> None:
    """A map whose ids are another hash (codegen's sha1 option): by id and by text run."""
    persisted = _trusted(tmp_path, {"op-1": QUERY})
    by_id = _by_hash("op-1")
    persisted.resolve(by_id)
    assert by_id.query == QUERY
    named = _by_hash("op-1", QUERY)
    persisted.resolve(named)
    assert named.query == QUERY


@pytest.mark.parametrize("manifest", [False, True], ids=["apq", "trusted"])
def test_a_request_without_query_or_hash_has_no_document(tmp_path: Path, manifest: bool) -> None:
    persisted = _trusted(tmp_path, {"op-1": QUERY}) if manifest else PersistedQueries(1 << 20)
    refused = _refusal(persisted, GraphQLRequest("", extensions={"tracing": True}))
    assert (refused.status, refused.code) == (400, "BAD_REQUEST")
    assert "no GraphQL document" in str(refused)


def test_before_the_manifest_is_read_nothing_runs(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({sha256_hex(QUERY): QUERY}))
    persisted = PersistedQueries(1 << 20, path)
    assert _refusal(persisted, decode_body(json.dumps({"query": QUERY}).encode())).status == 403
    assert _refusal(persisted, _by_hash(sha256_hex(QUERY))).status == 404


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"not json", "is not JSON"),
        (b"[]", "must be a JSON object"),
        (b"{}", "holds no operations"),
        (b'{"abc": 7}', "must map an id to a document's text"),
        (b'{"abc": " "}', "must map an id to a document's text"),
        (b'{"format": "relay", "version": 1, "operations": []}', "is not"),
        (b'{"format": "apollo-persisted-query-manifest", "version": 2}', "version 1"),
        (b'{"format": "apollo-persisted-query-manifest", "version": 1}', "must be a list"),
        (
            b'{"format": "apollo-persisted-query-manifest", "version": 1,'
            b' "operations": [{"id": "a"}]}',
            "needs a string `id` and `body`",
        ),
    ],
)
def test_an_unusable_manifest_names_the_setting(tmp_path: Path, raw: bytes, problem: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(raw)
    with pytest.raises(ConfigError, match=f"^{MANIFEST}: ") as caught:
        TrustedDocuments.load(path)
    assert problem in str(caught.value) and str(path) in str(caught.value)


def test_figures_count_the_outcomes_and_the_store() -> None:
    persisted = PersistedQueries(1 << 20)
    persisted.resolve(_by_hash(sha256_hex(QUERY), QUERY))
    figures = {metric.name: metric for metric in persisted.figures()}
    samples = {
        s.labels["outcome"]: s.value
        for s in figures["statefed_gateway_persisted_queries"].samples
        if s.name.endswith("_total")
    }
    assert samples == {"hit": 0, "miss": 0, "registered": 1, "refused": 0}
    assert figures["statefed_gateway_apq_entries"].samples[0].value == 1
    assert figures["statefed_gateway_apq_bytes"].samples[0].value == 64 + len(QUERY) + 200
