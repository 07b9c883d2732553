"""DNS rebinding: a part serving without authentication answers only requests whose `Host`
is an IP literal, `localhost`, `*.localhost` or a listed name (runtime.hosts), on every path
and for WebSocket handshakes, through the real ASGI apps of the gateway and the node (and
once under uvicorn, over a socket); with authentication on, only a set allowlist is checked.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from node.config import NodeConfig
from node.errors import ConfigError as NodeConfigError
from node.serve.app import NodeApp
from runtime.config import ConfigError
from runtime.hosts import HostPolicy, is_loopback
from schema import CATALOGUE
from schema.feed import FEED_PATH
from tests.gateway.fakes import ServerThread
from tests.security.recording import RecordingProducer

FOREIGN = "attacker.example:8100"  # a page's domain, rebound to 127.0.0.1
ANSWERED = [
    "127.0.0.1:8100",
    "127.0.0.1",
    "10.1.2.3:80",
    "[::1]:8100",
    "[::1]",
    "localhost:8100",
    "LocalHost",
    "localhost.:8100",
    "x.localhost:8100",
    "",  # no authority: not a browser's request
]
REFUSED = [
    FOREIGN,
    "attacker.example",
    "localhost.attacker.example:8100",
    "127.0.0.1.attacker.example",
    "[::1].attacker.example",
    "::1",  # browsers bracket IPv6 literals
    "[not-an-ip]:8100",
    "example:80:80",
]
MUTATION = 'mutation { produce(topic: "words", key: "rebound") { offset } }'
REQUESTS = [
    ("POST", "/graphql", {"query": "{ __typename }"}),
    ("POST", "/graphql", {"query": MUTATION}),
    ("GET", "/graphql", None),  # GraphiQL
    ("GET", "/health", None),
    ("GET", "/status", None),
    ("GET", "/status.json", None),
    ("GET", "/metrics", None),
    ("GET", "/graphql/stream", None),
    ("OPTIONS", "/graphql", None),
    ("GET", "/nowhere", None),
]
JWT_SECRET = "s" * 40


def jwt_config(tmp_path: Path, **changes: Any) -> GatewayConfig:
    secret = tmp_path / "jwt.secret"
    secret.write_text(JWT_SECRET)
    return GatewayConfig(
        auth="jwt",
        jwt_secret_file=secret,
        jwt_issuer="https://issuer.test/",
        jwt_audience="statefed",
        **changes,
    )


@asynccontextmanager
async def gateway(
    config: GatewayConfig, producer: RecordingProducer | None = None
) -> AsyncIterator[tuple[GatewayApp, httpx.AsyncClient]]:
    """The gateway app, started without Kafka or nodes, and a client of its ASGI app."""
    upstream = httpx.AsyncClient()
    app = GatewayApp(
        config, feed=RoutingFeed(), statuses=StatusBoard(), client=upstream, producer=producer
    )
    await app.startup()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield app, http
    finally:
        await app.shutdown()
        await upstream.aclose()


def node_app(tmp_path: Path, **environ: str) -> NodeApp:
    """A node app, not started (no Kafka): its routes answer from an empty registry."""
    base = {"STATEFED_NODE_ID": "n1", "STATEFED_STATE_DIR": str(tmp_path)}
    return NodeApp(NodeConfig.from_env({**base, **environ}), CATALOGUE)


def node_client(app: NodeApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def request(
    http: httpx.AsyncClient, host: str, method: str = "GET", path: str = "/health", body: Any = None
) -> httpx.Response:
    headers = {"host": host, "origin": f"http://{host}"}
    if method == "OPTIONS":
        headers["access-control-request-method"] = "POST"
    return await http.request(method, path, json=body, headers=headers)


def assert_misdirected(response: httpx.Response, name: str, variable: str) -> None:
    assert response.status_code == 421, response.text
    assert response.headers["content-type"].startswith("application/json")
    (error,) = response.json()["errors"]
    assert error["extensions"] == {"code": "MISDIRECTED_REQUEST"}
    assert repr(name) in error["message"] and variable in error["message"]
    assert "data" not in response.json()


async def handshake(
    app: Any, host: str | None, path: str = "/graphql", *, extension: bool = True
) -> list[dict[str, Any]]:
    """One WebSocket handshake through `app` as ASGI, the client leaving right after; what
    the app sent."""
    headers = (
        [] if host is None else [(b"host", host.encode()), (b"origin", b"http://" + host.encode())]
    )
    scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "subprotocols": ["graphql-transport-ws"],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8100),
        "extensions": {"websocket.http.response": {}} if extension else {},
    }
    incoming = iter([{"type": "websocket.connect"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(incoming, {"type": "websocket.disconnect", "code": 1000})

    async def send(message: Any) -> None:
        sent.append(dict(message))

    await asyncio.wait_for(app(scope, receive, send), 10)
    return sent


def assert_handshake_misdirected(sent: list[dict[str, Any]], variable: str) -> None:
    start, body = sent
    assert start["type"] == "websocket.http.response.start" and start["status"] == 421
    assert b"MISDIRECTED_REQUEST" in body["body"] and variable.encode() in body["body"]


# -- the gateway ---------------------------------------------------------------------------


def test_an_anonymous_gateway_refuses_a_foreign_host_on_every_path_before_anything_runs() -> None:
    async def scenario() -> list[httpx.Response]:
        config = GatewayConfig(produce=True)
        async with gateway(config, producer) as (_, http):
            return [await request(http, FOREIGN, m, p, b) for m, p, b in REQUESTS]

    producer = RecordingProducer()
    for response in asyncio.run(scenario()):
        assert_misdirected(response, "attacker.example", "STATEFED_GATEWAY_ALLOWED_HOSTS")
    assert producer.records == []


@pytest.mark.parametrize("host", ANSWERED)
def test_an_anonymous_gateway_answers_ip_literals_and_localhost(host: str) -> None:
    async def scenario() -> list[httpx.Response]:
        async with gateway(GatewayConfig()) as (_, http):
            return [
                await request(http, host, "POST", "/graphql", {"query": "{ __typename }"}),
                await request(http, host, "GET", "/status.json"),
            ]

    query, status = asyncio.run(scenario())
    assert query.status_code == 200 and query.json()["data"] == {"__typename": "Query"}
    assert status.status_code == 200


@pytest.mark.parametrize("host", REFUSED)
def test_an_anonymous_gateway_refuses_every_other_host(host: str) -> None:
    async def scenario() -> httpx.Response:
        async with gateway(GatewayConfig()) as (_, http):
            return await request(http, host)

    assert asyncio.run(scenario()).status_code == 421


def test_a_listed_name_is_answered_and_a_star_answers_any() -> None:
    async def scenario(config: GatewayConfig, hosts: list[str]) -> list[int]:
        async with gateway(config) as (_, http):
            return [(await request(http, host)).status_code for host in hosts]

    listed = GatewayConfig(allowed_hosts=("gateway.example", "gw"))
    hosts = ["gateway.example:8100", "GATEWAY.example.", "gw", "gw.example", FOREIGN]
    assert asyncio.run(scenario(listed, hosts)) == [200, 200, 200, 421, 421]
    assert asyncio.run(scenario(GatewayConfig(allowed_hosts=("*",)), [FOREIGN])) == [200]


def test_with_jwt_the_host_is_checked_only_when_names_are_listed(tmp_path: Path) -> None:
    async def scenario(config: GatewayConfig) -> list[int]:
        async with gateway(config) as (_, http):
            hosts = [FOREIGN, "gateway.example", "127.0.0.1:8100", "localhost"]
            return [(await request(http, host)).status_code for host in hosts]

    assert asyncio.run(scenario(jwt_config(tmp_path))) == [200, 200, 200, 200]
    listed = jwt_config(tmp_path, allowed_hosts=("gateway.example",))
    assert asyncio.run(scenario(listed)) == [421, 200, 200, 200]


def test_a_websocket_handshake_for_a_foreign_host_is_refused_before_it_is_accepted(
    tmp_path: Path,
) -> None:
    async def scenario(config: GatewayConfig, host: str, **kwargs: Any) -> list[dict[str, Any]]:
        async with gateway(config) as (app, _):
            return await handshake(app, host, **kwargs)

    anonymous = GatewayConfig()
    variable = "STATEFED_GATEWAY_ALLOWED_HOSTS"
    # the page's Origin is http:// + its Host: the origin check alone let it in
    assert_handshake_misdirected(asyncio.run(scenario(anonymous, FOREIGN)), variable)
    bare = asyncio.run(scenario(anonymous, FOREIGN, extension=False))
    assert bare == [{"type": "websocket.close", "code": 1008}]  # the server answers 403
    for host in ("127.0.0.1:8100", "[::1]:8100", "localhost:8100", "x.localhost"):
        accepted = asyncio.run(scenario(anonymous, host))
        assert accepted[0] == {"type": "websocket.accept", "subprotocol": "graphql-transport-ws"}
    unchecked = asyncio.run(scenario(jwt_config(tmp_path), FOREIGN))
    assert unchecked[0]["type"] == "websocket.accept"
    listed = jwt_config(tmp_path, allowed_hosts=("gateway.example",))
    assert_handshake_misdirected(asyncio.run(scenario(listed, FOREIGN)), variable)


UPGRADE = (
    "upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-version: 13\r\n"
    "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "sec-websocket-protocol: graphql-transport-ws\r\n"
)


def test_uvicorn_answers_a_foreign_host_421_over_http_and_websocket() -> None:
    app = GatewayApp(GatewayConfig(), feed=RoutingFeed(), statuses=StatusBoard())
    with ServerThread(app) as server:
        plain = exchange(server.port, "/health", FOREIGN, "connection: close\r\n")
        refused = exchange(server.port, "/graphql", FOREIGN, UPGRADE)
        own = exchange(server.port, "/graphql", "127.0.0.1:8100", UPGRADE)
    for answer in (plain, refused):
        assert answer.startswith(b"HTTP/1.1 421 "), answer[:200]
        assert b'"code":"MISDIRECTED_REQUEST"' in answer
    assert own.startswith(b"HTTP/1.1 101 "), own[:200]


def exchange(port: int, path: str, host: str, headers: str) -> bytes:
    """What a server on `port` answers a GET of `path` for `host` (its Origin the page's at
    that host) until it closes the connection or switches protocols."""
    head = f"GET {path} HTTP/1.1\r\nhost: {host}\r\norigin: http://{host}\r\n{headers}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(head.encode())
        answer = b""
        while (chunk := connection.recv(65536)) and not answer.startswith(b"HTTP/1.1 101 "):
            answer += chunk
        return answer + chunk


# -- the node ------------------------------------------------------------------------------


def test_a_node_without_the_secret_refuses_a_foreign_host(tmp_path: Path) -> None:
    async def scenario(app: NodeApp) -> list[httpx.Response]:
        async with node_client(app) as http:
            graphql = {"query": "{ __typename }"}
            return [
                await request(http, FOREIGN, "GET", "/health"),
                await request(http, FOREIGN, "GET", "/metrics"),
                await request(http, FOREIGN, "POST", "/graphql", graphql),
                await request(http, FOREIGN, "GET", "/nowhere"),
            ]

    for response in asyncio.run(scenario(node_app(tmp_path))):
        assert_misdirected(response, "attacker.example", "STATEFED_NODE_ALLOWED_HOSTS")
    sent = asyncio.run(handshake(node_app(tmp_path), FOREIGN, FEED_PATH))
    assert_handshake_misdirected(sent, "STATEFED_NODE_ALLOWED_HOSTS")


def test_a_node_answers_ip_literals_localhost_its_own_url_and_listed_names(
    tmp_path: Path,
) -> None:
    async def statuses(app: NodeApp, hosts: list[str]) -> list[int]:
        async with node_client(app) as http:
            return [(await request(http, host)).status_code for host in hosts]

    hosts = ["127.0.0.1:8101", "[::1]:8101", "localhost:8101", "n1.localhost", ""]
    assert asyncio.run(statuses(node_app(tmp_path), hosts)) == [200] * len(hosts)
    # its advertised URL is what the gateway and the other nodes call it by
    named = node_app(
        tmp_path, STATEFED_NODE_URL="http://node-1.internal:8101", STATEFED_NODE_AUTH="none"
    )
    answered = ["node-1.internal:8101", FOREIGN, "node-2.internal:8101"]
    assert asyncio.run(statuses(named, answered)) == [200, 421, 421]
    listed = node_app(tmp_path, STATEFED_NODE_ALLOWED_HOSTS="statefed-node-1")
    assert asyncio.run(statuses(listed, ["statefed-node-1:8101", FOREIGN])) == [200, 421]
    # a handshake the check lets through reaches the app (no WebSocket there: 4404)
    (close,) = asyncio.run(handshake(node_app(tmp_path), "127.0.0.1:8101", "/elsewhere"))
    assert close == {"type": "websocket.close", "code": 4404}


def test_a_node_with_the_secret_checks_the_host_only_when_names_are_listed(
    tmp_path: Path,
) -> None:
    async def statuses(app: NodeApp) -> list[int]:
        async with node_client(app) as http:
            return [(await request(http, h)).status_code for h in (FOREIGN, "node.example")]

    secret = {"STATEFED_CLUSTER_SECRET_FILE": str(tmp_path / "cluster.secret")}
    assert asyncio.run(statuses(node_app(tmp_path, **secret))) == [200, 200]
    listed = node_app(tmp_path, **secret, STATEFED_NODE_ALLOWED_HOSTS="node.example")
    assert asyncio.run(statuses(listed)) == [421, 200]


# -- the settings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("gateway:8100", "has a port"),
        ("http://gateway", "is not a host name"),
        ("*,gateway", "list it alone"),
        ("gate way", "is not a host name"),
        ("[::1]", "is an IP address"),
        ("10.0.0.5", "is an IP address"),
    ],
)
def test_an_allowlist_that_is_not_host_names_is_refused_naming_the_variable(
    value: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=f"^STATEFED_GATEWAY_ALLOWED_HOSTS: .*{problem}"):
        GatewayConfig.from_env({"STATEFED_GATEWAY_ALLOWED_HOSTS": value})
    with pytest.raises(NodeConfigError, match=f"^STATEFED_NODE_ALLOWED_HOSTS: .*{problem}"):
        NodeConfig.from_env({"STATEFED_NODE_ALLOWED_HOSTS": value})


def test_the_policy_of_each_mode() -> None:
    assert GatewayConfig().host_policy().enforced
    assert not GatewayConfig(allowed_hosts=("*",)).host_policy().enforced
    policy = HostPolicy(("App.Example",), "X", part="gateway", required=False)
    assert policy.enforced and policy.allows(b"app.example:443")
    assert not policy.allows(b"app.example.evil:443")


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"]
)
def test_loopback_addresses_are_loopback(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "[::]", "example.com", "", None])
def test_other_addresses_and_host_names_are_not(host: str | None) -> None:
    assert not is_loopback(host)
