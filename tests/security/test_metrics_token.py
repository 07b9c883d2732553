"""`/metrics` of the gateway and the node: open without STATEFED_METRICS_TOKEN_FILE (with
GraphQL authentication on too), and with it only for the file's bearer token, which is read
at start-up; a missing or unusable token file stops start-up naming the variable."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from node.config import NodeConfig
from node.serve.app import NodeApp
from runtime.config import ConfigError
from runtime.metrics import MIN_TOKEN_BYTES, TOKEN_VARIABLE, read_token
from tests.gateway.fakes import running_gateway

TOKEN = "0123456789abcdef" * 4
JWT_SECRET = "s" * 40


def token_file(tmp_path: Path, text: str = TOKEN + "\n") -> Path:
    path = tmp_path / "metrics.token"
    path.write_text(text)
    return path


def jwt_config(tmp_path: Path, **changes: Any) -> GatewayConfig:
    """A gateway with GraphQL authentication on (HS256 JWTs)."""
    secret = tmp_path / "jwt.secret"
    secret.write_text(JWT_SECRET)
    return GatewayConfig(
        auth="jwt",
        jwt_secret_file=secret,
        jwt_issuer="https://issuer.test/",
        jwt_audience="statefed",
        **changes,
    )


def gateway(config: GatewayConfig) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    """The gateway app, started without Kafka or nodes, and a client talking to it."""
    return running_gateway([], 1, config, feed=RoutingFeed(), statuses=StatusBoard())


def node_client(app: NodeApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


async def scrapes(http: httpx.AsyncClient) -> dict[str, httpx.Response]:
    """/metrics without a token, with another scheme, a wrong token, and the right one."""
    return {
        "none": await http.get("/metrics"),
        "basic": await http.get("/metrics", headers={"authorization": f"Basic {TOKEN}"}),
        "wrong": await http.get("/metrics", headers={"authorization": f"Bearer {TOKEN}x"}),
        "right": await http.get("/metrics", headers={"authorization": f"bearer  {TOKEN} "}),
        "head": await http.head("/metrics", headers={"authorization": f"Bearer {TOKEN}"}),
    }


def assert_only_the_token_scrapes(answers: dict[str, httpx.Response], metric: str) -> None:
    for refused in ("none", "basic", "wrong"):
        response = answers[refused]
        assert response.status_code == 401, refused
        assert response.headers["www-authenticate"] == 'Bearer realm="statefed-metrics"'
        (error,) = response.json()["errors"]
        assert TOKEN_VARIABLE in error["message"], refused
        assert error["extensions"]["code"] == "UNAUTHENTICATED"
        assert TOKEN not in response.text
    assert answers["right"].status_code == 200
    assert answers["right"].headers["content-type"].startswith("text/plain")
    assert metric in answers["right"].text
    assert answers["head"].status_code == 200


def test_the_gateways_metrics_are_open_without_the_setting_even_with_authentication_on(
    tmp_path: Path,
) -> None:
    async def scenario() -> httpx.Response:
        async with gateway(jwt_config(tmp_path)) as http:
            assert (
                await http.post("/graphql", json={"query": "{ __typename }"})
            ).status_code == 401
            return await http.get("/metrics")

    response = asyncio.run(scenario())
    assert response.status_code == 200
    assert "statefed_gateway_errors_total" in response.text


def test_the_gateways_metrics_need_the_token_of_the_setting(tmp_path: Path) -> None:
    async def scenario() -> dict[str, httpx.Response]:
        async with gateway(jwt_config(tmp_path, metrics_token_file=token_file(tmp_path))) as http:
            return await scrapes(http)

    assert_only_the_token_scrapes(asyncio.run(scenario()), "statefed_gateway_errors_total")


def test_the_gateway_checks_the_token_with_authentication_off_too(tmp_path: Path) -> None:
    async def scenario() -> dict[str, httpx.Response]:
        async with gateway(GatewayConfig(metrics_token_file=token_file(tmp_path))) as http:
            return await scrapes(http)

    assert_only_the_token_scrapes(asyncio.run(scenario()), "statefed_gateway_errors_total")


def test_the_nodes_metrics_need_the_token_once_read_and_are_open_without_the_setting(
    tmp_path: Path,
) -> None:
    guarded = NodeApp(NodeConfig(metrics_token_file=token_file(tmp_path)))
    open_node = NodeApp(NodeConfig())

    async def scenario() -> tuple[httpx.Response, dict[str, httpx.Response], httpx.Response]:
        async with node_client(guarded) as http:
            starting = await http.get("/metrics", headers={"authorization": f"Bearer {TOKEN}"})
            guarded.metrics_guard.load()  # what start-up does before asking Kafka anything
            answers = await scrapes(http)
        async with node_client(open_node) as http:
            return starting, answers, await http.get("/metrics")

    starting, answers, opened = asyncio.run(scenario())
    assert starting.status_code == 503  # the token is not read yet: refuse, never open
    assert_only_the_token_scrapes(answers, "statefed_node_request_duration_seconds")
    assert opened.status_code == 200 and "statefed_node_state" in opened.text


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (None, "cannot read the metrics token"),
        ("", "is empty"),
        ("  \n", "is empty"),
        ("x" * (MIN_TOKEN_BYTES - 1), f"needs at least {MIN_TOKEN_BYTES}"),
        ("x" * 20 + " " + "y" * 20, "printable ASCII"),
        ("é" * MIN_TOKEN_BYTES, "printable ASCII"),
    ],
)
def test_an_unusable_token_file_is_refused_naming_the_variable(
    tmp_path: Path, text: str | None, problem: str
) -> None:
    path = tmp_path / "missing.token" if text is None else token_file(tmp_path, text)
    with pytest.raises(ConfigError, match=TOKEN_VARIABLE) as refused:
        read_token(path)
    assert problem in str(refused.value)
    assert read_token(token_file(tmp_path, f"\n {TOKEN}\n")) == TOKEN.encode()


@pytest.mark.parametrize("text", [None, ""], ids=["missing", "empty"])
def test_the_gateway_and_the_node_do_not_start_without_a_usable_token_file(
    tmp_path: Path, text: str | None
) -> None:
    path = tmp_path / "missing.token" if text is None else token_file(tmp_path, text)
    env = {TOKEN_VARIABLE: str(path), "STATEFED_BOOTSTRAP": "127.0.0.1:1"}
    node = NodeApp(NodeConfig.from_env({**env, "STATEFED_STATE_DIR": str(tmp_path)}))
    with pytest.raises(ConfigError, match=TOKEN_VARIABLE):
        node.start()  # before any broker is asked
    app = GatewayApp(GatewayConfig.from_env(env), feed=RoutingFeed(), statuses=StatusBoard())
    answer = lifespan_startup(app)
    assert answer["type"] == "lifespan.startup.failed"
    assert TOKEN_VARIABLE in answer["message"]


def lifespan_startup(app: GatewayApp) -> dict[str, Any]:
    """What the gateway answers a server's lifespan start-up (then shutdown, if it started)."""
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: Any) -> None:
        sent.append(dict(message))

    asyncio.run(app({"type": "lifespan"}, receive, send))
    return sent[0]
