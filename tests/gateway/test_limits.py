"""Query limits through the gateway: depth, aliases, root fields, fan-out cost, key length,
body size and introspection, each refused with its own code and the variable that sets it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from graphql import GraphQLError, OperationDefinitionNode, get_introspection_query, parse

from gateway.api.schema import build_schema
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.execute.limits import QueryLimits, Shape
from runtime.graphql_http import error_extensions
from schema import View
from tests.gateway.fakes import (
    FULL,
    WORDS,
    Model,
    codes,
    fake_nodes,
    feed_for,
    post_query,
    running_gateway,
)

P = 4
COUNTS = {"kafka": 5, "franz": 3, "spark": 5, "flink": 1}
TOP = "{ topWords(limit: 1000) { word count } }"  # costs P x 1000
WINDOW = '{start: "2023-11-14T22:13:00Z"}'


def ask(
    queries: Sequence[str | tuple[str, dict[str, Any] | None]],
    config: GatewayConfig | None = None,
    catalogue: Sequence[View] = (WORDS,),
    partitions: int = P,
) -> list[dict[str, Any]]:
    """The bodies of `queries` (each a query or (query, variables)), all answered with 200."""

    async def scenario() -> list[dict[str, Any]]:
        nodes = fake_nodes(Model.of_counts(COUNTS), partitions, 2, catalogue)
        feed = feed_for(nodes, partitions, catalogue)
        async with running_gateway(nodes, partitions, config, feed, catalogue=catalogue) as http:
            bodies = []
            for item in queries:
                query, variables = (item, None) if isinstance(item, str) else item
                status, body = await post_query(http, query, variables)
                assert status == 200, body
                bodies.append(body)
            return bodies

    return asyncio.run(scenario())


def refused(body: dict[str, Any], code: str, variable: str) -> dict[str, Any]:
    """Check `body` is refused before execution with one error `code` naming `variable`."""
    assert codes(body) == [code], body
    assert "data" not in body, body
    error: dict[str, Any] = body["errors"][0]
    assert variable in error["message"], error
    return error


def nested(depth: int) -> str:
    """An introspection query `depth` fields deep with no list inside (ofType is no list)."""
    return "{ __schema { queryType { " + "ofType { " * (depth - 3) + "name" + " }" * depth


def test_the_default_limits_admit_introspection_and_the_brief_examples() -> None:
    introspection = get_introspection_query(
        descriptions=True,
        specified_by_url=True,
        directive_is_repeatable=True,
        schema_description=True,
        input_value_deprecation=True,
    )
    bodies = ask(
        [
            introspection,
            nested(15),
            TOP,
            '{ wordCounts(words: ["kafka", "franz", "nope"]) { word count } }',
            "{ cluster { nodes { id state } views { name kind lateDropped } } }",
        ]
    )
    assert all("errors" not in body for body in bodies), bodies
    assert bodies[0]["data"]["__schema"]["queryType"]["name"] == "Query"


def test_depth_counts_every_field_level() -> None:
    deep, shallow, data = ask(
        [nested(16), "{ cluster { unassigned } }", "{ cluster { nodes { id } } }"],
        GatewayConfig(max_depth=2),
    )
    error = refused(deep, "QUERY_TOO_DEEP", "STATEFED_GATEWAY_MAX_DEPTH")
    assert error["extensions"] == {"code": "QUERY_TOO_DEEP", "actual": 16, "limit": 2}
    assert error["locations"][0]["line"] == 1  # the deepest field
    assert shallow["data"] == {"cluster": {"unassigned": []}}
    refused(data, "QUERY_TOO_DEEP", "STATEFED_GATEWAY_MAX_DEPTH")
    (default,) = ask([nested(16)])
    assert default["errors"][0]["extensions"]["limit"] == 15


def test_depth_goes_through_fragments_and_a_long_fragment_chain_is_too_deep() -> None:
    through = "query { ...A } fragment A on Query { cluster { ...B } } "
    through += "fragment B on Cluster { nodes { id } }"
    chain = "query { ...F0 } " + " ".join(
        f"fragment F{i} on Query {{ ...F{i + 1} }}" for i in range(250)
    )
    chain += " fragment F250 on Query { __typename }"
    fragments, too_long = ask([through, chain], GatewayConfig(max_depth=2))
    refused(fragments, "QUERY_TOO_DEEP", "STATEFED_GATEWAY_MAX_DEPTH")
    error = refused(too_long, "QUERY_TOO_DEEP", "STATEFED_GATEWAY_MAX_DEPTH")
    assert "more than 200" in error["message"]


def test_aliases_and_repeated_fields_are_counted_per_spread() -> None:
    spread = "query { ...A ...A x: cluster { unassigned } } "
    spread += "fragment A on Query { a: cluster { unassigned } }"
    three = '{ a: wordCount(word: "kafka") { c: count } b: wordCount(word: "franz") { count } }'
    bodies = ask([spread, three, three.replace("b: ", "")], GatewayConfig(max_aliases=2))
    # `a` once per spread (2), repeated by the second spread (1), and `x` (1)
    error = refused(bodies[0], "TOO_MANY_ALIASES", "STATEFED_GATEWAY_MAX_ALIASES")
    assert error["extensions"] == {"code": "TOO_MANY_ALIASES", "actual": 4, "limit": 2}
    error = refused(bodies[1], "TOO_MANY_ALIASES", "STATEFED_GATEWAY_MAX_ALIASES")
    assert error["extensions"] == {"code": "TOO_MANY_ALIASES", "actual": 3, "limit": 2}
    assert bodies[2]["data"]["a"] == {"c": 5}


def test_root_fields_are_limited_and_typename_is_free() -> None:
    four = " ".join(f'w{i}: wordCount(word: "kafka") {{ count }}' for i in range(4))
    three = " ".join(f'w{i}: wordCount(word: "kafka") {{ count }}' for i in range(3))
    bodies = ask([f"{{ {four} }}", f"{{ __typename {three} }}"], GatewayConfig(max_root_fields=3))
    error = refused(bodies[0], "TOO_MANY_ROOT_FIELDS", "STATEFED_GATEWAY_MAX_ROOT_FIELDS")
    assert error["extensions"]["actual"] == 4
    assert bodies[1]["data"]["__typename"] == "Query" and bodies[1]["data"]["w2"] == {"count": 5}


def test_a_top_costs_its_limit_times_the_partitions_it_reads() -> None:
    query = "query($n: Int!) { topWords(limit: $n) { word } }"
    config = GatewayConfig(max_cost=4000)
    (at_limit,) = ask([TOP], config)
    over, over_by_variable = ask([TOP, (query, {"n": 1000})], config, partitions=5)
    assert "errors" not in at_limit, at_limit  # 4 partitions x 1000
    error = refused(over, "QUERY_TOO_COSTLY", "STATEFED_GATEWAY_MAX_COST")
    assert error["extensions"] == {"code": "QUERY_TOO_COSTLY", "actual": 5000, "limit": 4000}
    assert "topWords 5000" in error["message"]
    refused(over_by_variable, "QUERY_TOO_COSTLY", "STATEFED_GATEWAY_MAX_COST")


def test_the_cost_of_one_document_follows_its_variables() -> None:
    query = "query($n: Int! = 10) { topWords(limit: $n) { word } }"
    cheap, dear, default = ask(
        [(query, {"n": 3}), (query, {"n": 1000}), (query, None)], GatewayConfig(max_cost=100)
    )
    assert [r["word"] for r in cheap["data"]["topWords"]] == ["kafka", "spark", "franz"]
    assert refused(dear, "QUERY_TOO_COSTLY", "MAX_COST")["extensions"]["actual"] == 4000
    assert len(default["data"]["topWords"]) == 4  # 4 x 10 = 40


@pytest.mark.parametrize(
    ("query", "variables", "cost"),
    [
        ('{ wordCounts(words: ["a", "b", "c", "d", "e"]) { count } }', None, 5),
        ("query($w: [String!]!) { wordCounts(words: $w) { count } }", {"w": ["a"] * 7}, 7),
        ('{ wordCounts(words: "one") { count } }', None, 1),
        ('{ wordCount(word: "a") { count } }', None, 1),
        ("{ topWords { word } }", None, P * 10),
        (f"{{ topHostsPerMinute(limit: 7, window: {WINDOW}) {{ host }} }}", None, P * 7),
        ('{ bookingHistory(customer: "c") { edges { cursor } } }', None, 100),
        ('{ bookingHistory(customer: "c", first: 3) { edges { cursor } } }', None, 3),
        ('{ hostAccessWindows(host: "h") { count } }', None, 24 * 60 + 1),
        ('{ lastBookings(customers: ["a", "b"]) { trip } }', None, 2),
        ("{ cluster { unassigned } __typename }", None, 1),
        # fields of one response key run once, however often fragments repeat them
        ("query { ...T ...T } fragment T on Query { topWords(limit: 2) { word } }", None, 2 * P),
        (
            "query { ...T t: topWords(limit: 2) { count } } "
            "fragment T on Query { t: topWords(limit: 2) { word } topWords { word } }",
            None,
            2 * P + 10 * P,
        ),
        (
            '{ _entities(representations: [{__typename: "WordCount", word: "a"}, '
            '{__typename: "WordCount", word: "b"}]) { __typename } }',
            None,
            2,
        ),
    ],
)
def test_what_each_field_costs(query: str, variables: dict[str, Any] | None, cost: int) -> None:
    """At max_cost = cost the query runs; at cost - 1 it is refused, naming exactly its cost."""
    (admitted,) = ask([(query, variables)], GatewayConfig(max_cost=cost), FULL)
    assert "errors" not in admitted, admitted
    if cost > 1:
        (over,) = ask([(query, variables)], GatewayConfig(max_cost=cost - 1), FULL)
        error = refused(over, "QUERY_TOO_COSTLY", "STATEFED_GATEWAY_MAX_COST")
        assert error["extensions"]["actual"] == cost


@pytest.mark.parametrize(
    ("query", "variables", "cost"),
    [
        ("{ allWordCounts { edges { cursor } } }", None, P * 100),
        ("{ allWordCounts(first: 7) { edges { cursor } } }", None, P * 7),
        ('{ allWordCounts(last: 9, before: "x") { edges { cursor } } }', None, P * 9),
        ("query($n: Int) { allLastBookings(last: $n) { edges { cursor } } }", {"n": 3}, P * 3),
        ("{ allBookingHistory(first: 5000) { edges { cursor } } }", None, P * 1000),
    ],
)
def test_a_scan_page_costs_its_size_times_the_partitions(
    query: str, variables: dict[str, Any] | None, cost: int
) -> None:
    """Whatever its cursor: every partition reads a slice of the page's size."""
    (over,) = ask([(query, variables)], GatewayConfig(max_cost=cost - 1), FULL)
    error = refused(over, "QUERY_TOO_COSTLY", "STATEFED_GATEWAY_MAX_COST")
    assert error["extensions"]["actual"] == cost
    (admitted,) = ask([(query, variables)], GatewayConfig(max_cost=cost), FULL)
    assert all(e["extensions"]["code"] != "QUERY_TOO_COSTLY" for e in admitted.get("errors", []))


