"""The node's fast lookups (node.subgraph.fastlookups) answer exactly as execution: a node endpoint
with them on and its twin with them off, both under uvicorn on loopback over one registry
of real LevelDB stores, get the same lookup requests (hypothesis over keys present and
absent, batch sizes, count and latest views, readStandby and appliedAtLeast, bad
representations and variables, both media types); the HTTP status, content type and body
bytes must be equal. The gateway's own lookup documents must be the ones recognized."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import parse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.reads.kinds import view_queries
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.fastlookups import FastLookups
from node.subgraph.fields.common import MAX_KEYS
from node.subgraph.schema import build_subgraph, entities_of
from schema import (
    CATALOGUE,
    WORD_COUNTS,
    CountRow,
    EventRow,
    FieldType,
    Role,
    ValueField,
    ViewKind,
    partition_for,
    view_by_name,
)
from tests.gateway.fakes import ServerThread

P = 4
HELD = {1: Role.ACTIVE, 2: Role.STANDBY, 3: Role.ACTIVE}  # partition 0 is held elsewhere
LATEST = dataclasses.replace(
    view_by_name("last_booking"),
    value_fields=(
        ValueField("trip"),
        ValueField("seats", FieldType.INT),
        ValueField("price", FieldType.FLOAT),
        ValueField("paid", FieldType.BOOLEAN),
    ),
)
VIEWS = (WORD_COUNTS, LATEST)
NOW = 1_700_000_000_000
# counts: one beyond a GraphQL Int, which execution reports as an error
COUNTS = {f"w{i}": i * 7 for i in range(12)} | {"big": 2**31, "é": 3}
# value fields of every kind, and of the wrong kinds (null once read)
EVENTS = {
    "c0": {"trip": "t0", "seats": 2, "price": 3, "paid": True},
    "c1": {"trip": 5, "seats": 2**40, "price": 1.5, "paid": "yes"},
    "c2": {},
    "c3": {"trip": "", "seats": -1, "price": -0.0, "paid": False},
    "c4": {"trip": "ü", "seats": 1.5, "price": True, "paid": None},
    "c5": {"trip": "t5", "seats": 0, "price": 1e300},
}
ABSENT = ["nope", "zz", "w99", "c9"]
ALL_KEYS = sorted({*COUNTS, *EVENTS, *ABSENT})


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PartitionRegistry]:
    """One node holding partitions 1 and 3 ACTIVE and 2 STANDBY of both views."""
    root: Path = tmp_path_factory.mktemp("fastlookups")
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({v.changelog_topic: P for v in VIEWS})
    stores = []
    for partition, role in HELD.items():
        store = LevelDBStore(root / f"partition-{partition}").open()
        change = ChangeBatch(offsets={v.changelog_topic: 10 + partition for v in VIEWS})
        for key, count in COUNTS.items():
            if partition_for(key, P) == partition:
                change.put_count(WORD_COUNTS.name, CountRow(key, count, 0))
        for n, (key, fields) in enumerate(EVENTS.items()):
            if partition_for(key, P) == partition:
                change.put_latest(LATEST.name, EventRow(key, NOW - n * 1001, partition, n, fields))
        store.apply(change)
        registry.attach(partition, store, role, store.offsets())
        stores.append(store)
    yield registry
    for partition in HELD:
        registry.detach(partition)
    for store in stores:
        store.close()


@dataclasses.dataclass
class Twins:
    on: str
    off: str
    fast: GraphQLEndpoint  # the one with fast lookups on


def _node(registry: PartitionRegistry, fast: bool) -> GraphQLEndpoint:
    config = NodeConfig(fast_lookups=fast)
    return GraphQLEndpoint(build_subgraph(VIEWS), registry, lambda: NOW, config)


@pytest.fixture(scope="module")
def nodes(registry: PartitionRegistry) -> Iterator[Twins]:
    fast = _node(registry, True)
    with ServerThread(fast) as on, ServerThread(_node(registry, False)) as off:
        yield Twins(f"{on.url}/graphql", f"{off.url}/graphql", fast)


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as http:
        yield http


def _post(client: httpx.Client, url: str, body: bytes, accept: str) -> tuple[Any, ...]:
    headers = {"content-type": "application/json", "accept": accept, "x-request-id": "r-1"}
    response = client.post(url, content=body, headers=headers)
    return response.status_code, response.headers.get("content-type"), response.content


def _same(client: httpx.Client, nodes: Twins, body: bytes, accept: str) -> tuple[Any, ...]:
    """Both nodes' answer to `body`, asserted equal; the fast one's."""
    fast = _post(client, nodes.on, body, accept)
    executed = _post(client, nodes.off, body, accept)
    assert fast == executed, body
    return fast


# -- the requests -------------------------------------------------------------------------

# the gateway's document, the same shape written otherwise, and shapes that are not it
_SPACED = (
    "query ( $r : [_Any!]! ) # the gateway's, spaced\n"
    "{ r: _entities(representations: $r) { ... on {type} { {fields} } } }"
)


def _documents(view: Any) -> list[str]:
    gateway = view_queries(view).documents.lookup
    fields = gateway.split("{...on ", 1)[1].split("{", 1)[1].split("}", 1)[0]
    spaced = _SPACED.replace("{type}", view.type_name).replace("{fields}", fields)
    typename = gateway.replace("{k:", "{__typename k:")
    return [gateway, gateway, spaced, typename, gateway.replace("query(", "query Named(")]


ACTIVE_KEYS = [k for k in ALL_KEYS if HELD.get(partition_for(k, P)) is Role.ACTIVE]
HELD_KEYS = [k for k in ALL_KEYS if partition_for(k, P) in HELD]


def _good(view: Any, keys: list[str] = ACTIVE_KEYS) -> st.SearchStrategy[Any]:
    """A representation of the view's type with one of `keys`."""
    key = st.sampled_from(keys)
    return key.map(lambda k: {"__typename": view.type_name, view.key_field: k})


