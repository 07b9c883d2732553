"""The shared GraphQL-over-HTTP layer over a toy schema, through its ASGI interface:
negotiation, request checks, status codes per media type, and what is never executed."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from graphql import ExecutionResult, GraphQLError, OperationDefinitionNode, build_schema, execute

import runtime.graphql_http
from runtime.graphql_http import (
    GraphQLHTTP,
    GraphQLRequest,
    MediaType,
    Outcome,
    Prepared,
    is_json_request,
    negotiate,
)

SCHEMA = build_schema("""
type Query { hello(name: String!): String  boom: String }
type Mutation { bump: Int }
""")
NEW = "application/graphql-response+json"


class Toy(GraphQLHTTP[dict[str, Any]]):
    """Counts what it executes; `boom` fails inside a field."""

    def __init__(self, max_body_bytes: int = 4096) -> None:
        super().__init__(SCHEMA, max_body_bytes, "TOY_MAX_BYTES")
        self.executed = 0

    def context(self, request: GraphQLRequest) -> dict[str, Any]:
        return {}

    async def run(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        request: GraphQLRequest,
        context: dict[str, Any],
    ) -> Outcome:
        assert prepared.document is not None
        self.executed += 1
        root = {"hello": lambda _info, name: f"hi {name}", "bump": 1}
        root["boom"] = lambda _info: _fail()
        name = operation.name.value if operation.name else None
        result = execute(SCHEMA, prepared.document, root, context, request.variables, name)
        assert isinstance(result, ExecutionResult)
        return Outcome.of(result)

    def finish(self, body: dict[str, Any], context: dict[str, Any]) -> None:
        body["extensions"] = {"ran": True}


def _fail() -> None:
    raise ValueError("boom")


def call(method: str, endpoint: Toy | None = None, **kwargs: Any) -> tuple[httpx.Response, Toy]:
    toy = endpoint or Toy()

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=toy)
        async with httpx.AsyncClient(transport=transport, base_url="http://toy") as client:
            return await client.request(method, "/graphql", **kwargs)

    return asyncio.run(send()), toy


def post(body: Any, accept: str | None = None) -> httpx.Response:
    headers = {"accept": accept} if accept else {}
    return call("POST", json=body, headers=headers)[0]


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        (None, MediaType.JSON),
        ("", MediaType.JSON),
        ("*/*", MediaType.JSON),
        ("application/json", MediaType.JSON),
        (NEW, MediaType.GRAPHQL_RESPONSE),
        (f"{NEW}, application/json;q=0.9", MediaType.GRAPHQL_RESPONSE),
        (f"application/json, {NEW}", MediaType.JSON),  # equal q: the first listed
        (f"application/json;q=0.5, {NEW}", MediaType.GRAPHQL_RESPONSE),
        ("application/json, multipart/mixed", MediaType.JSON),  # GraphiQL's fetcher
        ("text/html,application/xhtml+xml,*/*;q=0.8", MediaType.JSON),  # a browser
        (f"{NEW}; charset=utf-8", MediaType.GRAPHQL_RESPONSE),
        (f"{NEW}; charset=iso-8859-1", None),
        ("text/html", None),
        ("*/*;q=0", None),
    ],
)
def test_negotiation(accept: str | None, media: MediaType | None) -> None:
    assert negotiate(None if accept is None else accept.encode()) is media


@pytest.mark.parametrize(
    ("content_type", "json"),
    [
        ("application/json", True),
        ("Application/JSON; charset=UTF-8", True),
        ('application/json;charset="utf-8"', True),
        ("application/json; charset=iso-8859-1", False),
        (NEW, False),
        ("text/plain;charset=UTF-8", False),
        ("application/x-www-form-urlencoded", False),
        (None, False),
    ],
)
def test_json_request_content_types(content_type: str | None, json: bool) -> None:
    assert is_json_request(None if content_type is None else content_type.encode()) is json


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None]
)
def test_a_post_that_is_not_json_gets_415_and_is_not_executed(content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response, toy = call("POST", content=b'{"query": "mutation { bump }"}', headers=headers)
    assert response.status_code == 415
    assert response.json()["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA_TYPE"}
    assert toy.executed == 0


@pytest.mark.parametrize(
    ("query", "variables", "code"),
    [
        ("{", None, "GRAPHQL_PARSE_FAILED"),
        ("{ nope }", None, "GRAPHQL_VALIDATION_FAILED"),
        ("query($n: String!) { hello(name: $n) }", {"n": 3}, "BAD_USER_INPUT"),
    ],
)
def test_request_failures_are_400_without_data_only_for_the_new_media_type(
    query: str, variables: Any, code: str
) -> None:
    body = {"query": query, "variables": variables}
    legacy, new = post(body), post(body, accept=NEW)
    assert (legacy.status_code, new.status_code) == (200, 400)
    assert legacy.headers["content-type"] == "application/json; charset=utf-8"
    assert new.headers["content-type"] == f"{NEW}; charset=utf-8"
    for response in (legacy, new):
        assert response.json() == {"errors": response.json()["errors"]}  # no data, no extensions
        assert [e["extensions"]["code"] for e in response.json()["errors"]] == [code]


def test_field_errors_are_200_with_data_and_never_null_errors() -> None:
    failed = post({"query": '{ boom hello(name: "a") }'}, accept=NEW)
    assert failed.status_code == 200
    assert failed.json()["data"] == {"boom": None, "hello": "hi a"}
    assert failed.json()["errors"][0]["message"] == "internal error"
    assert failed.json()["errors"][0]["extensions"] == {
        "code": "INTERNAL_SERVER_ERROR",
        "requestId": failed.headers["x-request-id"],
    }
    fine = post({"query": '{ hello(name: "a") }'}, accept=NEW)
    assert fine.json() == {"data": {"hello": "hi a"}, "extensions": {"ran": True}}


@pytest.mark.parametrize(
    "body",
    [
        {"query": '{ hello(name: "a") }', "extensions": "x"},
        {"query": '{ hello(name: "a") }', "extensions": [1]},
        {"query": '{ hello(name: "a") }', "variables": "x"},
        {"query": '{ hello(name: "a") }', "operationName": 1},
        {"query": 3},
        {"notquery": "{ hello }"},
        [{"query": "{ hello }"}],
    ],
)
def test_malformed_parameters_are_400_bad_request(body: Any) -> None:
    for accept in (None, NEW):
        response = post(body, accept)
        assert response.status_code == 400
        assert response.json()["errors"][0]["extensions"] == {"code": "BAD_REQUEST"}


def test_several_operations_need_a_name_and_a_get_mutation_is_405() -> None:
    two = 'query A { hello(name: "a") } query B { hello(name: "b") }'
    refused = post({"query": two})
    assert refused.status_code == 400 and "operationName" in refused.text
    assert post({"query": two, "operationName": "B"}).json()["data"] == {"hello": "hi b"}
    assert post({"query": two, "operationName": "C"}).status_code == 400
    response, toy = call("GET", params={"query": "mutation { bump }"})
    assert (response.status_code, response.headers["allow"]) == (405, "POST")
    assert toy.executed == 0
    assert call("GET", params={"query": '{ hello(name: "g") }'})[0].json()["data"] == {
        "hello": "hi g"
    }
    put = call("PUT", content=b"{}")[0]
    assert (put.status_code, put.headers["allow"]) == (405, "GET, POST")


def test_bodies_and_query_strings_over_the_limit() -> None:
    query = '{ hello(name: "a") }'
    big, toy = call("POST", Toy(256), json={"query": query + " " * 300})
    assert big.status_code == 413 and toy.executed == 0
    assert "TOY_MAX_BYTES" in big.json()["errors"][0]["message"]
    long, _ = call("GET", Toy(256), params={"query": query + " " * 300})
    assert long.status_code == 414
    assert long.json()["errors"][0]["extensions"] == {"code": "URI_TOO_LONG"}
    unacceptable, _ = call("POST", json={"query": query}, headers={"accept": "text/html"})
    assert unacceptable.status_code == 406


def test_outcome_tells_coercion_failures_from_executed_nulls() -> None:
    coercion = GraphQLError("Variable '$n' got invalid value 3")
    assert not Outcome.of(ExecutionResult(None, [coercion])).executed
    field = GraphQLError("boom", path=["boom"])
    assert Outcome.of(ExecutionResult(None, [field])).executed


def test_exported_members() -> None:
    names = runtime.graphql_http.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    assert all(getattr(runtime.graphql_http, n) is not None for n in names)