def test_sizes_out_of_bounds_are_bad_input_not_cost() -> None:
    bodies = ask(
        [
            "{ topWords(limit: 2000000000) { word } }",
            ("query($n: Int!) { topWords(limit: $n) { word } }", {"n": 5000}),
            '{ bookingHistory(customer: "c", first: 100000) { edges { cursor } } }',
        ],
        GatewayConfig(max_cost=4000),
        FULL,
    )
    assert [codes(b) for b in bodies] == [["BAD_USER_INPUT"]] * 3, bodies


def test_representations_over_their_bound_are_bad_input_not_cost() -> None:
    """Each representation costs one point lookup, counted up to
    STATEFED_GATEWAY_MAX_ENTITIES; past it the call is refused with the field's own error,
    before the representations are read."""
    query = "query($r: [_Any!]!) { _entities(representations: $r) { __typename } }"
    words = [{"__typename": "WordCount", "word": f"w{i}"} for i in range(5)]
    config = GatewayConfig(max_entity_representations=3, max_cost=3)
    within, over = ask([(query, {"r": words[:3]}), (query, {"r": words})], config, FULL)
    assert "errors" not in within, within
    error = refused(over, "BAD_USER_INPUT", "STATEFED_GATEWAY_MAX_ENTITIES")
    assert (error["extensions"]["actual"], error["extensions"]["limit"]) == (5, 3)


