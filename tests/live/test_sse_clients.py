"""GraphQL over SSE at the gateway, driven by the real graphql-sse client in Node, in its
distinct connections mode and in its single connection mode (`singleConnection: true`),
against the gateway app under uvicorn serving the test schema: events stream and complete,
queries answer once, errors before execution reach the subscriber, stopping a subscription
stops its source, tokens are checked (a subscription ends when its token expires), the
per-connection limit holds."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from gateway.auth.bearer import SUBSCRIPTION_EXPIRED
from gateway.config import GatewayConfig
from tests.live.clients import Step, run
from tests.live.serving import running_sources, served
from tests.live.tokens import new_issuer

MODES = pytest.mark.parametrize("single", [False, True], ids=["distinct", "single"])
ISSUER = "https://issuer.test/"
AUDIENCE = "statefed-gateway"


@pytest.fixture(scope="module")
def stream() -> Iterator[str]:
    with served(GatewayConfig(max_subscriptions_per_connection=2)) as base:
        yield base + "/graphql/stream"


def values(step: dict[str, Any], field: str) -> list[Any]:
    return [result["data"][field] for result in step["results"]]


@MODES
def test_a_subscription_streams_every_event_then_completes(stream: str, single: bool) -> None:
    steps = [
        Step("subscription($n: Int!) { countdown(start: $n) }", {"n": 3}),
        Step('{ hello(name: "sse") }'),
        Step('mutation { echo(text: "hi") }'),
    ]
    countdown, hello, echo = run("graphql-sse", stream, steps, single_connection=single)["steps"]
    assert values(countdown, "countdown") == [3, 2, 1, 0]
    assert countdown["completed"] and countdown["error"] is None
    assert values(hello, "hello") == ["hello sse"]
    assert values(echo, "echo") == ["hi"]


@MODES
def test_errors_before_execution_reach_the_subscriber(stream: str, single: bool) -> None:
    steps = [Step("subscription { nope }"), Step("subscription { countdown(start: 1) ")]
    invalid, unparsable = run("graphql-sse", stream, steps, single_connection=single)["steps"]
    for step, code in (
        (invalid, "GRAPHQL_VALIDATION_FAILED"),
        (unparsable, "GRAPHQL_PARSE_FAILED"),
    ):
        assert step["completed"] and step["error"] is None
        assert step["results"][0]["errors"][0]["extensions"]["code"] == code


def test_closing_a_distinct_connection_stops_its_source(stream: str) -> None:
    before = running_sources(stream.removesuffix("/graphql/stream"))
    steps = [
        Step("subscription { ticks }", take=3),
        Step("{ running }", until={"running": before}),
    ]
    ticks, running = run("graphql-sse", stream, steps)["steps"]
    assert values(ticks, "ticks") == [0, 1, 2]
    assert values(running, "running") == [before]


def test_delete_stops_one_operation_of_the_single_connection(stream: str) -> None:
    before = running_sources(stream.removesuffix("/graphql/stream"))
    steps = [
        Step("subscription { ticks }", take=1, hold=True),  # keeps the stream open
        Step("subscription { ticks }", take=3),  # then stopped by the client's DELETE
        Step("{ running }", until={"running": before + 1}),
    ]
    held, ticks, running = run("graphql-sse", stream, steps, single_connection=True)["steps"]
    assert values(held, "ticks") == [0] and values(ticks, "ticks") == [0, 1, 2]
    assert values(running, "running") == [before + 1]


def test_the_per_connection_limit_holds_on_a_single_connection(stream: str) -> None:
    held = Step("subscription { ticks }", take=1, hold=True)
    steps = [held, held, Step("subscription { ticks }")]
    _, _, refused = run("graphql-sse", stream, steps, single_connection=True)["steps"]
    (error,) = refused["results"][0]["errors"]
    assert error["extensions"] == {
        "code": "TOO_MANY_SUBSCRIPTIONS",
        "limit": 2,
        "variable": "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS_PER_CONNECTION",
    }


@MODES
def test_the_authorization_header_admits_and_none_is_401(tmp_path: Path, single: bool) -> None:
    secret = os.urandom(32).hex().encode()
    (tmp_path / "secret").write_bytes(secret)
    config = GatewayConfig(
        auth="jwt", jwt_secret_file=tmp_path / "secret", jwt_issuer=ISSUER, jwt_audience=AUDIENCE
    )
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "bob", "iat": now, "exp": now + 300}
    token = jwt.encode(claims, secret, "HS256")
    other = jwt.encode({**claims, "sub": "eve"}, secret, "HS256")
    with served(config) as base:
        url = base + "/graphql/stream"
        whoami = Step("subscription { whoami }")
        (admitted,) = run("graphql-sse", url, [whoami], token=token, single_connection=single)[
            "steps"
        ]
        assert values(admitted, "whoami") == ["bob"]
        (refused,) = run("graphql-sse", url, [whoami], single_connection=single)["steps"]
        assert refused["error"]["status"] == 401 and not refused["results"]
        # a reservation is its principal's: another's token cannot open it or run on it
        reserved = httpx.put(url, headers={"authorization": f"Bearer {token}"}).text
        stolen = {"authorization": f"Bearer {other}", "x-graphql-event-stream-token": reserved}
        assert httpx.get(url, headers={**stolen, "accept": "text/event-stream"}).status_code == 404
        body = {"query": "{ hello }", "extensions": {"operationId": "1"}}
        assert httpx.post(url, json=body, headers=stolen).status_code == 404


@MODES
def test_a_subscription_ends_when_its_token_expires(tmp_path: Path, single: bool) -> None:
    leeway_s = 1
    issuer = new_issuer(tmp_path, jwt_leeway_s=leeway_s)
    # a few seconds: Node must start and connect while the token is still valid
    exp = int(time.time()) + 5
    token = issuer.token(exp=exp)
    with served(issuer.config) as base:
        # `take` only bounds the wait: ticks come at most every 20 ms, so 1000 take 20 s
        steps = [Step("subscription { ticks }", take=1000)]
        (ticks,) = run(
            "graphql-sse", base + "/graphql/stream", steps, token=token, single_connection=single
        )["steps"]
    *events, last = ticks["results"]
    assert events and all(set(event) == {"data"} for event in events)
    assert last == {
        "errors": [{"message": SUBSCRIPTION_EXPIRED, "extensions": {"code": "UNAUTHENTICATED"}}]
    }
    assert ticks["completed"] and ticks["error"] is None
    assert time.time() >= exp + leeway_s