def _representation(view: Any) -> st.SearchStrategy[Any]:
    """Any representation: good, of any key, of another type, or bad."""
    other = LATEST if view is WORD_COUNTS else WORD_COUNTS
    key = st.one_of(st.sampled_from(ALL_KEYS), st.text(max_size=4))
    odd = st.one_of(
        key.map(lambda k: {"__typename": view.type_name, view.key_field: k}),
        key.map(lambda k: {"__typename": other.type_name, other.key_field: k}),
        key.map(lambda k: {"__typename": "Nope", view.key_field: k}),
        key.map(lambda k: {"__typename": view.type_name, view.key_field: k, "x": [1]}),
        st.sampled_from(
            [
                {"__typename": view.type_name, view.key_field: ""},
                {"__typename": view.type_name, view.key_field: 5},
                {"__typename": view.type_name, view.key_field: None},
                {"__typename": view.type_name},
                {view.key_field: "w1"},
                None,
                "w1",
                [],
            ]
        ),
    )
    return st.one_of(_good(view), odd)


_EXTENSIONS = st.sampled_from(
    [
        None,
        {"readStandby": True},
        {"readStandby": False},
        {"readStandby": "yes"},
        {"readStandby": True, "appliedAtLeast": "later"},
    ]
)


@st.composite
def _requests(draw: st.DrawFn) -> tuple[bytes, bool, str]:
    """A request body, whether it is a plain lookup of the gateway's, and its Accept."""
    view = draw(st.sampled_from(VIEWS))
    keys = draw(st.sampled_from([ACTIVE_KEYS, ACTIVE_KEYS, HELD_KEYS]))  # standby ones too
    document = draw(st.sampled_from(_documents(view)))
    representations = draw(
        st.one_of(
            st.lists(_good(view, keys), max_size=12),
            st.lists(_good(view, keys), min_size=30, max_size=60),
            st.lists(_representation(view), max_size=12),
            st.sampled_from([None, "w1", {"__typename": view.type_name, view.key_field: "w1"}]),
        )
    )
    body: dict[str, Any] = {"query": document}
    shape = draw(st.sampled_from(["r", "r", "r", "none", "other", "extra"]))
    if shape == "r":
        body["variables"] = {"r": representations}
    elif shape == "other":
        body["variables"] = {"s": representations}
    elif shape == "extra":
        body["variables"] = {"r": representations, "s": 1}
    extensions = draw(_EXTENSIONS if keys is ACTIVE_KEYS else st.just({"readStandby": True}))
    topic = view.changelog_topic
    applied = draw(st.sampled_from([None, None, None, {"1": 11}, {"1": 12}, {"2": 1}, {"0": 1}]))
    if applied is not None:
        extensions = {**(extensions or {}), "appliedAtLeast": _applied(topic, applied)}
    if extensions is not None:
        body["extensions"] = extensions
    accept = draw(st.sampled_from(["application/json", "application/graphql-response+json"]))
    plain = document == view_queries(view).documents.lookup and shape == "r"
    return json.dumps(body).encode(), plain, accept