def test_a_key_list_over_its_bound_in_a_variable_is_refused_before_it_is_read() -> None:
    """Coercing a variable checks each of its values: a list of 200,000 keys kept the
    event loop for 0.3 s before the field refused it. Past STATEFED_GATEWAY_MAX_KEYS the
    request is refused with the field's own error before any value is read."""
    query = "query($w: [String!]!) { wordCounts(words: $w) { word count } }"
    config = GatewayConfig(max_lookup_keys=3)
    keys = ["kafka", "franz", "spark", "flink"]
    within, over, literal = ask(
        [
            (query, {"w": keys[:3]}),
            (query, {"w": keys}),
            '{ wordCounts(words: ["a", "b", "c", "d"]) { word } }',
        ],
        config,
    )
    assert [r["count"] for r in within["data"]["wordCounts"]] == [5, 3, 5], within
    assert codes(over) == ["BAD_USER_INPUT"] and "data" not in over, over
    message = "view word_counts: at most 3 words per request"
    assert over["errors"][0]["message"] == message
    assert over["errors"][0]["locations"] == [{"line": 1, "column": 25}]
    assert literal["errors"][0]["message"] == message and "data" not in literal, literal


def test_a_fragment_bomb_is_measured_without_expanding_it() -> None:
    """2**40 spreads of one aliased field through 40 fragments that each spread the next one
    twice: the walk visits each fragment once, and counts the alias once per spread."""
    bomb = "query { ...F0 } " + " ".join(
        f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }}" for i in range(40)
    )
    bomb += ' fragment F40 on Query { a: wordCount(word: "kafka") { count } }'
    fine = "query { ...F0 } fragment F0 on Query { ...F1 ...F1 } "
    fine += 'fragment F1 on Query { wordCount(word: "kafka") { count } }'
    config = GatewayConfig(max_aliases=1, max_root_fields=1, max_cost=1)
    refused_body, fine_body = ask([bomb, fine], config)
    error = refused(refused_body, "TOO_MANY_ALIASES", "STATEFED_GATEWAY_MAX_ALIASES")
    assert error["extensions"]["actual"] > 2**40
    # spread twice, but no alias: one repeat of one response key
    assert fine_body.get("data") == {"wordCount": {"count": 5}}, fine_body


