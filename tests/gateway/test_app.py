"""The gateway over HTTP: error codes and statuses, GraphiQL from local assets, health, cluster."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

import gateway
from gateway.api.schema import build_schema, print_sdl
from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.execute import sdl
from runtime.config import ConfigError
from schema import DEMO_DOMAIN, ValueField, View, ViewKind, ViewStatus
from tests.gateway.fakes import (
    BOOKING_HISTORY,
    FULL,
    HOSTS,
    LAST_BOOKING,
    PER_MINUTE,
    WORDS,
    FakeNode,
    Model,
    fake_nodes,
    post_query,
    running_gateway,
)
from tests.orders import HOURLY_BASKETS

P = 4
COUNTS = {"kafka": 5, "franz": 3, "spark": 5, "flink": 1}
STATIC = Path(gateway.__file__).parent / "edge" / "static"


def nodes(count: int = 2, catalogue: Sequence[View] = (WORDS,)) -> list[FakeNode]:
    return fake_nodes(Model.of_counts(COUNTS), P, count, catalogue)


def with_gateway(
    check: Callable[[httpx.AsyncClient], Awaitable[Any]],
    node_count: int = 2,
    catalogue: Sequence[View] = (WORDS,),
    statuses: StatusBoard | None = None,
) -> Any:
    async def scenario() -> Any:
        fakes = nodes(node_count, catalogue)
        async with running_gateway(fakes, P, catalogue=catalogue, statuses=statuses) as http:
            return await check(http)

    return asyncio.run(scenario())


@pytest.mark.parametrize("catalogue", [(WORDS,), FULL], ids=["words", "full"])
@pytest.mark.parametrize("node_count", [1, 3])
def test_the_brief_examples(node_count: int, catalogue: Sequence[View]) -> None:
    async def check(http: httpx.AsyncClient) -> list[dict[str, Any]]:
        return [
            (await post_query(http, q))[1]
            for q in (
                '{ wordCount(word: "kafka") { word count } }',
                '{ wordCount(word: "nope") { word count } }',
                '{ wordCounts(words: ["kafka","franz","nope"]) { word count } }',
                "{ topWords(limit: 3) { word count } }",
            )
        ]

    point, unknown, many, top = with_gateway(check, node_count, catalogue)
    assert point["data"] == {"wordCount": {"word": "kafka", "count": 5}}
    assert unknown["data"] == {"wordCount": None} and "errors" not in unknown
    assert many["data"]["wordCounts"] == [
        {"word": "kafka", "count": 5},
        {"word": "franz", "count": 3},
        None,
    ]
    assert top["data"]["topWords"] == [
        {"word": "kafka", "count": 5},
        {"word": "spark", "count": 5},
        {"word": "franz", "count": 3},
    ]
    assert {f["partition"] for f in top["extensions"]["freshness"]} == set(range(P))


BAD = [
    ('{ wordCount(word: "") { count } }', "BAD_USER_INPUT"),
    ('{ wordCounts(words: ["kafka", ""]) { count } }', "BAD_USER_INPUT"),
    ("{ topWords(limit: 0) { word } }", "BAD_USER_INPUT"),
    ("{ topWords(limit: 1001) { word } }", "BAD_USER_INPUT"),
    ("{ topWords(limit: -3) { word } }", "BAD_USER_INPUT"),
    ('{ topWords(limit: "ten") { word } }', "GRAPHQL_VALIDATION_FAILED"),
    ("{ topWords(limit: 99999999999) { word } }", "GRAPHQL_VALIDATION_FAILED"),
    ("{ topWords(limit: 3) { word ", "GRAPHQL_PARSE_FAILED"),
    ("{ nope }", "GRAPHQL_VALIDATION_FAILED"),
    ("{ wordCount { count } }", "GRAPHQL_VALIDATION_FAILED"),
    ("mutation { x }", "GRAPHQL_VALIDATION_FAILED"),
    ("}}}", "GRAPHQL_PARSE_FAILED"),
]


@pytest.mark.parametrize(("query", "code"), BAD)
def test_bad_queries_are_graphql_errors_with_codes(query: str, code: str) -> None:
    status, body = with_gateway(lambda http: post_query(http, query))
    assert status == 200
    assert [e["extensions"]["code"] for e in body["errors"]] == [code]
    assert not any((body.get("data") or {}).values())


def test_bad_variables_are_bad_user_input() -> None:
    query = "query($n: Int!) { topWords(limit: $n) { word } }"
    status, body = with_gateway(lambda http: post_query(http, query, {"n": "many"}))
    assert status == 200
    assert [e["extensions"]["code"] for e in body["errors"]] == ["BAD_USER_INPUT"]


def test_limit_bound_comes_from_config() -> None:
    async def scenario() -> dict[str, Any]:
        config = GatewayConfig(max_top_limit=2)
        async with running_gateway(nodes(), P, config) as http:
            return (await post_query(http, "{ topWords(limit: 3) { word } }"))[1]

    body = asyncio.run(scenario())
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert "1..2" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b"{not json", 400, "BAD_REQUEST"),
        (b"[]", 400, "BAD_REQUEST"),
        (b'"query"', 400, "BAD_REQUEST"),
        (b"{}", 400, "BAD_REQUEST"),
        (b'{"query": ""}', 400, "BAD_REQUEST"),
        (b'{"query": "{ cluster { unassigned } }", "variables": [1]}', 400, "BAD_REQUEST"),
        (b"x" * (1 << 20) + b"x", 413, "PAYLOAD_TOO_LARGE"),
    ],
)
def test_broken_requests_are_4xx_never_500(content: bytes, status: int, code: str) -> None:
    async def check(http: httpx.AsyncClient) -> httpx.Response:
        return await http.post(
            "/graphql", content=content, headers={"content-type": "application/json"}
        )

    response = with_gateway(check)
    assert response.status_code == status
    assert response.json()["errors"][0]["extensions"]["code"] == code


def test_routes_and_methods() -> None:
    async def check(http: httpx.AsyncClient) -> list[int]:
        return [
            (await http.get("/nope")).status_code,
            (await http.put("/graphql", content=b"{}")).status_code,
            (await http.get("/")).status_code,
            (await http.get("/static/../app.py")).status_code,
            (await http.get("/static/nothing.js")).status_code,
        ]

    assert with_gateway(check) == [404, 405, 307, 404, 404]


def test_graphql_over_get() -> None:
    async def check(http: httpx.AsyncClient) -> dict[str, Any]:
        params = {
            "query": "query($w: String!) { wordCount(word: $w) { count } }",
            "variables": '{"w": "franz"}',
        }
        return (await http.get("/graphql", params=params)).json()

    assert with_gateway(check)["data"] == {"wordCount": {"count": 3}}


def test_graphiql_page_uses_only_local_assets_and_they_are_served() -> None:
    async def check(http: httpx.AsyncClient) -> tuple[httpx.Response, dict[str, httpx.Response]]:
        page = await http.get("/graphql", headers={"accept": "text/html"})
        urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        return page, {url: await http.get(url) for url in urls}

    page, assets = with_gateway(check)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "://" not in page.text  # no CDN, no absolute URL of any kind
    assert set(assets) == {
        "/static/graphiql.min.css",
        "/static/react.production.min.js",
        "/static/react-dom.production.min.js",
        "/static/graphql-ws.min.js",
        "/static/graphiql.min.js",
    }
    for url, response in assets.items():
        assert response.status_code == 200, url
        assert response.content == (STATIC / url.removeprefix("/static/")).read_bytes()
        kind = "text/css" if url.endswith(".css") else "text/javascript"
        assert response.headers["content-type"].startswith(kind)
    for name in ("graphiql", "react", "react-dom", "graphql-ws"):
        assert "MIT License" in (STATIC / f"{name}.LICENSE").read_text()


def test_the_status_page_asks_for_its_assets_by_content_and_they_are_served() -> None:
    async def check(http: httpx.AsyncClient) -> tuple[httpx.Response, dict[str, httpx.Response]]:
        page = await http.get("/status")
        urls = re.findall(r'(?:src|href)="(/[^"]+)"', page.text)
        return page, {url: await http.get(url) for url in urls}

    page, assets = with_gateway(check)
    assert page.status_code == 200 and "://" not in page.text
    assert {url.split("?")[0] for url in assets} == {"/static/status.css", "/static/status.js"}
    for url, response in assets.items():
        name, _, version = url.removeprefix("/static/").partition("?v=")
        content = (STATIC / name).read_bytes()
        # a new release's page never runs with a script cached from the previous one
        assert version == hashlib.sha256(content).hexdigest()[:12]
        assert response.status_code == 200 and response.content == content, url


def test_no_page_may_be_framed_and_no_answer_may_be_sniffed() -> None:
    """Clickjacking: GraphiQL in another site's hidden frame would run mutations (produce)
    for whoever clicks in it. GraphiQL's own policy is `frame-ancestors` alone: its inline
    script and style would break under a script-src."""

    async def check(http: httpx.AsyncClient) -> dict[str, httpx.Response]:
        return {
            "graphiql": await http.get("/graphql", headers={"accept": "text/html"}),
            "status": await http.get("/status"),
            "answer": await http.post("/graphql", json={"query": "{ __typename }"}),
            "health": await http.get("/health"),
            "asset": await http.get("/static/graphiql.min.js"),
            "refusal": await http.get("/nope"),
        }

    answers = with_gateway(check)
    assert answers["graphiql"].headers["content-security-policy"] == "frame-ancestors 'none'"
    for name in ("graphiql", "status"):
        page = answers[name]
        assert page.headers["content-type"].startswith("text/html"), name
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"], name
        assert page.headers["x-frame-options"] == "DENY", name
    for name, answer in answers.items():
        assert answer.headers["x-content-type-options"] == "nosniff", name


def test_health_and_cluster() -> None:
    async def check(http: httpx.AsyncClient) -> tuple[dict[str, Any], dict[str, Any]]:
        health = (await http.get("/health")).json()
        query = """{ cluster { routingVersion partitionCount unassigned
                    nodes { id url state alive heartbeatAgeMs active standby }
                    partitions { partition node role appliedOffset endOffset lag } } }"""
        return health, (await post_query(http, query))[1]

    health, cluster = with_gateway(check)
    assert health["partitions"] == P
    assert health["routable"] == list(range(P))
    assert health["ready"] is True
    assert [n["id"] for n in health["nodes"]] == ["n0", "n1"]
    data = cluster["data"]["cluster"]
    assert data["partitionCount"] == P and data["unassigned"] == []
    assert [(n["id"], n["alive"], n["state"], n["active"]) for n in data["nodes"]] == [
        ("n0", True, "RUNNING", [0, 2]),
        ("n1", True, "RUNNING", [1, 3]),
    ]
    assert 0 <= data["nodes"][0]["heartbeatAgeMs"] < 60_000
    assert [(p["partition"], p["node"], p["role"]) for p in data["partitions"]] == [
        (0, "n0", "ACTIVE"),
        (1, "n1", "ACTIVE"),
        (2, "n0", "ACTIVE"),
        (3, "n1", "ACTIVE"),
    ]


def test_routing_not_ready_is_a_graphql_error() -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with running_gateway([], P, feed=RoutingFeed()) as http:
            body = (await post_query(http, '{ wordCount(word: "kafka") { count } }'))[1]
            return body, (await http.get("/health")).json()

    body, health = asyncio.run(scenario())
    assert body["errors"][0]["extensions"]["code"] == "ROUTING_NOT_READY"
    assert health == {
        "ready": False,
        "partitions": None,
        "routable": [],
        "routing_version": 1,
        "routing_stale_since_ms": None,
        "nodes": [],
        "cache": {
            **{"hits": 0, "misses": 0, "entries": 0, "bytes": 0, "top_hits": 0, "tops": 0},
            "refused": 0,  # missed keys not filled (gateway.reads.admission)
            "skipped": 0,  # lookups that did not look: not every key held (GatewayCache.holds)
            "filled_from_reads": 0,  # missed keys filled from the read that missed them
            "filled_by_snapshots": 0,  # and by a snapshot of the followed copy
            "whole_views": 0,  # views held whole that answer any key (gateway.reads.whole)
            "fast": 0,  # requests answered by the fast path (gateway.execute.fastpath)
        },
    }


def test_lifespan_protocol_starts_and_stops() -> None:
    """Drive the ASGI lifespan as a server would; requests before start-up get 503."""

    async def scenario() -> list[Any]:
        app = GatewayApp(GatewayConfig(), feed=RoutingFeed(), client=httpx.AsyncClient())
        transport = httpx.ASGITransport(app=app)
        seen: list[Any] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            seen.append((await http.get("/health")).status_code)
            inbox: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
            outbox: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
            task = asyncio.create_task(app({"type": "lifespan"}, inbox.get, outbox.put))
            await inbox.put({"type": "lifespan.startup"})
            seen.append((await outbox.get())["type"])
            seen.append((await http.get("/health")).status_code)
            await inbox.put({"type": "lifespan.shutdown"})
            seen.append((await outbox.get())["type"])
            await task
        return seen

    assert asyncio.run(scenario()) == [
        503,
        "lifespan.startup.complete",
        200,
        "lifespan.shutdown.complete",
    ]


def test_sdl_entry_point_prints_writes_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sdl.main([]) == 0
    assert capsys.readouterr().out == print_sdl()
    written = tmp_path / "gateway.graphql"
    assert sdl.main(["--catalogue", "full", "--write", str(written)]) == 0
    assert written.read_text() == print_sdl(FULL)
    assert sdl.main(["--catalogue", "full", "--check", str(written)]) == 0
    written.write_text(print_sdl(FULL) + "# edited\n")
    assert sdl.main(["--catalogue", "full", "--check", str(written)]) == 1
    assert "make schema" in capsys.readouterr().err
    assert sdl.main(["--check", str(tmp_path / "missing.graphql")]) == 1


def test_every_kind_has_a_builder_and_clashing_names_are_refused() -> None:
    every_kind = (*FULL, HOURLY_BASKETS)  # the built-in catalogue has no windowed aggregate
    assert {view.kind for view in every_kind} == set(ViewKind)
    assert "topCustomersPerHour" in print_sdl(every_kind)
    clash = dataclasses.replace(HOSTS, name="other_hosts", type_name="OtherHosts")
    with pytest.raises(ValueError, match="field hostAccess is defined twice"):
        build_schema((HOSTS, clash))
    named_like_key = dataclasses.replace(LAST_BOOKING, value_fields=(ValueField("customer"),))
    with pytest.raises(ValueError, match="would repeat a field"):
        build_schema((named_like_key,))


def test_a_view_to_hold_whole_that_the_cache_cannot_hold_is_refused_at_start() -> None:
    for wrong in ("nope", PER_MINUTE.name):  # unknown; a windowed view, not cached
        config = GatewayConfig(cache_whole_views=(HOSTS.name, wrong))
        with pytest.raises(ConfigError) as refused:
            GatewayApp(config, feed=RoutingFeed(), catalogue=FULL)
        assert refused.value.variable == "STATEFED_GATEWAY_CACHE_WHOLE_VIEWS"
        assert f"names {wrong}, not a count, latest or aggregate view" in str(refused.value)
        assert HOSTS.name in refused.value.problem  # what could be named instead
    GatewayApp(GatewayConfig(cache_whole_views=(HOSTS.name,)), feed=RoutingFeed(), catalogue=FULL)


def test_cluster_lists_the_views_with_the_pipelines_late_counts() -> None:
    board = StatusBoard()
    board.put(
        ViewStatus(PER_MINUTE.name, batch_id=3, updated_ms=1_700_000_000_000, late_dropped=17)
    )
    query = "{ cluster { views { name kind lateDropped statusUpdatedAt } } }"
    body = with_gateway(lambda http: post_query(http, query), 1, FULL, board)[1]
    views = body["data"]["cluster"]["views"]
    assert [(v["name"], v["kind"]) for v in views] == [(v.name, v.kind.name) for v in FULL]
    by_name = {v["name"]: v for v in views}
    assert by_name[PER_MINUTE.name]["lateDropped"] == 17
    assert by_name[PER_MINUTE.name]["statusUpdatedAt"] == "2023-11-14T22:13:20+00:00"
    assert by_name[WORDS.name] == {
        "name": WORDS.name,
        "kind": "COUNT",
        "lateDropped": 0,
        "statusUpdatedAt": None,
    }


def test_graphiql_starts_with_a_query_the_catalogue_can_answer() -> None:
    async def page_of(catalogue: Sequence[View]) -> str:
        app = GatewayApp(GatewayConfig(), feed=RoutingFeed(), catalogue=catalogue)
        await app.startup()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                return (await http.get("/graphql")).text
        finally:
            await app.shutdown()

    assert "topHosts(limit: 10)" in asyncio.run(page_of(DEMO_DOMAIN))
    assert "lateDropped" in asyncio.run(page_of((BOOKING_HISTORY,)))


def test_exported_members() -> None:
    assert gateway.__all__ == sorted(gateway.__all__)
    for name in gateway.__all__:
        assert getattr(gateway, name) is not None
    public = {n for n in dir(gateway) if not n.startswith("_")}
    # the rooms and the modules beside them, imported by the names above
    modules = {
        "api", "auth", "cluster", "config", "cors", "edge", "execute", "metrics", "model",
        "nodes", "reads", "subscriptions", "writes",
    }  # fmt: skip
    assert public - modules == set(gateway.__all__)
