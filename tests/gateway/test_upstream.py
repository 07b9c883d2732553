"""Node calls: pre-built bodies, and every kind of broken answer mapped to its routing error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import orjson
import pytest

from gateway.metrics import GatewayMetrics
from gateway.model.errors import (
    BadRequestError,
    NodeProtocolError,
    NodeTimeoutError,
    NodeUnavailableError,
    NotOwnerError,
    RoutingError,
)
from gateway.nodes.reply import NodeReply
from gateway.nodes.transport import HttpxCaller
from gateway.nodes.upstream import Upstream
from gateway.reads.kinds import view_queries
from tests.gateway.fakes import WORDS, table_for


def test_bodies_are_the_documents_plus_variables() -> None:
    queries = view_queries(WORDS)
    assert orjson.loads(queries.lookup_body(["kafka", 'qu"ote'])) == {
        "query": "query($r:[_Any!]!){r:_entities(representations:$r)"
        "{...on WordCount{k:word c:count}}}",
        "variables": {
            "r": [
                {"__typename": "WordCount", "word": "kafka"},
                {"__typename": "WordCount", "word": 'qu"ote'},
            ]
        },
    }
    assert orjson.loads(queries.top_body(7, [0, 3])) == {
        "query": "query($l:Int!,$p:[Int!]){r:topWords(limit:$l,partitions:$p){k:word c:count}}",
        "variables": {"l": 7, "p": [0, 3]},
    }


def call(handler: Callable[[httpx.Request], httpx.Response]) -> NodeReply | RoutingError:
    node = table_for({"n1": ("http://n1.test", [2])}, 4).nodes["n1"]

    async def scenario() -> NodeReply | RoutingError:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            upstream = Upstream(HttpxCaller(client))
            deadline = asyncio.get_running_loop().time() + 5
            try:
                return await upstream.post(
                    node,
                    b"{}",
                    view="word_counts",
                    partitions=[2],
                    keys=["kafka"],
                    deadline=deadline,
                )
            except RoutingError as exc:
                return exc

    return asyncio.run(scenario())


def answer(status: int, body: object) -> Callable[[httpx.Request], httpx.Response]:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return lambda request: httpx.Response(status, content=content)


def test_a_good_answer_gives_data_and_freshness() -> None:
    fresh = [{"partition": 2, "node": "n1", "role": "ACTIVE", "appliedOffset": 9, "lag": 1}]
    reply = call(answer(200, {"data": {"r": [None]}, "extensions": {"freshness": fresh}}))
    assert reply == NodeReply(data=[None], freshness=fresh)


def test_not_owner_names_the_disowned_partitions() -> None:
    error = {
        "message": "no",
        "extensions": {"code": "NOT_OWNER", "partition": 2, "partitions": [2]},
    }
    reply = call(answer(200, {"data": None, "errors": [error]}))
    assert isinstance(reply, NotOwnerError)
    assert reply.partitions == (2,) and reply.node == "n1"


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def time_out(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("slow", request=request)


@pytest.mark.parametrize(
    ("handler", "kind", "text"),
    [
        (refuse, NodeUnavailableError, "ConnectError"),
        (time_out, NodeTimeoutError, "deadline"),
        (answer(503, b"busy"), NodeUnavailableError, "HTTP 503"),
        (answer(404, b"?"), NodeProtocolError, "HTTP 404"),
        (answer(200, b"<html>"), NodeProtocolError, "not JSON"),
        (answer(200, [1]), NodeProtocolError, "not a JSON object"),
        (answer(200, {"data": {}}), NodeProtocolError, "no data"),
        (answer(200, {"errors": [{"message": "boom"}]}), NodeProtocolError, "boom"),
        (answer(200, {"errors": "boom"}), NodeProtocolError, "boom"),
    ],
)
def test_broken_answers_become_routing_errors(
    handler: Callable[[httpx.Request], httpx.Response], kind: type[RoutingError], text: str
) -> None:
    reply = call(handler)
    assert type(reply) is kind
    assert text in str(reply)
    assert "view word_counts" in str(reply) and "partition 2" in str(reply)
    assert "'kafka'" in str(reply) and "node n1" in str(reply)


def test_a_node_rejecting_the_arguments_is_the_clients_mistake() -> None:
    error = {"message": "bad cursor 'QUJD'", "extensions": {"code": "BAD_USER_INPUT"}}
    with pytest.raises(
        BadRequestError, match="node n1 rejected the arguments: bad cursor"
    ) as raised:
        call(answer(200, {"data": None, "errors": [error]}))
    assert raised.value.extensions() == {"code": "BAD_USER_INPUT", "view": "word_counts"}


def _failures(metrics: GatewayMetrics, reason: str) -> float | None:
    name = "statefed_gateway_node_call_failures_total"
    return metrics.registry.get_sample_value(name, {"node": "n1", "reason": reason})


def _post(
    metrics: GatewayMetrics, handler: Callable[[httpx.Request], httpx.Response], in_s: float
) -> RoutingError | None:
    """One call to node n1 through `handler`, due `in_s` seconds from now: its error."""
    node = table_for({"n1": ("http://n1.test", [2])}, 4).nodes["n1"]

    async def scenario() -> RoutingError | None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            upstream = Upstream(HttpxCaller(client), metrics=metrics)
            deadline = asyncio.get_running_loop().time() + in_s
            try:
                await upstream.post(
                    node, b"{}", view="word_counts", partitions=[2], deadline=deadline
                )
            except RoutingError as exc:
                return exc
            return None

    return asyncio.run(scenario())


def test_a_nodes_failures_of_either_reason_are_exported_at_0_from_its_first_call() -> None:
    """`increase()` takes a series' first sample as its start: a counter that appeared with
    the node's first timeout would show no increase for it."""
    metrics = GatewayMetrics()
    assert _post(metrics, answer(200, {"data": {"r": [None]}}), 5) is None
    assert _failures(metrics, "timeout") == _failures(metrics, "unavailable") == 0
    assert isinstance(_post(metrics, time_out, 5), NodeTimeoutError)
    assert isinstance(_post(metrics, refuse, 5), NodeUnavailableError)
    assert _failures(metrics, "timeout") == _failures(metrics, "unavailable") == 1


def test_a_call_past_its_deadline_is_not_sent_nor_counted_against_the_node() -> None:
    metrics, sent = GatewayMetrics(), []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, content=b'{"data": {"r": [null]}}')

    error = _post(metrics, handler, -0.001)
    assert isinstance(error, NodeTimeoutError) and "deadline" in str(error)
    assert not sent
    assert not _failures(metrics, "timeout")
