"""Literal-normalized documents answer exactly as the texts sent: a gateway and a node with
normalization on, each beside its twin with it off, all four under uvicorn on loopback over
one node's real LevelDB stores, get the same queries (hypothesis over argument values, bad
types included, written with varied spacing and comments, two texts per structure so that
the second uses the plan the first built); the HTTP status and body must be equal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.schema import build_subgraph
from runtime.graphql_http import DocumentCache
from schema import (
    DEMO_DOMAIN,
    WORD_COUNTS,
    CountRow,
    Role,
    WindowRow,
    partition_for,
    view_by_name,
)
from tests.gateway.fakes import ServerThread, table_for
from tooling.processes import poll_client

FULL = (WORD_COUNTS, *DEMO_DOMAIN)
P = 4
WINDOWED = view_by_name("host_access_per_minute", FULL)
T0 = 1_699_999_980_000  # 2023-11-14T22:13:00Z, a minute boundary
WORDS = {"kafka": 5, "franz": 3, "a": 1, "é": 2}
HOSTS = ("h1", "h2")
EXAMPLES = 120


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PartitionRegistry]:
    """One node holding every partition of every view, some words and windows written."""
    root: Path = tmp_path_factory.mktemp("literals")
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({v.changelog_topic: P for v in FULL})
    stores = []
    for partition in range(P):
        store = LevelDBStore(root / f"partition-{partition}").open()
        change = ChangeBatch(offsets={v.changelog_topic: 10 + partition for v in FULL})
        for word, count in WORDS.items():
            if partition_for(word, P) == partition:
                change.put_count(WORD_COUNTS.name, CountRow(word, count, 0))
        for n, host in enumerate(HOSTS):
            if partition_for(host, P) == partition:
                row = WindowRow(host, T0, T0 + 60_000, n + 2, T0)
                change.put_window(WINDOWED.name, row)
        store.apply(change)
        registry.attach(partition, store, Role.ACTIVE, store.offsets())
        stores.append(store)
    yield registry
    for partition in range(P):
        registry.detach(partition)
    for store in stores:
        store.close()


@dataclass
class Twins:
    on: str
    off: str
    documents: DocumentCache  # of the one with normalization on


def _node(registry: PartitionRegistry, normalize: bool) -> GraphQLEndpoint:
    config = NodeConfig(normalize_literals=normalize)
    return GraphQLEndpoint(build_subgraph(FULL), registry, lambda: T0 + 120_000, config)


@pytest.fixture(scope="module")
def nodes(registry: PartitionRegistry) -> Iterator[Twins]:
    normalizing = _node(registry, True)
    with ServerThread(normalizing) as on, ServerThread(_node(registry, False)) as off:
        yield Twins(f"{on.url}/graphql", f"{off.url}/graphql", normalizing.documents)


@pytest.fixture(scope="module")
def gateways(nodes: Twins) -> Iterator[Twins]:
    """Two gateways over the node without normalization (what they send it is theirs). The
    gateway cache is off: a bare node endpoint has no change feed to fill it. Nor has it an
    end probe, so it proves no copy current and `maxLag: 0` reads fail alike on both: one
    routing table, so their errors name the same `lastSeen`. Their retries back off from
    1 ms, not 50: each such read waited out 1.5 s of backoffs on each twin, for a proof that
    cannot come; it still retries what a loaded machine might refuse once."""
    upstream = nodes.off.removesuffix("/graphql")
    table = table_for({"n1": (upstream, range(P))}, P, FULL)

    def app(normalize: bool) -> GatewayApp:
        config = GatewayConfig(normalize_literals=normalize, cache=False, backoff_ms=1)
        return GatewayApp(config, feed=RoutingFeed(table), catalogue=FULL)

    normalizing = app(True)
    with (
        ServerThread(normalizing, lifespan="on") as on,
        ServerThread(app(False), lifespan="on") as off,
    ):
        yield Twins(f"{on.url}/graphql", f"{off.url}/graphql", normalizing._documents)


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    """One client for every request: a client of its own per drawn example built a TLS
    context each time (loading the CA bundle, about 28 ms), more than half of the
    differential's time."""
    with poll_client(30) as http:
        yield http


# -- the queries --------------------------------------------------------------------------

_STRINGS = ["kafka", "franz", "a", "", "é", "h1", "2023-11-14T22:13:00Z", "KEY", "not a date"]
_STRING = st.one_of(st.sampled_from(_STRINGS), st.text(max_size=8))


def _string(value: str, escaped: bool) -> str:
    if escaped:  # every character as \\uXXXX where it can be
        return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in value) + '"'
    return json.dumps(value, ensure_ascii=False)