def test_the_operation_named_is_the_one_measured() -> None:
    document = f"query Dear {TOP} query Cheap {{ cluster {{ unassigned }} }}"

    async def scenario() -> list[dict[str, Any]]:
        nodes = fake_nodes(Model.of_counts(COUNTS), P, 2)
        async with running_gateway(nodes, P, GatewayConfig(max_cost=10)) as http:
            bodies = []
            for name in ("Cheap", "Dear"):
                payload = {"query": document, "operationName": name}
                bodies.append((await http.post("/graphql", json=payload)).json())
            return bodies

    cheap, dear = asyncio.run(scenario())
    assert cheap["data"] == {"cluster": {"unassigned": []}}
    refused(dear, "QUERY_TOO_COSTLY", "STATEFED_GATEWAY_MAX_COST")


def test_a_document_is_analyzed_once() -> None:
    async def scenario() -> tuple[int, int]:
        app = GatewayApp(GatewayConfig(), feed=RoutingFeed(), client=httpx.AsyncClient())
        await app.startup()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                for _ in range(3):
                    await http.post("/graphql", json={"query": "{ cluster { unassigned } }"})
        finally:
            await app.shutdown()
        info = app._documents.cache_info()  # parse, validation and shape: one entry
        return info.misses, info.hits

    assert asyncio.run(scenario()) == (1, 2)


def test_introspection_can_be_turned_off_but_typename_still_works() -> None:
    config = GatewayConfig.from_env({"STATEFED_GATEWAY_INTROSPECTION": "false"})
    schema, type_, service, typename = ask(
        [
            "{ __schema { queryType { name } } }",
            'query { ...T } fragment T on Query { __type(name: "WordCount") { name } }',
            "{ _service { sdl } }",  # federation's: the whole SDL
            '{ __typename wordCount(word: "kafka") { __typename count } }',
        ],
        config,
    )
    error = refused(schema, "INTROSPECTION_DISABLED", "STATEFED_GATEWAY_INTROSPECTION")
    assert error["extensions"] == {"code": "INTROSPECTION_DISABLED"}
    refused(type_, "INTROSPECTION_DISABLED", "STATEFED_GATEWAY_INTROSPECTION")
    refused(service, "INTROSPECTION_DISABLED", "STATEFED_GATEWAY_INTROSPECTION")
    assert typename["data"] == {
        "__typename": "Query",
        "wordCount": {"__typename": "WordCount", "count": 5},
    }


@pytest.mark.parametrize(
    "query",
    [
        "query($k: String!) { wordCount(word: $k) { count } }",
        "query($k: String!) { wordCounts(words: [$k]) { count } }",
        "query($k: String!) { lastBooking(customer: $k) { trip } }",
        "query($k: String!) { bookingHistory(customer: $k) { edges { cursor } } }",
        "query($k: String!) { hostAccessWindows(host: $k) { count } }",
    ],
)
def test_keys_longer_than_the_limit_in_utf8_bytes_are_bad_input(query: str) -> None:
    longest, too_long = "é" * 512, "é" * 512 + "x"  # 1024 and 1025 bytes
    fits, refused_key = ask([(query, {"k": longest}), (query, {"k": too_long})], catalogue=FULL)
    assert "errors" not in fits, fits
    assert codes(refused_key) == ["BAD_USER_INPUT"]
    assert "1025 bytes" in refused_key["errors"][0]["message"]
    assert "STATEFED_GATEWAY_MAX_KEY_BYTES" in refused_key["errors"][0]["message"]
    (small,) = ask([(query, {"k": "abcd"})], GatewayConfig(max_key_bytes=3), FULL)
    assert codes(small) == ["BAD_USER_INPUT"]


