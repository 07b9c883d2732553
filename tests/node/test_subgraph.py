"""The node subgraph and its HTTP endpoint, over real LevelDB stores attached by hand."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.app import NodeApp
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.schema import build_subgraph
from schema import WORD_COUNTS, CountRow, Role, pack_str, partition_for

P = 6
HELD = (0, 1, 2)
VIEW = WORD_COUNTS
# word_counts alone, whatever schema.CATALOGUE holds: the count shape of issue 2
CATALOGUE = (WORD_COUNTS,)
WORDS = {f"w{i}": (i * 7) % 23 + 1 for i in range(60)}
HELD_WORDS = {w: c for w, c in WORDS.items() if partition_for(w, P) in HELD}
FOREIGN_WORDS = [w for w in WORDS if partition_for(w, P) not in HELD]

NODE_SDL = """\
schema @link(url: "https://specs.apollo.dev/federation/v2.11", import: ["@key"]) {
  query: Query
}

\"\"\"
The `JSON` scalar type represents JSON values as specified by [ECMA-404](https://ecma-international.org/wp-content/uploads/ECMA-404_2nd_edition_december_2017.pdf).
\"\"\"
scalar JSON @specifiedBy(url: "https://ecma-international.org/wp-content/uploads/ECMA-404_2nd_edition_december_2017.pdf")

\"\"\"What one partition holds of a view: keys and their counts' sum.\"\"\"
type PartitionTotal {
  partition: Int!
  keys: Float!
  count: Float!
}

type Query {
  _entities(representations: [_Any!]!): [_Entity]!
  _service: _Service!
  wordCount(word: String!): WordCount
  wordCounts(words: [String!]!): [WordCount]!
  topWords(limit: Int!, partitions: [Int!]): [WordCount!]!
  allWordCounts(slices: [SliceInput!]!, first: Int!, backward: Boolean! = false, prefix: String! = "", from: String, to: String, order: ScanOrder! = KEY): [WordCountSlice!]!
  wordCountTotals(partitions: [Int!]!): [PartitionTotal!]!
}

\"\"\"
The order of a scan: by key, by count (desc, then key; per window for windowed views), by window start (then key), or by an aggregate view's result `by` (desc, then key; rows without a number there are left out).
\"\"\"
enum ScanOrder {
  KEY
  COUNT
  START
  RESULT
}

\"\"\"Where one partition's slice starts: after `after` (a position).\"\"\"
input SliceInput {
  partition: Int!
  after: String = null
}

type WordCount @key(fields: "word", resolvable: true) {
  word: String!
  count: Int!
}

type WordCountSlice {
  partition: Int!

  \"\"\"
  A slice's rows packed in columns, one JSON object of equally long arrays: `a` the rows' positions (lowercase hex of the key tail), `k` their keys, then by view kind: count `c` (counts); windowed_count `s`, `e` (window start and end, ms since the epoch) and `c`; latest and history `t` (event time, ms since the epoch) and `v0`, `v1`, ... (the value fields in catalogue order; null where missing or not of the field's scalar); aggregate views' results as `v0`, `v1`, ... after `t`, or after `c` for windowed aggregate views.
  \"\"\"
  rows: JSON!
}

scalar _Any

union _Entity = WordCount

type _Service {
  sdl: String!
}"""  # noqa: E501


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[PartitionRegistry]:
    """Node n1 holding partitions 0-2 of word_counts (P = 6), filled with HELD_WORDS."""
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({VIEW.changelog_topic: P})
    stores = []
    for partition in HELD:
        store = LevelDBStore(tmp_path / f"partition-{partition}").open()
        change = ChangeBatch(offsets={VIEW.changelog_topic: 100 + partition})
        for word, count in HELD_WORDS.items():
            if partition_for(word, P) == partition:
                change.put_count(VIEW.name, CountRow(word, count, 0))
        store.apply(change)
        registry.attach(partition, store, Role.ACTIVE, store.offsets())
        registry.record_end(partition, VIEW.changelog_topic, 105 + partition)
        stores.append(store)
    yield registry
    for partition in HELD:
        registry.detach(partition)
    for store in stores:
        store.close()


@pytest.fixture
def endpoint(registry: PartitionRegistry) -> GraphQLEndpoint:
    return GraphQLEndpoint(build_subgraph(CATALOGUE), registry)


def ranked(words: dict[str, int]) -> list[dict[str, Any]]:
    order = sorted(words.items(), key=lambda wc: (-wc[1], wc[0]))
    return [{"word": w, "count": c} for w, c in order]


def test_sdl_is_generated_from_the_catalogue() -> None:
    assert build_subgraph(CATALOGUE).as_str() == NODE_SDL


def test_a_second_view_of_the_same_kind_needs_only_a_catalogue_entry() -> None:
    users = dataclasses.replace(
        VIEW,
        name="user_clicks",
        topic="clicks",
        key_field="user",
        type_name="UserClicks",
        point_field="userClicks",
        many_field="usersClicks",
        top_field="topUsers",
    )
    sdl = build_subgraph((VIEW, users)).as_str()
    assert "userClicks(user: String!): UserClicks" in sdl
    assert "usersClicks(users: [String!]!): [UserClicks]!" in sdl
    assert "wordCount(word: String!): WordCount" in sdl


def test_point_lookup_and_unknown_key(endpoint: GraphQLEndpoint) -> None:
    word = next(iter(HELD_WORDS))
    unknown = next(f"x{i}" for i in range(100) if partition_for(f"x{i}", P) in HELD)
    response = endpoint.execute(
        "query($w: String!, $u: String!) { a: wordCount(word: $w) { word count } "
        "b: wordCount(word: $u) { word count } }",
        {"w": word, "u": unknown},
    )
    assert response["data"] == {"a": {"word": word, "count": HELD_WORDS[word]}, "b": None}
    assert "errors" not in response


def test_freshness_names_each_partition_read(endpoint: GraphQLEndpoint) -> None:
    word = next(iter(HELD_WORDS))
    partition = partition_for(word, P)
    response = endpoint.execute("query($w: String!) { wordCount(word: $w) { count } }", {"w": word})
    assert response["extensions"]["freshness"] == [
        {
            "partition": partition,
            "node": "n1",
            "role": "ACTIVE",
            "appliedOffset": 100 + partition,
            "lag": 5,
            "positions": {VIEW.changelog_topic: 100 + partition},
            "applied": {VIEW.changelog_topic: 100 + partition},  # no batch being written
        }
    ]


def test_multi_key_lookup_keeps_input_order_with_nulls(endpoint: GraphQLEndpoint) -> None:
    unknown = next(f"nope{i}" for i in range(100) if partition_for(f"nope{i}", P) in HELD)
    first = next(iter(HELD_WORDS))
    words = [*list(HELD_WORDS)[:5], unknown, first]
    response = endpoint.execute(
        "query($ws: [String!]!) { wordCounts(words: $ws) { word count } }", {"ws": words}
    )
    expected = [{"word": w, "count": HELD_WORDS[w]} if w in HELD_WORDS else None for w in words]
    assert response["data"] == {"wordCounts": expected}
    read = {entry["partition"] for entry in response["extensions"]["freshness"]}
    assert read == {partition_for(w, P) for w in words}


def test_top_is_local_over_held_partitions(endpoint: GraphQLEndpoint) -> None:
    response = endpoint.execute("{ topWords(limit: 7) { word count } }")
    assert response["data"] == {"topWords": ranked(HELD_WORDS)[:7]}
    assert [e["partition"] for e in response["extensions"]["freshness"]] == list(HELD)


def test_top_over_chosen_partitions(endpoint: GraphQLEndpoint) -> None:
    response = endpoint.execute("{ topWords(limit: 1000, partitions: [2, 0]) { word count } }")
    chosen = {w: c for w, c in HELD_WORDS.items() if partition_for(w, P) in (0, 2)}
    assert response["data"] == {"topWords": ranked(chosen)}
    assert [e["partition"] for e in response["extensions"]["freshness"]] == [0, 2]


_SCAN = (
    "query($s: [SliceInput!]!, $n: Int!, $b: Boolean!) "
    "{ allWordCounts(slices: $s, first: $n, backward: $b) "
    "{ partition rows } }"
)


def _unpacked(piece: dict[str, Any]) -> list[dict[str, Any]]:
    """A count view's packed slice as rows: position, word, count."""
    rows = piece["rows"]
    assert set(rows) == {"a", "k", "c"} and len(rows["k"]) == len(rows["a"]) == len(rows["c"])
    return [
        {"position": a, "word": k, "count": c}
        for a, k, c in zip(rows["a"], rows["k"], rows["c"], strict=True)
    ]


def _slices(endpoint: GraphQLEndpoint, slices: list[dict[str, Any]], n: int, back: bool) -> Any:
    response = endpoint.execute(_SCAN, {"s": slices, "n": n, "b": back})
    assert "errors" not in response, response
    return response


def test_scan_pages_each_held_partition_from_its_own_position(endpoint: GraphQLEndpoint) -> None:
    for back in (False, True):
        positions: dict[int, str | None] = dict.fromkeys(HELD)
        seen: dict[int, list[str]] = {p: [] for p in HELD}
        while positions:
            asked = [{"partition": p, "after": a} for p, a in positions.items()]
            response = _slices(endpoint, asked, 3, back)
            for piece in response["data"]["allWordCounts"]:
                edges = _unpacked(piece)
                seen[piece["partition"]].extend(e["word"] for e in edges)
                if len(edges) < 3:
                    del positions[piece["partition"]]
                else:
                    positions[piece["partition"]] = edges[-1]["position"]
            read = [e["partition"] for e in response["extensions"]["freshness"]]
            assert read == sorted(read) and set(read) <= set(HELD)
        for partition in HELD:
            words = sorted(
                (w for w in HELD_WORDS if partition_for(w, P) == partition), key=str.encode
            )
            assert seen[partition] == (words[::-1] if back else words)


def test_positions_are_the_hex_of_the_key_tail_and_nothing_else_is_one(
    endpoint: GraphQLEndpoint,
) -> None:
    (piece,) = _slices(endpoint, [{"partition": 0}], 2, False)["data"]["allWordCounts"]
    for edge in _unpacked(piece):
        assert bytes.fromhex(edge["position"]) == pack_str(edge["word"])
        assert edge["position"] == edge["position"].lower()
    for position in ("zz", "7 7", "777", "x" * 70_000):
        response = endpoint.execute(
            _SCAN, {"s": [{"partition": 0, "after": position}], "n": 2, "b": False}
        )
        (error,) = response["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "is no position" in error["message"]


def test_scan_in_count_order_pages_each_partition_by_count_then_key(
    endpoint: GraphQLEndpoint,
) -> None:
    query = (
        "query($s: [SliceInput!]!, $x: String!) { allWordCounts(slices: $s, first: 4, "
        "order: COUNT, prefix: $x) { partition rows } }"
    )
    for partition in HELD:
        words: list[dict[str, Any]] = []
        after = None
        while True:
            variables = {"s": [{"partition": partition, "after": after}], "x": ""}
            response = endpoint.execute(query, variables)
            assert "errors" not in response, response
            (piece,) = response["data"]["allWordCounts"]
            edges = _unpacked(piece)
            words.extend({"word": e["word"], "count": e["count"]} for e in edges)
            if len(edges) < 4:
                break
            after = edges[-1]["position"]
        held = {w: c for w, c in HELD_WORDS.items() if partition_for(w, P) == partition}
        assert words == ranked(held)
    refused = endpoint.execute(query, {"s": [{"partition": 0}], "x": "w"})
    assert refused["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert "key order only" in refused["errors"][0]["message"]


def test_totals_are_per_partition_without_reading_rows(endpoint: GraphQLEndpoint) -> None:
    response = endpoint.execute("{ wordCountTotals(partitions: [2, 0]) { partition keys count } }")
    assert "errors" not in response, response
    expected = []
    for partition in (2, 0):
        counts = [c for w, c in HELD_WORDS.items() if partition_for(w, P) == partition]
        expected.append({"partition": partition, "keys": len(counts), "count": sum(counts)})
    assert response["data"]["wordCountTotals"] == expected


def test_scan_of_a_foreign_partition_is_not_owner(endpoint: GraphQLEndpoint) -> None:
    foreign = partition_for(FOREIGN_WORDS[0], P)
    response = endpoint.execute(
        _SCAN, {"s": [{"partition": 0}, {"partition": foreign}], "n": 5, "b": False}
    )
    (error,) = response["errors"]
    assert error["extensions"]["code"] == "NOT_OWNER"
    assert foreign in error["extensions"]["partitions"]


def test_point_lookup_of_a_foreign_partition_is_not_owner(endpoint: GraphQLEndpoint) -> None:
    word = FOREIGN_WORDS[0]
    partition = partition_for(word, P)
    response = endpoint.execute("query($w: String!) { wordCount(word: $w) { count } }", {"w": word})
    assert response["data"] == {"wordCount": None}
    (error,) = response["errors"]
    assert error["message"] == (
        f"view word_counts: key {word!r} is in partition {partition}, which node n1 does not hold"
    )
    assert error["extensions"] == {
        "code": "NOT_OWNER",
        "view": "word_counts",
        "partition": partition,
        "node": "n1",
    }
    assert error["path"] == ["wordCount"]


def test_multi_key_with_foreign_keys_is_one_not_owner(endpoint: GraphQLEndpoint) -> None:
    words = [next(iter(HELD_WORDS)), *FOREIGN_WORDS]
    response = endpoint.execute(
        "query($ws: [String!]!) { wordCounts(words: $ws) { word } }", {"ws": words}
    )
    (error,) = response["errors"]
    assert error["extensions"]["code"] == "NOT_OWNER"
    assert error["extensions"]["partition"] == partition_for(FOREIGN_WORDS[0], P)
    assert error["extensions"]["partitions"] == sorted({partition_for(w, P) for w in FOREIGN_WORDS})


ENTITIES = """query($r: [_Any!]!) {
  _entities(representations: $r) { __typename ... on WordCount { word count } } }"""


def representations(words: list[str]) -> list[dict[str, str]]:
    return [{"__typename": "WordCount", "word": w} for w in words]


def test_entities_are_rows_in_input_order_with_nulls(endpoint: GraphQLEndpoint) -> None:
    unknown = next(f"nope{i}" for i in range(100) if partition_for(f"nope{i}", P) in HELD)
    words = [*list(HELD_WORDS)[:8], unknown, next(iter(HELD_WORDS))]
    response = endpoint.execute(ENTITIES, {"r": representations(words)})
    assert "errors" not in response
    assert response["data"]["_entities"] == [
        {"__typename": "WordCount", "word": w, "count": HELD_WORDS[w]} if w in HELD_WORDS else None
        for w in words
    ]
    read = sorted({partition_for(w, P) for w in words})
    assert [f["partition"] for f in response["extensions"]["freshness"]] == read


def test_entities_of_one_foreign_partition_are_one_not_owner(endpoint: GraphQLEndpoint) -> None:
    """A batch of one partition is refused by its read alone, as the batch of many by the
    check before any read: the same error, nothing read."""
    partition = partition_for(FOREIGN_WORDS[0], P)
    words = [w for w in FOREIGN_WORDS if partition_for(w, P) == partition]
    response = endpoint.execute(ENTITIES, {"r": representations(words)})
    assert response["data"] is None
    (error,) = response["errors"]
    assert error["message"] == (
        f"view word_counts: key {words[0]!r} is in partition {partition}, which node n1 does "
        "not hold"
    )
    assert error["extensions"] == {
        "code": "NOT_OWNER",
        "view": "word_counts",
        "partition": partition,
        "partitions": [partition],
        "node": "n1",
    }
    assert response["extensions"]["freshness"] == []


def test_entities_with_foreign_keys_are_one_not_owner(endpoint: GraphQLEndpoint) -> None:
    words = [next(iter(HELD_WORDS)), *FOREIGN_WORDS]
    response = endpoint.execute(ENTITIES, {"r": representations(words)})
    assert response["data"] is None
    (error,) = response["errors"]
    assert error["extensions"] == {
        "code": "NOT_OWNER",
        "view": "word_counts",
        "partition": partition_for(FOREIGN_WORDS[0], P),
        "partitions": sorted({partition_for(w, P) for w in FOREIGN_WORDS}),
        "node": "n1",
    }


@pytest.mark.parametrize(
    "representation",
    [{"__typename": "Nope", "word": "w1"}, {"__typename": "WordCount"}, "w1", {"word": "w1"}],
)
def test_a_bad_representation_is_bad_user_input(
    endpoint: GraphQLEndpoint, representation: Any
) -> None:
    response = endpoint.execute(ENTITIES, {"r": [*representations(["w1"]), representation]})
    (error,) = response["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT"}
    assert error["message"].startswith("_entities representation 1: ")


def test_service_sdl_is_the_printed_subgraph(endpoint: GraphQLEndpoint) -> None:
    response = endpoint.execute("{ _service { sdl } }")
    assert response["data"]["_service"]["sdl"] == NODE_SDL


def test_top_with_a_foreign_partition_is_not_owner(endpoint: GraphQLEndpoint) -> None:
    response = endpoint.execute("{ topWords(limit: 3, partitions: [1, 4, 5]) { word } }")
    (error,) = response["errors"]
    assert error["extensions"] == {
        "code": "NOT_OWNER",
        "view": "word_counts",
        "partition": 4,
        "node": "n1",
        "partitions": [4, 5],
    }


@pytest.mark.parametrize(
    "query",
    [
        '{ wordCount(word: "") { count } }',
        '{ wordCounts(words: ["a", ""]) { count } }',
        "{ topWords(limit: 0) { count } }",
        "{ topWords(limit: 10001) { count } }",
        "{ topWords(limit: 3, partitions: [6]) { count } }",
    ],
)
def test_bad_arguments_are_bad_user_input(endpoint: GraphQLEndpoint, query: str) -> None:
    (error,) = endpoint.execute(query)["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT"}
    assert error["message"].startswith("view word_counts: ")


@pytest.mark.parametrize(
    ("query", "variables", "code"),
    [
        ("{ wordCount(word: ", None, "GRAPHQL_PARSE_FAILED"),
        ("{ wordCount { count } }", None, "GRAPHQL_VALIDATION_FAILED"),
        ("{ nope }", None, "GRAPHQL_VALIDATION_FAILED"),
        ("query($w: String!) { wordCount(word: $w) { count } }", {"w": 3}, "BAD_USER_INPUT"),
        ("query($w: String!) { wordCount(word: $w) { count } }", {}, "BAD_USER_INPUT"),
    ],
)
def test_invalid_documents_carry_a_code(
    endpoint: GraphQLEndpoint, query: str, variables: dict[str, Any] | None, code: str
) -> None:
    response = endpoint.execute(query, variables)
    assert [e["extensions"]["code"] for e in response["errors"]] == [code]
    # refused before execution: no data, and no freshness since nothing was read
    assert "data" not in response and "extensions" not in response


def node_app(registry: PartitionRegistry, tmp_path: Path) -> NodeApp:
    """A NodeApp whose registry is the hand-filled one; no lifespan runs under ASGITransport."""
    config = NodeConfig.from_env({"STATEFED_NODE_ID": "n1", "STATEFED_STATE_DIR": str(tmp_path)})
    return NodeApp(config, CATALOGUE, registry=registry)


def test_http_graphql_and_health(registry: PartitionRegistry, tmp_path: Path) -> None:
    asyncio.run(http_graphql_and_health(node_app(registry, tmp_path)))


def test_each_node_process_draws_an_incarnation_of_its_own(
    registry: PartitionRegistry, tmp_path: Path
) -> None:
    """A restarted node is another process: feed handshakes made for the one before it
    name another incarnation (node.replication.trust)."""
    first, restarted = node_app(registry, tmp_path), node_app(registry, tmp_path)
    assert len(first.incarnation) == 16 and first.incarnation != restarted.incarnation
    assert first.guard.incarnation == first.incarnation


async def http_graphql_and_health(app: NodeApp) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://node.localhost") as client:
        word = next(iter(HELD_WORDS))
        response = await client.post(
            "/graphql",
            json={
                "query": "query($w: String!) { wordCount(word: $w) { count } }",
                "variables": {"w": word},
            },
        )
        assert response.status_code == 200
        assert response.json()["data"] == {"wordCount": {"count": HELD_WORDS[word]}}
        health = await client.get("/health")
        assert health.status_code == 200
        assert health.json()["node_id"] == "n1"
        assert health.json()["incarnation"] == app.incarnation
        assert health.json()["state"] == "STARTING"
        assert health.json()["active"] == list(HELD)
        assert health.json()["standby"] == []
        assert (await client.get("/nope")).status_code == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [(b"{not json", 400), (b"[]", 400), (b'{"variables": {}}', 400), (b'{"query": 3}', 400)],
)
def test_http_malformed_requests_are_bad_request(
    registry: PartitionRegistry, tmp_path: Path, body: bytes, status: int
) -> None:
    asyncio.run(http_malformed_request(node_app(registry, tmp_path), body, status))


async def http_malformed_request(app: NodeApp, body: bytes, status: int) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://node.localhost") as client:
        json = {"content-type": "application/json"}
        response = await client.post("/graphql", content=body, headers=json)
        assert response.status_code == status
        assert response.json()["errors"][0]["extensions"] == {"code": "BAD_REQUEST"}
        get = await client.get("/graphql")  # GET takes queries, and this one has none
        assert get.status_code == 400
        assert get.json()["errors"][0]["extensions"] == {"code": "BAD_REQUEST"}


def test_a_partition_named_by_two_slices_is_bad_user_input(endpoint: GraphQLEndpoint) -> None:
    """Two slices of one partition (from two positions) were merged silently, the last
    one kept: which the caller meant cannot be told."""
    held = sorted(HELD)[0]
    twice = [{"partition": held}, {"partition": held, "after": None}]
    (error,) = endpoint.execute(_SCAN, {"s": twice, "n": 2, "b": False})["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT"}
    assert f"slices name partition {held} twice" in error["message"]