def _applied(topic: str, offsets: dict[str, int]) -> dict[str, Any]:
    return {"topic": topic, "offsets": offsets, "waitMs": 0}


def test_fast_lookups_answer_as_execution(client: httpx.Client, nodes: Twins) -> None:
    """Every request gets the same status, content type and bytes from both nodes; many of
    the gateway's plain lookups are answered fast, and some are not (a bad input)."""
    declined = []

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_requests())
    def check(request: tuple[bytes, bool, str]) -> None:
        body, plain, accept = request
        before = nodes.fast.fast_answered
        _same(client, nodes, body, accept)
        if plain and nodes.fast.fast_answered == before:
            declined.append(body)

    start = nodes.fast.fast_answered
    check()
    assert nodes.fast.fast_answered - start >= 50, "few lookups were answered fast"
    assert len(declined) >= 10, "no plain lookup fell back to execution"


def _lookup_body(view: Any, keys: list[str], extensions: dict[str, Any] | None = None) -> bytes:
    body = view_queries(view).lookup_body(keys)
    if extensions is None:
        return body
    return body[:-1] + b',"extensions":' + json.dumps(extensions).encode() + b"}"


@pytest.mark.parametrize(
    ("view", "keys", "extensions", "fast"),
    [
        (WORD_COUNTS, ["w1", "nope", "w4", "w1"], None, True),
        (WORD_COUNTS, [], None, True),
        (LATEST, [*EVENTS, "nope"], {"readStandby": True}, True),
        (WORD_COUNTS, ["big"], {"readStandby": True}, False),  # beyond Int: a field error
        (WORD_COUNTS, ["w1", ""], None, False),  # an empty key: BAD_USER_INPUT
        (WORD_COUNTS, ["w1"] * (MAX_KEYS + 1), None, False),  # too many keys
        (WORD_COUNTS, ALL_KEYS, None, False),  # some not held: NOT_OWNER
        (LATEST, list(EVENTS), {"readStandby": False}, False),  # standby copies not read
    ],
)
def test_fast_or_not(
    client: httpx.Client,
    nodes: Twins,
    view: Any,
    keys: list[str],
    extensions: dict[str, Any] | None,
    fast: bool,
) -> None:
    """The gateway's lookups are answered fast exactly when nothing is unusual, and alike."""
    before = nodes.fast.fast_answered
    status, _, content = _same(client, nodes, _lookup_body(view, keys, extensions), "*/*")
    assert nodes.fast.fast_answered - before == (1 if fast else 0)
    answer = json.loads(content)
    assert status == 200
    assert ("errors" in answer) is not fast
    if fast:
        assert len(answer["data"]["r"]) == len(keys)


def test_a_fast_answer_reads_the_stores(client: httpx.Client, nodes: Twins) -> None:
    """What a fast lookup answers: the rows and nulls in order, values coerced by their
    scalars, one freshness entry per partition read."""
    body = _lookup_body(LATEST, ["c0", "nope", "c1"], {"readStandby": True})
    answer = json.loads(_same(client, nodes, body, "application/json")[2])
    assert answer["data"]["r"][0] == {
        "k": "c0",
        "t": "2023-11-14T22:13:20+00:00",
        "v0": "t0",
        "v1": 2,
        "v2": 3.0,
        "v3": True,
    }
    assert answer["data"]["r"][1] is None
    assert answer["data"]["r"][2] == {
        "k": "c1",
        "t": "2023-11-14T22:13:18.999000+00:00",
        "v0": None,
        "v1": None,
        "v2": 1.5,
        "v3": None,
    }
    read = {partition_for(k, P) for k in ("c0", "nope", "c1")}
    freshness = answer["extensions"]["freshness"]
    assert [entry["partition"] for entry in freshness] == sorted(read)


def test_the_gateways_lookups_are_recognized() -> None:
    """Every lookup document the gateway sends a node is one the node answers fast, and no
    other document of the gateway is."""
    subgraph = build_subgraph(CATALOGUE)
    lookups = FastLookups(subgraph._schema, entities_of(subgraph))
    entity_kinds = (ViewKind.COUNT, ViewKind.LATEST)
    for view in CATALOGUE:
        documents = view_queries(view).documents
        if view.kind in entity_kinds:
            found = lookups.recognize(parse(documents.lookup))
            assert found is not None and found.type_name == view.type_name, view.name
        for other in (documents.top, documents.windows, documents.history, documents.scan):
            if other:
                assert lookups.recognize(parse(other)) is None