_SCALAR = st.one_of(
    st.builds(_string, _STRING, st.booleans()),
    st.integers(-(2**33), 2**33).map(str),
    st.sampled_from(["0", "5", "1000", "2147483647", "2147483648", "-2147483649", "-1"]),
    st.sampled_from(["1.5", "2e3", "1e400", "-0.0", "10.0"]),
    st.sampled_from(["true", "false", "null", "KEY", "COUNT", "START", "BOGUS"]),
)
_VALUE = st.one_of(
    _SCALAR,
    _SCALAR,
    st.lists(_SCALAR, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    st.sampled_from(['[["a"]]', "{a: 1}", '["kafka", null]', "$nope"]),
)

# root fields: (name, selection, arguments) of the gateway's and the node's schemas
GATEWAY_FIELDS = [
    ("wordCount", "{ word count }", ("word", "maxLag")),
    ("wordCounts", "{ word count }", ("words",)),
    ("topWords", "{ word count }", ("limit",)),
    ("allWordCounts", "{ edges { node { word count } } }", ("first", "order", "prefix")),
    ("hostAccessWindows", "{ host start count }", ("host", "from", "to")),
    ("hostAccess", "{ host count }", ("host",)),
]
NODE_FIELDS = [
    ("wordCount", "{ word count }", ("word",)),
    ("wordCounts", "{ word count }", ("words",)),
    ("topWords", "{ word count }", ("limit", "partitions")),
    ("hostAccessWindows", "{ host start count }", ("host", "from", "to")),
    ("bookingHistory", "{ edges { cursor } }", ("customer", "first", "after")),
]
_SPACES = st.sampled_from([" ", "  ", "\n", ", ", "\t", " # a comment, (with: 5)\n", ""])


@dataclass(frozen=True)
class Shape:
    """The structure of a query: its fields, aliases and which arguments they give, with
    the places of literals; `render` writes it with one set of values."""

    fields: tuple[tuple[str | None, str, str, tuple[str, ...]], ...]
    named: bool

    def render(self, values: list[str], spaces: list[str]) -> str:
        parts = []
        index = 0
        for alias, name, selection, arguments in self.fields:
            given = []
            for argument in arguments:
                given.append(f"{argument}:{spaces[index % len(spaces)]}{values[index]}")
                index += 1
            args = f"({', '.join(given)})" if given else ""
            head = f"{alias}: " if alias else ""
            parts.append(f"{head}{name}{args} {selection}")
        body = "{" + spaces[0] + spaces[-1].join(parts) + " }"
        return f"query Q {body}" if self.named else body

    @property
    def slots(self) -> int:
        return sum(len(arguments) for *_, arguments in self.fields)


@st.composite
def shapes(draw: st.DrawFn, table: list[tuple[str, str, tuple[str, ...]]]) -> Shape:
    fields = []
    for _ in range(draw(st.integers(1, 3))):
        name, selection, arguments = draw(st.sampled_from(table))
        chosen = tuple(a for a in arguments if draw(st.booleans()) or a == arguments[0])
        alias = draw(st.sampled_from([None, None, "x", "y"]))  # x twice: fields to merge
        fields.append((alias, name, selection, chosen))
    return Shape(tuple(fields), draw(st.booleans()))


_KEY = st.builds(_string, st.sampled_from(["kafka", "franz", "a", "h1", "h2", "é"]), st.booleans())
_DATETIME = st.sampled_from(
    ['"2023-11-14T22:13:00Z"', '"2023-11-14T22:13:00+00:00"', '"2023-11-14T22:16:00.000Z"']
)
# values of the type each argument takes, most of them valid
_GOOD = {
    "word": _KEY,
    "host": _KEY,
    "customer": _KEY,
    "prefix": _KEY,
    "after": _KEY,
    "words": st.lists(_KEY, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    "partitions": st.sampled_from(["[0, 1]", "[3]", "[]", "2"]),
    "maxLag": st.sampled_from(["0", "5", "100"]),
    "limit": st.sampled_from(["1", "2", "3", "10", "0", "1001", "2147483648"]),
    "first": st.sampled_from(["1", "2", "5", "100", "-2147483649"]),
    "order": st.sampled_from(["KEY", "COUNT", "BOGUS"]),
    "from": st.one_of(_DATETIME, st.just('"not a date"')),
    "to": _DATETIME,
}


@st.composite
def texts(draw: st.DrawFn, table: list[tuple[str, str, tuple[str, ...]]]) -> list[str]:
    """Two texts of one shape, with values of their own (equal ones often), mostly of the
    right type."""
    shape = draw(shapes(table))
    arguments = [a for *_, given in shape.fields for a in given]

    def value(argument: str) -> str:  # one in six of any type
        return draw(_VALUE if draw(st.integers(0, 5)) == 5 else _GOOD[argument])

    first = [value(a) for a in arguments]
    second = [v if draw(st.booleans()) else value(a) for v, a in zip(first, arguments, strict=True)]
    spaces = draw(st.lists(_SPACES, min_size=1, max_size=4))
    other_spaces = draw(st.lists(_SPACES, min_size=1, max_size=4))
    return [shape.render(first, spaces), shape.render(second, other_spaces)]


def _ask(client: httpx.Client, url: str, query: str, accept: str) -> tuple[int, Any]:
    headers = {"x-request-id": "literals-test", "accept": accept}
    payload = {"query": query, "operationName": "Q" if query.startswith("query Q") else None}
    response = client.post(url, json=payload, headers=headers)
    return response.status_code, response.json()


_ACCEPT = st.sampled_from(["application/json", "application/graphql-response+json"])
_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _compare(
    client: httpx.Client, twins: Twins, queries: list[str], accept: str
) -> list[tuple[int, Any]]:
    """The answers to `queries`, each the same with normalization on and off."""
    answers = []
    for query in queries:
        on = _ask(client, twins.on, query, accept)
        off = _ask(client, twins.off, query, accept)
        assert on == off, query
        answers.append(on)
    return answers


def _differential(
    client: httpx.Client, twins: Twins, table: list[tuple[str, str, tuple[str, ...]]]
) -> None:
    """Hypothesis over texts of `table`'s fields; at least a quarter of the texts must have
    been answered from a plan (the rest hold values that do not bind, or none)."""
    planned = twins.documents.planned

    @_SETTINGS
    @given(queries=texts(table), accept=_ACCEPT)
    def answers_equal(queries: list[str], accept: str) -> None:
        _compare(client, twins, queries, accept)

    answers_equal()
    assert twins.documents.planned - planned >= EXAMPLES // 2


def test_the_gateway_answers_literals_as_sent(client: httpx.Client, gateways: Twins) -> None:
    _differential(client, gateways, GATEWAY_FIELDS)


def test_a_node_answers_literals_as_sent(client: httpx.Client, nodes: Twins) -> None:
    _differential(client, nodes, NODE_FIELDS)


def test_texts_differing_in_literals_share_a_plan_with_their_own_answers_and_locations(
    client: httpx.Client, gateways: Twins
) -> None:
    """Plain cases: one plan serving other values, an error located in the second text's
    own layout."""
    queries = [
        '{ wordCount(word: "kafka") { word count } }',
        '{\n  wordCount(word: "franz") { word count } }',
        '{ a: wordCount(word: "")   { count } b: topWords(limit: 3) { word } }',
        '{ a: wordCount(word: "no such word, long") { count } b: topWords(limit: 0) { word } }',
    ]
    planned = gateways.documents.planned
    answers = _compare(client, gateways, queries, "application/json")
    assert gateways.documents.planned == planned + 4
    assert answers[0][1]["data"] == {"wordCount": {"word": "kafka", "count": 5}}
    assert answers[1][1]["data"] == {"wordCount": {"word": "franz", "count": 3}}
    (located,) = answers[3][1]["errors"]
    assert located["locations"] == [{"line": 1, "column": 54}], located  # of `b: topWords`


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        ('wordCount(word: "kafka")', "wordCount(word: 5)"),
        ("topWords(limit: 3)", 'topWords(limit: "x")'),
        ("topWords(limit: 3)", "topWords(limit: 2147483648)"),
        ("topWords(limit: 3)", "topWords(limit: 1.5)"),
        ("allWordCounts(first: 2, order: COUNT)", "allWordCounts(first: 2, order: BOGUS)"),
        ("allWordCounts(first: 2, order: KEY)", 'allWordCounts(first: 2, order: "KEY")'),
        ('hostAccess(host: "h1")', 'hostAccess(host: "h1", maxLag: -2147483649)'),
        ('wordCount(word: "kafka")', "wordCount(word: null)"),
        ('wordCounts(words: ["a", "b"])', 'wordCounts(words: ["a", null])'),
        ('wordCounts(words: ["a"])', "wordCounts(words: [5])"),
        (
            'hostAccessWindows(host: "h1", from: "2023-11-14T22:13:00Z")',
            'hostAccessWindows(host: "h1", from: "not a date")',
        ),
    ],
)
def test_a_literal_of_the_wrong_type_gets_the_validation_error_of_the_text(
    client: httpx.Client, gateways: Twins, good: str, bad: str
) -> None:
    """After a good text has built the plan, a bad value in the same place is refused as
    validation refuses the text sent: same status, message and location."""
    selection = "{ __typename }"
    queries = [
        f'{{ x: wordCount(word: "a") {{ count }} {good} {selection} }}',
        f'{{ x: wordCount(word: "bb") {{ count }}\n{bad} {selection} }}',
    ]
    planned = gateways.documents.planned
    for accept in ("application/json", "application/graphql-response+json"):
        (_, ok), (status, refused) = _compare(client, gateways, queries, accept)
        assert "errors" not in ok, ok
        assert refused["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
        # on the second line where located (a DateTime's own error has no location)
        assert all(at["line"] == 2 for e in refused["errors"] for at in e.get("locations", ()))
        assert status == (200 if accept == "application/json" else 400)
    assert gateways.documents.planned == planned + 2  # the good text, twice
