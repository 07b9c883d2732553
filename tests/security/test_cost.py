"""Cost before work: a document that would cost too much is refused before any node is
asked, by the real gateway under uvicorn, and a node refuses such documents from any caller
by its own limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from gateway.config import GatewayConfig
from gateway.model.inputs import TimeRange
from gateway.reads.kinds import view_queries
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.app import NodeApp
from tests.gateway.fakes import (
    BOOKING_HISTORY,
    FULL,
    WORDS,
    FakeNode,
    Model,
    codes,
    running_gateway,
)
from tests.security.serving import fake_node_served, gateway_served
from tooling.broker import free_port

P = 4
HISTORY = "bookingHistory"


def amplification(first: int = 1000, trips: int = 10) -> str:
    """A history page of `first` under 10 x 10 x `trips` aliases spread through three
    fragments: by default 30 aliases as written, 1110 per spread, and 10^6 values."""
    field = f'{HISTORY}(customer: "c", first: {first})'
    edges = " ".join(f"e{i}: edges {{ ...Edge }}" for i in range(10))
    nodes = " ".join(f"n{i}: node {{ ...Event }}" for i in range(10))
    trips_ = " ".join(f"t{i}: trip" for i in range(trips))
    return (
        f"{{ {field} {{ ...Page }} }} "
        f"fragment Page on BookingEventConnection {{ {edges} }} "
        f"fragment Edge on BookingEventEdge {{ {nodes} }} "
        f"fragment Event on BookingEvent {{ {trips_} }}"
    )


def many_tokens(size: int) -> str:
    """A document of `size` bytes, nearly all `__typename` tokens."""
    field = "__typename "
    return "{ " + field * ((size - 4) // len(field)) + "}"


@pytest.fixture
def nodes() -> list[FakeNode]:
    model = Model.of_counts({"kafka": 5, "franz": 3})
    return [FakeNode(f"n{i}", model, range(i, P, 2), P, FULL) for i in range(2)]


@pytest.fixture
def gateway(nodes: list[FakeNode]) -> Iterator[str]:
    """The real gateway under uvicorn over two fake nodes, each under uvicorn too."""
    ports = [free_port() for _ in nodes]
    with (
        fake_node_served(nodes[0], ports[0]) as first,
        fake_node_served(nodes[1], ports[1]) as second,
    ):
        claims = {
            n.node_id: (url, sorted(n.held)) for n, url in zip(nodes, (first, second), strict=True)
        }
        config = GatewayConfig(port=free_port(), max_aliases=100_000)
        with gateway_served(config, claims, P, FULL) as url:
            yield url


def post(url: str, query: str) -> httpx.Response:
    return httpx.post(f"{url}/graphql", json={"query": query}, timeout=30)


def test_aliases_spread_through_fragments_multiply_the_cost_of_a_page(
    gateway: str, nodes: list[FakeNode]
) -> None:
    body = post(gateway, amplification()).json()
    assert codes(body) == ["QUERY_TOO_COSTLY"] and "data" not in body, body
    error = body["errors"][0]
    assert error["extensions"]["actual"] == 1000 * 10 * 10 * 10
    assert "STATEFED_GATEWAY_MAX_COST" in error["message"] and f"{HISTORY} " in error["message"]
    # a page of the same size, each field once: the old price, and it runs
    plain = post(
        gateway, f'{{ {HISTORY}(customer: "c", first: 1000) {{ edges {{ node {{ trip }} }} }} }}'
    )
    assert "errors" not in plain.json(), plain.json()
    assert sum(n.requests for n in nodes) == 1


def test_a_megabyte_of_tokens_is_refused_while_parsing(gateway: str, nodes: list[FakeNode]) -> None:
    document = many_tokens((1 << 20) - 100)  # within STATEFED_GATEWAY_MAX_BODY_BYTES
    response = post(gateway, document)
    body = response.json()
    assert codes(body) == ["GRAPHQL_PARSE_FAILED"], body
    error = body["errors"][0]
    assert "more than 5000 tokens" in error["message"]
    assert "STATEFED_GATEWAY_MAX_TOKENS" in error["message"]
    assert error["extensions"] == {"code": "GRAPHQL_PARSE_FAILED", "limit": 5000}
    assert sum(n.requests for n in nodes) == 0


def test_the_default_limits_refuse_aliases_and_repeats_before_validation(
    nodes: list[FakeNode],
) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            bodies = []
            for query in (amplification(), repeated):
                bodies.append((await http.post("/graphql", json={"query": query})).json())
            return bodies

    # a field repeated 1000 times fits the tokens; validating it would take seconds
    repeated = "{ " + "cluster { unassigned } " * 1000 + "}"
    body, repeats = asyncio.run(scenario())
    assert codes(repeats) == ["TOO_MANY_ALIASES"]
    assert repeats["errors"][0]["extensions"]["actual"] == 999
    assert sorted(codes(body)) == ["QUERY_TOO_COSTLY", "TOO_MANY_ALIASES"], body
    aliases = next(e for e in body["errors"] if e["extensions"]["code"] == "TOO_MANY_ALIASES")
    assert aliases["extensions"]["actual"] == 10 + 100 + 1000
    assert sum(n.requests for n in nodes) == 0


# -- a node's own limits, for any caller ------------------------------------------------------


class CountingRegistry(PartitionRegistry):
    """A node's partitions, counting what the subgraph's fields read."""

    reads = 0

    def read_at(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return super().read_at(*args, **kwargs)


def node_answers(
    queries: list[str],
    environ: dict[str, str] | None = None,
    variables: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The bodies a real node app answers `queries` (with `variables`) with, called directly
    (no gateway), and the reads its fields made."""
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n1", **(environ or {})})
    registry = CountingRegistry("n1")
    registry.set_partition_counts({v.changelog_topic: P for v in (WORDS, BOOKING_HISTORY)})
    app = NodeApp(config, [WORDS, BOOKING_HISTORY], registry=registry)

    async def scenario() -> list[dict[str, Any]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://node.localhost") as http:
            bodies = []
            for query in queries:
                body = {"query": query, "variables": variables or {}}
                bodies.append((await http.post("/graphql", json=body)).json())
            return bodies

    return asyncio.run(scenario()), registry.reads


def test_a_node_refuses_deep_aliased_costly_and_long_documents_from_any_caller() -> None:
    deep = "{ __schema { queryType { " + "ofType { " * 20 + "name" + " }" * 23
    aliased = "{ " + " ".join(f"a{i}: __typename" for i in range(501)) + " }"
    bodies, reads = node_answers(
        [
            deep,
            aliased,
            amplification(),
            amplification(trips=2),
            many_tokens((1 << 20) - 100),
            '{ wordCount(word: "kafka") { count } }',
        ],
        {"STATEFED_NODE_INTROSPECTION": "true"},
    )
    assert codes(bodies[0]) == ["QUERY_TOO_DEEP"]
    assert "STATEFED_NODE_MAX_DEPTH" in bodies[0]["errors"][0]["message"]
    assert codes(bodies[1]) == ["TOO_MANY_ALIASES"]
    assert bodies[1]["errors"][0]["extensions"] == {
        "code": "TOO_MANY_ALIASES",
        "actual": 501,
        "limit": 500,
    }
    assert sorted(codes(bodies[2])) == ["QUERY_TOO_COSTLY", "TOO_MANY_ALIASES"]
    assert codes(bodies[3]) == ["QUERY_TOO_COSTLY"]  # 310 aliases pass, a cost of 200,000 not
    assert bodies[3]["errors"][0]["extensions"]["actual"] == 1000 * 10 * 10 * 2
    assert "STATEFED_NODE_MAX_COST" in bodies[3]["errors"][0]["message"]
    assert codes(bodies[4]) == ["GRAPHQL_PARSE_FAILED"]
    assert "STATEFED_NODE_MAX_TOKENS" in bodies[4]["errors"][0]["message"]
    assert codes(bodies[5]) == ["NOT_OWNER"]  # the one document within the limits is read
    assert reads == 1


@pytest.mark.parametrize("limit", ["10000", "10000.0", "1e4"])
def test_a_size_in_a_variable_costs_what_it_asks_however_the_number_is_written(
    limit: str,
) -> None:
    """GraphQL's Int takes a whole float (`1e4` is 10000 in JSON): priced as 1, fifty top-N of
    10,000 rows each passed a limit of 100,000."""
    tops = " ".join(f"a{i}: topWords(limit: $n) {{ word }}" for i in range(50))
    query = f"query($n: Int!) {{ {tops} }}"
    assert NodeConfig.from_env({"STATEFED_NODE_ID": "n1"}).max_cost < 50 * 10_000
    (body,), reads = node_answers([query], variables={"n": json.loads(limit)})
    assert codes(body) == ["QUERY_TOO_COSTLY"]
    assert body["errors"][0]["extensions"]["actual"] == 50 * 10_000
    assert reads == 0


def test_a_node_has_introspection_off_by_default() -> None:
    (off, typename), _ = node_answers(["{ __schema { queryType { name } } }", "{ __typename }"])
    assert codes(off) == ["INTROSPECTION_DISABLED"]
    assert "STATEFED_NODE_INTROSPECTION" in off["errors"][0]["message"]
    assert typename["data"] == {"__typename": "Query"}
    (on,), _ = node_answers(
        ["{ __schema { queryType { name } } }"], {"STATEFED_NODE_INTROSPECTION": "on"}
    )
    assert on["data"] == {"__schema": {"queryType": {"name": "Query"}}}


def test_a_node_takes_bodies_up_to_its_own_limit() -> None:
    padded = '{ wordCount(word: "kafka") { count } }' + " " * 5000
    (too_big,), reads = node_answers([padded], {"STATEFED_NODE_MAX_BODY_BYTES": "4096"})
    assert codes(too_big) == ["PAYLOAD_TOO_LARGE"]
    assert "STATEFED_NODE_MAX_BODY_BYTES" in too_big["errors"][0]["message"]
    assert reads == 0


def test_every_document_the_gateway_sends_passes_a_node_s_default_limits() -> None:
    """At the largest sizes the gateway sends: 10,000 keys (a node's cap), a top-10,000, a
    history page of 1000; whatever the node answers, it is no limit's refusal."""
    keys = [f"k{i}" for i in range(10_000)]
    window = datetime(2023, 11, 14, 22, 13, tzinfo=UTC)
    bodies: list[bytes] = []
    for view in FULL:
        queries, documents = view_queries(view), view_queries(view).documents
        if documents.lookup:
            bodies.append(queries.lookup_body(keys))
        if documents.top:
            windowed = view.window is not None
            by = view.ranked_fields[0] if view.ranked_fields else None
            bodies.append(queries.top_body(10_000, range(64), window if windowed else None, by))
        if documents.windows:
            bodies.append(queries.windows_body("k", TimeRange(None, None)))
        if documents.history:
            bodies.append(queries.history_body("k", TimeRange(None, None), 1000, None))
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n1"})
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({v.changelog_topic: 64 for v in FULL})
    app = NodeApp(config, FULL, registry=registry)

    async def scenario() -> list[dict[str, Any]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://node.localhost") as http:
            headers = {"content-type": "application/json"}
            return [
                (await http.post("/graphql", content=b, headers=headers)).json() for b in bodies
            ]

    answers = asyncio.run(scenario())
    # lookups and tops of two count views and an aggregate view, a window view, a latest,
    # a history
    assert len(answers) == 10
    limit_codes = {"QUERY_TOO_DEEP", "TOO_MANY_ALIASES", "QUERY_TOO_COSTLY", "GRAPHQL_PARSE_FAILED"}
    for answer in answers:
        assert not limit_codes & set(codes(answer)), answer
        assert not {"GRAPHQL_VALIDATION_FAILED", "PAYLOAD_TOO_LARGE"} & set(codes(answer)), answer
