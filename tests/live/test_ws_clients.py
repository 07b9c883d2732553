"""graphql-transport-ws at the gateway, driven by the real clients in Node (graphql-ws and
Apollo Client's GraphQLWsLink) against the gateway app under uvicorn serving the test schema:
subscriptions stream every event and complete, queries and mutations answer once, a client's
`complete` stops the source, the limits refuse one subscription too many, tokens in
connection_init's payload are checked, and a subscription ends when its token expires."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.auth.bearer import SUBSCRIPTION_EXPIRED
from gateway.config import GatewayConfig
from tests.http.servers import served_gateway
from tests.live.clients import Step, run
from tests.live.schema import SECRET_SCOPE
from tests.live.serving import running_sources, served
from tests.live.tokens import Issuer, new_issuer

COUNTDOWN = "subscription($n: Int!) { countdown(start: $n) }"


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/graphql"


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    config = GatewayConfig(max_subscriptions_per_connection=2)
    with served(config) as base:
        yield base


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Issuer:
    return new_issuer(tmp_path_factory.mktemp("jwt"))


def values(step: dict[str, Any], field: str) -> list[Any]:
    return [result["data"][field] for result in step["results"]]


@pytest.mark.parametrize("client", ["graphql-ws", "apollo"])
def test_a_subscription_streams_every_event_then_completes(gateway: str, client: str) -> None:
    steps = [
        Step(COUNTDOWN, {"n": 3}),
        Step('{ hello(name: "ws") }'),
    ]
    done = run(client, ws_url(gateway), steps)
    countdown, hello = done["steps"]
    assert values(countdown, "countdown") == [3, 2, 1, 0]
    assert countdown["completed"] and countdown["error"] is None
    assert values(hello, "hello") == ["hello ws"]


def test_mutations_run_over_the_websocket(gateway: str) -> None:
    done = run("graphql-ws", ws_url(gateway), [Step('mutation { echo(text: "hi") }')])
    (echo,) = done["steps"]
    # answered as /graphql answers it, with the gateway's freshness extension
    assert echo["results"] == [{"data": {"echo": "hi"}, "extensions": {"freshness": []}}]
    assert echo["completed"]


@pytest.mark.parametrize("client", ["graphql-ws", "apollo"])
def test_a_clients_complete_stops_the_source(gateway: str, client: str) -> None:
    before = running_sources(gateway)
    steps = [
        Step("subscription { ticks }", take=3),
        Step("{ running }", until={"running": before}),
    ]
    done = run(client, ws_url(gateway), steps)
    ticks, running = done["steps"]
    assert values(ticks, "ticks") == [0, 1, 2]
    # asked over the same, still open, connection: the generator ended on `complete`
    assert values(running, "running") == [before]
    assert done["closes"] == [] or all(c["code"] == 1000 for c in done["closes"])


def test_errors_before_execution_are_an_error_message(gateway: str) -> None:
    steps = [
        Step("subscription { nope }"),
        Step("subscription { countdown(start: 1) "),
        Step("{ hello }"),  # the connection stays usable
    ]
    invalid, unparsable, hello = run("graphql-ws", ws_url(gateway), steps)["steps"]
    assert invalid["error"]["graphql"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    assert unparsable["error"]["graphql"][0]["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"
    assert values(hello, "hello") == ["hello world"]


def test_a_subscription_over_the_connection_limit_is_refused(gateway: str) -> None:
    held = Step("subscription { ticks }", take=1, hold=True)
    steps = [held, held, Step("subscription { ticks }"), Step("{ hello }")]
    first, second, refused, hello = run("graphql-ws", ws_url(gateway), steps)["steps"]
    assert values(first, "ticks") == values(second, "ticks") == [0]
    error = refused["error"]["graphql"][0]
    assert error["extensions"] == {
        "code": "TOO_MANY_SUBSCRIPTIONS",
        "limit": 2,
        "variable": "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS_PER_CONNECTION",
    }
    assert values(hello, "hello") == ["hello world"]


def test_the_token_in_connection_init_admits_and_scopes(issuer: Issuer) -> None:
    with served(issuer.config) as base:
        url = ws_url(base)
        steps = [Step("subscription { whoami }"), Step("subscription { secret }")]
        whoami, secret = run("graphql-ws", url, steps, token=issuer.token())["steps"]
        assert values(whoami, "whoami") == ["alice"]
        assert secret["results"][0]["errors"][0]["extensions"]["code"] == "FORBIDDEN"
        scoped = issuer.token(scope=SECRET_SCOPE)
        (secret,) = run("graphql-ws", url, [Step("subscription { secret }")], token=scoped)["steps"]
        assert values(secret, "secret") == ["the secret"]


@pytest.mark.parametrize("client", ["graphql-ws", "apollo"])
def test_no_token_is_4401_and_a_refused_one_4403(issuer: Issuer, client: str) -> None:
    with served(issuer.config) as base:
        url = ws_url(base)
        none = run(client, url, [Step("{ hello }")])
        (close,) = none["closes"]
        assert close["code"] == 4401
        assert "Authorization: Bearer <token> in connection_init" in close["reason"]
        assert none["steps"][0]["error"] is not None and not none["steps"][0]["results"]
        expired = issuer.token(exp=int(time.time()) - 3600)
        refused = run(client, url, [Step("{ hello }")], token=expired)
        assert refused["closes"] == [{"code": 4403, "reason": "Forbidden: the token has expired"}]
        assert refused["steps"][0]["error"] is not None and not refused["steps"][0]["results"]


def test_a_subscription_ends_when_its_token_expires(issuer: Issuer) -> None:
    """The client gets the error and the subscription completes once `exp` and the leeway
    have passed; what the client sends next with that token is refused (4403)."""
    leeway_s = 1
    # a few seconds: Node must start and connect while the token is still valid
    exp = int(time.time()) + 5
    token = issuer.token(exp=exp)
    with served(dataclasses.replace(issuer.config, jwt_leeway_s=leeway_s)) as base:
        # `take` only bounds the wait: ticks come at most every 20 ms, so 1000 take 20 s
        steps = [Step("subscription { ticks }", take=1000), Step("{ hello }")]
        ticks, hello = run("graphql-ws", ws_url(base), steps, token=token)["steps"]
    *events, last = ticks["results"]
    assert events and all(set(event) == {"data"} for event in events)
    assert last == {
        "errors": [{"message": SUBSCRIPTION_EXPIRED, "extensions": {"code": "UNAUTHENTICATED"}}]
    }
    assert ticks["completed"] and ticks["error"] is None
    assert time.time() >= exp + leeway_s
    assert hello["error"] == {"code": 4403, "reason": "Forbidden: the token has expired"}


def test_the_gateways_own_schema_answers_over_the_websocket() -> None:
    """The catalogue's schema, not only the test one: a lookup over the WebSocket reaches the
    (fake) node and answers as /graphql does, freshness included."""
    with served_gateway() as gateway:
        url = gateway.url.replace("http://", "ws://")
        done = run("graphql-ws", url, [Step('{ wordCount(word: "kafka") { count } }')])
    (lookup,) = done["steps"]
    (answer,) = lookup["results"]
    assert answer["data"] == {"wordCount": {"count": 3}}
    assert answer["extensions"]["freshness"][0]["node"] == "n0"
    assert gateway.node.requests >= 1
