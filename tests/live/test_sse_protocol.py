"""The GraphQL over SSE protocol's rules at the gateway, request by request with httpx against
the gateway app under uvicorn: reservations and their tokens, refusals of malformed
requests with the right status, the body limit and CSRF rules of `/graphql`, the CORS
preflight of the single connection mode's PUT and DELETE, and subscriptions ended when their
token expires."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.auth.bearer import SUBSCRIPTION_EXPIRED
from gateway.config import GatewayConfig
from tests.live.schema import Flooded, Running
from tests.live.serving import served
from tests.live.tokens import new_issuer
from tooling.processes import wait_until

LISTED = "https://app.example"
STREAM = {"accept": "text/event-stream"}
TOKEN = "x-graphql-event-stream-token"
PATH = "/graphql/stream"
TICKS = "subscription { ticks }"
LEEWAY_S = 1
EXPIRED = {"message": SUBSCRIPTION_EXPIRED, "extensions": {"code": "UNAUTHENTICATED"}}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    config = GatewayConfig(cors_origins=(LISTED,), max_body_bytes=4096)
    with served(config) as base, httpx.Client(base_url=base) as client:
        yield client


def events(body: str) -> list[tuple[str, str]]:
    """(event, data) of an event stream's events; comments left out."""
    found = []
    for block in body.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            fields = dict(line.split(":", 1) for line in lines)
            found.append((fields["event"].strip(), fields.get("data", "").strip()))
    return found


def read_until(chunks: Iterator[str], last: tuple[str, str], within_s: float) -> list[Any]:
    """The payloads of the `next` events read from `chunks` until `last` arrives, which must
    come within `within_s`."""
    deadline = time.monotonic() + within_s
    text = ""
    for chunk in chunks:
        text += chunk
        found = events(text)
        if last in found:
            return [json.loads(data) for kind, data in found if kind == "next"]
        assert time.monotonic() < deadline, f"no {last} within {within_s} s"
    raise AssertionError(f"the stream ended before {last}")


