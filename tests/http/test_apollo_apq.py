"""Apollo Client's real persisted-queries link (`PersistedQueryLink` over `HttpLink`,
@apollo/client pinned in `tests.live.clients`, Node's crypto for SHA-256) against a real
gateway: the link sends the hash, gets PERSISTED_QUERY_NOT_FOUND, retries with the text,
and the next run of the query is answered by hash alone; with trusted documents the hash
is answered at once and a query outside the manifest fails."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from gateway.execute.persisted import sha256_hex
from tests.http.persisted import persisted_counts, run_link
from tests.http.servers import served_gateway

LOOKUP = 'query Lookup { wordCount(word: "kafka") { count } }'
OTHER = 'query Other { wordCount(word: "spark") { count } }'
ANSWER = {"wordCount": {"__typename": "WordCount", "count": 3}}


@pytest.mark.parametrize("use_get", [True, False], ids=["get", "post"])
def test_the_link_registers_on_not_found_then_queries_by_hash(use_get: bool) -> None:
    with served_gateway() as gateway:
        ran = run_link(gateway.url, [LOOKUP, LOOKUP], use_get)
        counts = persisted_counts(gateway.url)
    assert ran["steps"] == [{"data": ANSWER, "error": None}] * 2
    first, retry, second = ran["requests"]
    hashed = "GET" if use_get else "POST"
    assert (first["method"], first["query"], first["status"]) == (hashed, None, 200)
    assert first["body"]["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
    # the retry carries the text (by POST, as the link always sends texts) with its hash
    assert (retry["method"], retry["status"], retry["body"]["data"]) == ("POST", 200, ANSWER)
    assert retry["hash"] == first["hash"] == sha256_hex(retry["query"])
    assert (second["method"], second["query"], second["hash"]) == (hashed, None, first["hash"])
    assert (second["status"], second["body"]["data"]) == (200, ANSWER)
    assert counts == {"hit": 1.0, "miss": 1.0, "registered": 1.0, "refused": 0.0}


def test_the_link_against_trusted_documents(tmp_path: Path) -> None:
    # the text the link sends (printed, with __typename added) is what a manifest holds
    with served_gateway() as gateway:
        text = run_link(gateway.url, [LOOKUP], True)["requests"][1]["query"]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({sha256_hex(text): text}))
    config = dataclasses.replace(GatewayConfig(), trusted_documents=manifest)
    with served_gateway(config) as gateway:
        ran = run_link(gateway.url, [LOOKUP, OTHER], True)
        counts = persisted_counts(gateway.url)
    answered, refused = ran["steps"]
    assert answered == {"data": ANSWER, "error": None}
    assert refused["data"] is None and "trusted documents" in refused["error"]
    by_hash, unknown, other_text = ran["requests"]
    assert (by_hash["method"], by_hash["query"], by_hash["status"]) == ("GET", None, 200)
    assert (unknown["status"], other_text["status"]) == (404, 403)
    assert counts == {"hit": 1.0, "miss": 1.0, "registered": 0.0, "refused": 1.0}