def test_bodies_and_query_strings_over_the_limit_are_refused_with_json() -> None:
    config = GatewayConfig(max_body_bytes=2048)
    padding = " " * 2100

    async def scenario() -> list[httpx.Response]:
        nodes = fake_nodes(Model.of_counts(COUNTS), P, 2)
        async with running_gateway(nodes, P, config) as http:
            query = "{ cluster { unassigned } }"
            return [
                await http.post("/graphql", json={"query": query + padding}),
                await http.post("/graphql", json={"query": query + " " * 1900}),
                await http.get("/graphql", params={"query": query + padding}),
                await http.get("/graphql", params={"query": query}),
            ]

    big, fits, long_url, short_url = asyncio.run(scenario())
    assert big.status_code == 413
    assert big.headers["content-type"] == "application/json; charset=utf-8"
    assert codes(big.json()) == ["PAYLOAD_TOO_LARGE"]
    assert "STATEFED_GATEWAY_MAX_BODY_BYTES" in big.json()["errors"][0]["message"]
    assert fits.status_code == 200 and "errors" not in fits.json()
    assert long_url.status_code == 414 and codes(long_url.json()) == ["URI_TOO_LONG"]
    assert short_url.json()["data"] == {"cluster": {"unassigned": []}}


def test_a_streamed_body_without_length_is_cut_at_the_limit() -> None:
    async def chunks() -> Any:
        for _ in range(10):
            yield b" " * 1000

    async def scenario() -> httpx.Response:
        nodes = fake_nodes(Model.of_counts(COUNTS), P, 1)
        async with running_gateway(nodes, P, GatewayConfig(max_body_bytes=4096)) as http:
            json = {"content-type": "application/json"}
            return await http.post("/graphql", content=chunks(), headers=json)

    response = asyncio.run(scenario())
    assert response.status_code == 413
    assert codes(response.json()) == ["PAYLOAD_TOO_LARGE"]


def _shape_of(limits: QueryLimits, query: str) -> Shape:
    document = parse(query)
    operation = document.definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    return limits.analyze(document, operation)


def _codes(errors: Sequence[GraphQLError]) -> list[str]:
    return [error_extensions(e, lambda _: None)["code"] for e in errors]


def test_a_verdict_no_variable_can_change_is_kept_with_the_shape() -> None:
    config = GatewayConfig(max_cost=10, max_aliases=3)
    limits = QueryLimits(config, build_schema((WORDS,))._schema, (WORDS,))
    partitions_read: list[str] = []

    def partitions(view: View) -> int:
        partitions_read.append(view.name)
        return P

    point = _shape_of(limits, "query($k: String!) { wordCount(word: $k) { count } }")
    many = _shape_of(limits, '{ wordCounts(words: ["a", "b"]) { count } }')
    assert point.settled and many.settled
    assert limits.check_shape(point, {"k": "x" * 10_000}, partitions) == []
    # what variables or P decide is checked per request
    top = _shape_of(limits, "query($n: Int!) { topWords(limit: $n) { count } }")
    keys = _shape_of(limits, "query($ks: [String!]!) { wordCounts(words: $ks) { count } }")
    assert not top.settled and not keys.settled
    assert limits.check_shape(top, {"n": 2}, partitions) == []
    assert _codes(limits.check_shape(top, {"n": 3}, partitions)) == ["QUERY_TOO_COSTLY"]
    assert partitions_read == [WORDS.name, WORDS.name]
    assert limits.check_shape(keys, {"ks": ["a"] * 11}, partitions) != []
    # a refusal is never kept: it is made again, with its message, for each request
    aliased = _shape_of(
        limits,
        "{ a: cluster { unassigned } b: cluster { unassigned } "
        "c: cluster { unassigned } d: cluster { unassigned } }",
    )
    assert not aliased.settled
    for _ in range(2):
        errors = limits.check_shape(aliased, None, partitions)
        assert _codes(errors) == ["TOO_MANY_ALIASES"]