def test_a_get_streams_a_subscription_and_a_mutation_by_get_is_405(http: httpx.Client) -> None:
    answer = http.get(
        PATH, params={"query": "subscription { countdown(start: 1) }"}, headers=STREAM
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert events(answer.text) == [
        ("next", '{"data":{"countdown":1}}'),
        ("next", '{"data":{"countdown":0}}'),
        ("complete", ""),
    ]
    refused = http.get(PATH, params={"query": 'mutation { echo(text: "x") }'}, headers=STREAM)
    assert (refused.status_code, refused.headers["allow"]) == (405, "POST")


def test_posts_follow_the_csrf_and_body_rules_of_graphql(http: httpx.Client) -> None:
    form = http.post(PATH, content=b"query=x", headers={**STREAM, "content-type": "text/plain"})
    assert form.status_code == 415
    big = http.post(PATH, json={"query": "{ hello }", "x": "y" * 5000}, headers=STREAM)
    assert big.status_code == 413
    assert "STATEFED_GATEWAY_MAX_BODY_BYTES" in big.json()["errors"][0]["message"]
    nameless = http.post(PATH, json={"query": "{ a: hello } { b: hello }"}, headers=STREAM)
    assert nameless.status_code == 400


def test_a_reservation_is_opened_once_and_runs_operations_by_id(http: httpx.Client) -> None:
    reserved = http.put(PATH)
    assert reserved.status_code == 201
    token = reserved.text
    assert http.get(PATH, headers={**STREAM, TOKEN: "made-up"}).status_code == 404
    body = {"query": "subscription { countdown(start: 1) }", "extensions": {"operationId": "c"}}
    # sent before the stream is open: refused, it would run with nobody to read it
    early = http.post(PATH, json=body, headers={TOKEN: token})
    assert early.status_code == 409 and "not open" in early.json()["errors"][0]["message"]
    no_id = http.post(PATH, json={"query": "{ hello }"}, headers={TOKEN: token})
    assert no_id.status_code == 400 and "operationId" in no_id.json()["errors"][0]["message"]
    assert http.delete(PATH, headers={TOKEN: token}).status_code == 400  # no operationId
    with http.stream("GET", PATH, params={"token": token}, headers=STREAM) as opened:
        assert opened.status_code == 200
        assert http.get(PATH, headers={**STREAM, TOKEN: token}).status_code == 409
        assert http.post(PATH, json=body, headers={TOKEN: token}).status_code == 202
        assert http.post(PATH, json=body, headers={TOKEN: token}).status_code in (202, 409)
        seen: list[tuple[str, str]] = []
        text = ""
        for chunk in opened.iter_text():
            text += chunk
            seen = events(text)
            if ("complete", '{"id":"c"}') in seen:
                break
    assert seen[:2] == [
        ("next", '{"id":"c","payload":{"data":{"countdown":1}}}'),
        ("next", '{"id":"c","payload":{"data":{"countdown":0}}}'),
    ]
    # the client closed the stream: once the gateway sees it, the reservation is gone (409
    # while it is still open)
    wait_until(
        lambda: http.get(PATH, headers={**STREAM, TOKEN: token}).status_code == 404,
        10,
        "the closed stream's reservation to be forgotten",
    )
    assert http.post(PATH, json=body, headers={TOKEN: token}).status_code == 404


def test_the_single_connection_mode_is_allowed_by_cors_preflights(http: httpx.Client) -> None:
    for method in ("PUT", "DELETE"):
        preflight = http.options(
            PATH,
            headers={
                "origin": LISTED,
                "access-control-request-method": method,
                "access-control-request-headers": f"authorization, {TOKEN}",
            },
        )
        assert preflight.status_code == 204
        assert method in preflight.headers["access-control-allow-methods"]
        assert TOKEN in preflight.headers["access-control-allow-headers"]
    put = http.put(PATH, headers={"origin": LISTED})
    assert put.headers["access-control-allow-origin"] == LISTED


def test_large_events_for_a_client_not_reading_are_held_back_by_their_bytes() -> None:
    """Room for 1,000 events is not room for 1,000 of 256 KiB: the stream's buffer holds
    about 1 MiB, then the source waits."""
    size = 256 * 1024
    query = "subscription($n: Int!) { flood(size: $n) }"
    params = {"query": query, "variables": json.dumps({"n": size})}

    with (
        served(GatewayConfig(live_send_buffer=1000)) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        before = Flooded.events
        with client.stream("GET", PATH, params=params, headers=STREAM) as answer:
            assert answer.status_code == 200
            next(answer.iter_bytes())  # the stream began; nothing more is read
            counts: list[int] = []
            held = wait_until(lambda: Flooded.settled(counts), 30, "the flood to be held back", 0.5)
            # 1 MiB of the stream's buffer and the sockets' buffers
            assert held - before < 100, f"{held - before} events of 256 KiB, none read"
    wait_until(lambda: Running.count == 0, 10, "the flood to stop once its client left")


def test_a_distinct_connections_subscription_ends_when_its_token_expires(tmp_path: Path) -> None:
    issuer = new_issuer(tmp_path, jwt_leeway_s=LEEWAY_S)
    exp = int(time.time()) + 2
    headers = {**STREAM, **issuer.bearer(exp=exp)}
    with (
        served(issuer.config) as base,
        httpx.Client(base_url=base) as http,
        http.stream("GET", PATH, params={"query": TICKS}, headers=headers) as answer,
    ):
        assert answer.status_code == 200
        *ticks, last = read_until(answer.iter_text(), ("complete", ""), 2 + LEEWAY_S + 10)
    assert time.time() >= exp + LEEWAY_S - 0.1  # not before the leeway ran out
    assert ticks and all(set(tick) == {"data"} for tick in ticks)
    assert last == {"errors": [EXPIRED]}


def test_a_token_expiring_beyond_any_clock_streams_as_one_without_expiry(
    tmp_path: Path,
) -> None:
    """PyJWT takes an `exp` of any size; one past what a float holds is no error."""
    issuer = new_issuer(tmp_path, jwt_leeway_s=LEEWAY_S)
    headers = {**STREAM, **issuer.bearer(exp=10**400)}
    query = {"query": "subscription { countdown(start: 1) }"}
    with served(issuer.config) as base, httpx.Client(base_url=base) as http:
        answer = http.get(PATH, params=query, headers=headers)
    assert events(answer.text) == [
        ("next", '{"data":{"countdown":1}}'),
        ("next", '{"data":{"countdown":0}}'),
        ("complete", ""),
    ]


def test_a_single_connections_subscription_ends_when_its_token_expires(tmp_path: Path) -> None:
    """The operation ends; its stream stays open, and runs what is sent with a fresh token."""
    issuer = new_issuer(tmp_path, jwt_leeway_s=LEEWAY_S)
    exp = int(time.time()) + 2
    expiring, fresh = issuer.bearer(exp=exp), issuer.bearer()
    with served(issuer.config) as base, httpx.Client(base_url=base) as http:
        token = http.put(PATH, headers=expiring).text
        with http.stream("GET", PATH, headers={**STREAM, **expiring, TOKEN: token}) as opened:
            chunks = opened.iter_text()
            body = {"query": TICKS, "extensions": {"operationId": "t"}}
            assert http.post(PATH, json=body, headers={**expiring, TOKEN: token}).status_code == 202
            read = read_until(chunks, ("complete", '{"id":"t"}'), 2 + LEEWAY_S + 10)
            assert time.time() >= exp + LEEWAY_S - 0.1  # not before the leeway ran out
            *ticks, last = [payload["payload"] for payload in read]
            assert ticks and all(set(tick) == {"data"} for tick in ticks)
            assert last == {"errors": [EXPIRED]}
            hello = {"query": "{ hello }", "extensions": {"operationId": "h"}}
            assert (
                http.post(PATH, json=hello, headers={**expiring, TOKEN: token}).status_code == 401
            )
            assert http.post(PATH, json=hello, headers={**fresh, TOKEN: token}).status_code == 202
            (answered,) = read_until(chunks, ("complete", '{"id":"h"}'), 10)
            assert answered["payload"]["data"] == {"hello": "hello world"}
