"""The gateway as an Apollo Federation v2 subgraph: `_service { sdl }` and `_entities`
resolved over HTTP through fake nodes, batched per owning node, with errors per
representation and partial results."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from gateway.api.schema import build_schema
from gateway.config import GatewayConfig
from schema import EventRow, partition_for
from tests.gateway.fakes import (
    FULL,
    HOST_PAGES,
    HOSTS,
    LAST_BOOKING,
    WORDS,
    FakeNode,
    Model,
    codes,
    fake_nodes,
    feed_for,
    post_query,
    running_gateway,
    to_iso,
)

P = 6
T0 = 1_700_000_000_000
ENTITIES = """query($r: [_Any!]!) {
  _entities(representations: $r) {
    __typename
    ... on WordCount { word count }
    ... on HostAccess { host count }
    ... on LastBooking { customer trip eventTime }
  }
}"""


def truth() -> Model:
    model = Model(
        counts={
            WORDS.name: {f"w{i:02d}": i + 1 for i in range(20)},
            HOSTS.name: {"a.example": 7, "b.example": 2},
        }
    )
    for i in range(10):
        event = EventRow(f"c{i}", T0 + i * 1000, i % P, i, {"trip": f"trip-{i}"})
        model.add_event(LAST_BOOKING, event)
    return model


def expected(model: Model, representation: dict[str, str]) -> dict[str, Any] | None:
    """The entity a representation stands for, as the gateway must answer it."""
    name = representation["__typename"]
    if name == LAST_BOOKING.type_name:
        event = model.latest(LAST_BOOKING, representation["customer"])
        if event is None:
            return None
        time = to_iso(event.event_ms).replace("Z", "+00:00")
        return {"__typename": name, "customer": event.key, "trip": event.fields["trip"]} | {
            "eventTime": time
        }
    view = WORDS if name == WORDS.type_name else HOSTS
    key = representation[view.key_field]
    count = model.counts[view.name].get(key)
    return None if count is None else {"__typename": name, view.key_field: key, "count": count}


def resolve(
    nodes: list[FakeNode],
    representations: list[Any],
    config: GatewayConfig | None = None,
    extra: dict[str, httpx.AsyncBaseTransport] | None = None,
) -> dict[str, Any]:
    async def scenario() -> dict[str, Any]:
        feed = feed_for(nodes, P)
        async with running_gateway(nodes, P, config, feed, extra, FULL) as http:
            status, body = await post_query(http, ENTITIES, {"r": representations})
            assert status == 200, body
            return body

    return asyncio.run(scenario())


def test_service_sdl_is_the_printed_schema_with_keys_on_count_latest_and_aggregate_types() -> None:
    async def scenario() -> dict[str, Any]:
        async with running_gateway([], P, catalogue=FULL) as http:
            return (await post_query(http, "{ _service { sdl } }"))[1]

    sdl = asyncio.run(scenario())["data"]["_service"]["sdl"]
    assert sdl == build_schema(FULL).as_str()
    assert "https://specs.apollo.dev/federation/v2" in sdl
    for view in (WORDS, HOSTS, LAST_BOOKING, HOST_PAGES):
        assert f'type {view.type_name} @key(fields: "{view.key_field}"' in sdl
    assert "type HostAccessWindow {" in sdl and "type BookingEvent {" in sdl  # no entities
    assert "union _Entity = HostAccess | HostPages | LastBooking | WordCount" in sdl


@pytest.mark.parametrize("node_count", [1, 3])
def test_entities_are_resolved_in_order_one_request_per_owning_node_and_view(
    node_count: int,
) -> None:
    model = truth()
    nodes = fake_nodes(model, P, node_count, FULL)
    representations = [
        {"__typename": "WordCount", "word": "w03"},
        {"__typename": "LastBooking", "customer": "c4"},
        {"__typename": "WordCount", "word": "nope"},
        {"__typename": "HostAccess", "host": "a.example"},
        {"__typename": "LastBooking", "customer": "nobody"},
        *({"__typename": "WordCount", "word": f"w{i:02d}"} for i in range(10, 20)),
        {"__typename": "WordCount", "word": "w03"},
    ]
    body = resolve(nodes, representations)
    assert "errors" not in body
    assert body["data"]["_entities"] == [expected(model, r) for r in representations]
    assert {p["partition"] for p in body["extensions"]["freshness"]} <= set(range(P))
    for node in nodes:
        assert set(node.fields_asked) <= {"_entities"}
        # each view's keys reach each owning node in one request
        assert sorted(node.entities_asked) == sorted(set(node.entities_asked))
        assert node.requests == len(node.entities_asked)
    asked = sorted(k for n in nodes for k in n.keys_asked)
    keys = {r.get("word") or r.get("host") or r.get("customer") or "" for r in representations}
    assert asked == sorted(keys)


def test_a_bad_representation_fails_alone() -> None:
    model = truth()
    nodes = fake_nodes(model, P, 2, FULL)
    representations: list[Any] = [
        {"__typename": "WordCount", "word": "w01"},
        {"__typename": "HostAccessWindow", "host": "a.example"},  # not an entity
        {"__typename": "WordCount"},
        {"__typename": "LastBooking", "customer": ""},
        "w02",
        {"__typename": "HostAccess", "host": "b.example"},
        {"__typename": "WordCount", "word": "x" * 5000},  # longer than a key may be
    ]
    body = resolve(nodes, representations)
    entities = body["data"]["_entities"]
    assert entities[0] == expected(model, representations[0])
    assert entities[5] == expected(model, representations[5])
    assert entities[1:5] == [None] * 4 and entities[6] is None
    errors = {tuple(e["path"]): e for e in body["errors"]}
    assert sorted(errors) == [("_entities", i) for i in (1, 2, 3, 4, 6)]
    assert codes(body) == ["BAD_USER_INPUT"] * 5
    assert "5000 bytes of UTF-8" in errors[("_entities", 6)]["message"]
    assert errors[("_entities", 1)]["extensions"]["representation"] == 1
    assert "no entity type 'HostAccessWindow'" in errors[("_entities", 1)]["message"]
    assert "'word'" in errors[("_entities", 2)]["message"]
    assert errors[("_entities", 3)]["extensions"]["view"] == LAST_BOOKING.name


def test_unavailable_partitions_are_errors_at_their_first_representation() -> None:
    model = truth()
    nodes = fake_nodes(model, P, 2, FULL)
    dead = nodes[1]

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    words = [f"w{i:02d}" for i in range(20)]
    representations = [{"__typename": "WordCount", "word": w} for w in words]
    extra: dict[str, httpx.AsyncBaseTransport] = {dead.url(): httpx.MockTransport(refuse)}
    body = resolve(nodes, representations, GatewayConfig(retries=0), extra)
    lost = [i for i, w in enumerate(words) if partition_for(w, P) in dead.held]
    assert lost, "the dead node holds none of the words: pick other words"
    entities = body["data"]["_entities"]
    for i, representation in enumerate(representations):
        assert entities[i] == (None if i in lost else expected(model, representation))
    first_of: dict[int, int] = {}
    for i in lost:
        first_of.setdefault(partition_for(words[i], P), i)
    assert sorted((e["extensions"]["partition"], e["path"]) for e in body["errors"]) == sorted(
        (p, ["_entities", i]) for p, i in first_of.items()
    )
    assert set(codes(body)) == {"PARTITION_UNAVAILABLE"}


def test_a_router_batch_may_hold_more_representations_than_a_lookup_keys() -> None:
    model = truth()
    nodes = fake_nodes(model, P, 1, FULL)
    config = GatewayConfig(max_lookup_keys=3, max_entity_representations=8)
    representations = [{"__typename": "WordCount", "word": f"w{i:02d}"} for i in range(8)]
    body = resolve(nodes, representations, config)
    assert "errors" not in body, body["errors"]
    assert body["data"]["_entities"] == [expected(model, r) for r in representations]


def test_too_many_representations_is_one_error_for_the_field() -> None:
    nodes = fake_nodes(truth(), P, 1, FULL)
    config = GatewayConfig(max_lookup_keys=3, max_entity_representations=4)
    representations = [{"__typename": "WordCount", "word": f"w{i:02d}"} for i in range(5)]
    body = resolve(nodes, representations, config)
    assert "data" not in body  # refused before the representations are read
    assert codes(body) == ["BAD_USER_INPUT"]
    [error] = body["errors"]
    assert "5 representations, at most 4" in error["message"]
    assert "STATEFED_GATEWAY_MAX_ENTITIES" in error["message"]
    assert (error["extensions"]["actual"], error["extensions"]["limit"]) == (5, 4)
    assert nodes[0].requests == 0
