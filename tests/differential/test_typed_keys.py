"""The gateway routes every key to the partition Kafka put it in: records Kafka's real Java
producer keyed with its Integer, Long and Double serializers, and with records of three
fields written by Jackson's ObjectMapper, are counted by the pipeline and answered by the
gateway for every key.

KeyProducer (tests/javaproducer.py) writes KEYS_PER_VIEW keys, edge cases then seeded
random ones, into the topic of each typed count view of the differential catalogue
(tests/differential/views.py); one consumer pass reads every record back. Each record must
lie on the partition its view computes from the key text (by which the pipeline, the nodes
and the gateway all place a key), the views' totals must come to the records read, and a
multi-key lookup of every key, in the largest batches the gateway takes, must answer the
key's count with the key typed as its GraphQL type says: an Int as a JSON number, a Long
as a string of digits, a Float as the number, a record key as its fields. A Float cannot
carry NaN or an infinity, so those keys are in the partition check only: the pipeline
dead-letters them.

Nothing here depends on how many nodes run: the differential tests grow the cluster from
one node to three, and this module runs between them in name order (or alone).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pytest

from gateway.api.fields.keys import key_names
from gateway.config import GatewayConfig
from runtime.topics import partition_count
from schema import KeyType, RecordKey, View
from tests import javaproducer
from tests.differential.views import (
    ACCOUNT_COUNTS,
    PRICE_COUNTS,
    SEAT_COUNTS,
    SHOP_COUNTS,
    TYPED_KEY_VIEWS,
)
from tests.e2e.conftest import Cluster
from tests.javaproducer import Record
from tooling.processes import wait_until

KEYS_PER_VIEW = 25_000  # 100,000 records in all
COUNTED_TIMEOUT_S = 120.0  # for the pipeline and the nodes to count every record
ANSWER_TIMEOUT_S = 60.0  # for every lookup to agree once the totals do
SCAN_PAGE = 1000
SHOWN = 5  # mismatches a failure message names
Key = int | float | dict[str, Any]
_VIEW_IDS = [view.name for view in TYPED_KEY_VIEWS]


@dataclass(frozen=True)
class Written:
    """What KeyProducer wrote into one view's topic, read back, and how many partitions
    the topic has."""

    view: View
    records: list[Record]
    partitions: int

    def key_of(self, record: Record) -> Key:
        """The key Java wrote (no string: the views here have none)."""
        key = self.view.key_type.deserialize(record.key)
        assert not isinstance(key, str), f"{self.view.name} has keys of type string"
        return key

    @cached_property
    def counts(self) -> Counter[str]:
        """Records per key text, every key Java wrote (worked out once: 25,000 records)."""
        return Counter(_text(self.view, self.key_of(record)) for record in self.records)

    @cached_property
    def counted(self) -> Counter[str]:
        """Records per key text the view must count: a NaN or an infinity, which GraphQL's
        Float cannot carry, is a dead letter (pipeline.keys)."""
        return Counter(_askable(self.view, self.counts))


@pytest.fixture(scope="module")
def written(grown_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    """Each typed view's records, produced by Java, read back once; by view name."""
    bootstrap = grown_cluster.local.bootstrap
    classes = tmp_path_factory.mktemp("keyproducer")
    javaproducer.compile_key_producer(classes)
    topics = {view.topic: view.key_type for view in TYPED_KEY_VIEWS}
    javaproducer.produce(classes, bootstrap, topics, KEYS_PER_VIEW)
    partitions = {view.name: partition_count(bootstrap, view.topic) for view in TYPED_KEY_VIEWS}
    assert len(set(partitions.values())) == 1, f"partition counts differ: {partitions}"
    read = javaproducer.read_all(bootstrap, list(topics), partitions[SEAT_COUNTS.name])
    return {
        view.name: Written(view, read[view.topic], partitions[view.name])
        for view in TYPED_KEY_VIEWS
    }


@pytest.mark.parametrize("name", _VIEW_IDS)
def test_every_record_is_on_the_partition_its_view_computes(
    written: dict[str, Written], name: str
) -> None:
    """Kafka put each key where the view looks for it, NaN and the infinities included."""
    ours = written[name]
    view, records = ours.view, ours.records
    assert len(records) == KEYS_PER_VIEW, f"{name}: read {len(records)} of {KEYS_PER_VIEW}"
    wrong = []
    for record in records:
        key = ours.key_of(record)
        computed = view.partition_of(_text(view, key), ours.partitions)
        if computed != record.partition:
            wrong.append((key, record.partition, computed))
    assert not wrong, (
        f"{name}: {len(wrong)} of {len(records)} keys are not on the partition the view "
        f"computes; first (key, Kafka's partition, computed): {wrong[:SHOWN]}"
    )


def test_the_double_keys_include_nan_and_the_infinities(written: dict[str, Written]) -> None:
    """The partition check above covers the keys no lookup can ask for."""
    texts = set(written[PRICE_COUNTS.name].counts)
    missing = [k for k in (math.nan, math.inf, -math.inf) if KeyType.DOUBLE.text(k) not in texts]
    assert not missing, f"{PRICE_COUNTS.name}: no record has the key {missing}"


def _totals(cluster: Cluster) -> dict[str, tuple[float, float]] | None:
    """(keys, count) of every typed view, or None while a partition cannot answer."""
    fields = " ".join(f"{view.totals_field} {{ keys count }}" for view in TYPED_KEY_VIEWS)
    body = cluster.query(f"{{ {fields} }}").json()
    if body.get("errors") or not body.get("data"):
        return None
    found = {view.name: body["data"][view.totals_field] for view in TYPED_KEY_VIEWS}
    return {name: (totals["keys"], totals["count"]) for name, totals in found.items()}


def _wait_counted(cluster: Cluster, written: dict[str, Written]) -> None:
    """Wait until each view's totals are its distinct keys and its records: every record
    counted, none dead-lettered (a cheap poll before looking up 100,000 keys)."""
    expected = {name: (len(w.counted), w.counted.total()) for name, w in written.items()}
    last: list[dict[str, tuple[float, float]] | None] = [None]

    def counted() -> bool:
        last[0] = _totals(cluster)
        return last[0] == expected

    try:
        wait_until(counted, COUNTED_TIMEOUT_S, "the typed views to count every record", 0.5)
    except TimeoutError:
        raise AssertionError(f"(keys, count) per view: {last[0]}, expected {expected}") from None


def _variable(key_type: KeyType | RecordKey, key: Key) -> Any:
    """A key as JSON in GraphQL variables: a Long as a string of digits, else a number; a
    record key as an object of its fields."""
    if isinstance(key_type, RecordKey):
        assert isinstance(key, dict)
        return {f.name: _variable(f.type, key[f.name]) for f in key_type.fields}
    return str(key) if key_type is KeyType.LONG else key


def _typed(view: View, key: Key, row: dict[str, Any]) -> bool:
    """Whether the row's key fields show `key` as their GraphQL types say."""
    key_type = view.key_type
    if isinstance(key_type, RecordKey):
        assert isinstance(key, dict)
        return all(_typed_scalar(f.type, key[f.name], row[f.name]) for f in key_type.fields)
    return _typed_scalar(key_type, key, row[view.key_field])


def _typed_scalar(key_type: KeyType, key: Key, shown: Any) -> bool:
    """Whether a key field shows `key` as its GraphQL type: a String as itself, an Int as
    a JSON number, a Long as its digits, a Float as the same double (texts compare -0.0
    apart from 0.0)."""
    if key_type is KeyType.STRING:
        return shown == key
    if key_type is KeyType.INT:
        return type(shown) is int and shown == key
    if key_type is KeyType.LONG:
        return type(shown) is str and shown == str(key)
    return type(shown) is float and key_type.text(shown) == key_type.text(_scalar(key))


def _scalar(key: Key) -> int | float:
    assert not isinstance(key, dict), f"{key!r} is a record key"
    return key


def _text(view: View, key: Key) -> str:
    """The key text of `key`, a key of `view`'s type."""
    if isinstance(view.key_type, RecordKey):
        assert isinstance(key, dict), f"{view.name} has record keys, not {key!r}"
        return view.key_type.text(key)
    return view.key_type.text(_scalar(key))


def _lookup(cluster: Cluster, view: View, keys: list[Key]) -> list[Any]:
    """The rows of one multi-key lookup of `keys`; AssertionError with the body when it
    has errors (the totals were read from every partition just before)."""
    key_type = view.key_type
    if isinstance(key_type, RecordKey):
        graphql_type = f"{view.type_name}Key"
    else:
        graphql_type = key_type.graphql_type
    selection = " ".join(key_names(view))
    query = (
        f"query($k: [{graphql_type}!]!) {{ {view.many_field}({view.keys_arg}: $k)"
        f" {{ {selection} count }} }}"
    )
    variables = {"k": [_variable(view.key_type, key) for key in keys]}
    rows: list[Any] = cluster.data(query, variables)[view.many_field]
    return rows


def _disagreeing(
    cluster: Cluster, view: View, expected: dict[str, int], batch: int
) -> dict[str, tuple[Any, int]]:
    """The key texts whose answer is not (the typed key, its count): (row, expected count)."""
    texts = list(expected)
    wrong: dict[str, tuple[Any, int]] = {}
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        keys = [_key(view, text) for text in chunk]
        for text, key, row in zip(chunk, keys, _lookup(cluster, view, keys), strict=True):
            agrees = row is not None and row["count"] == expected[text]
            if not (agrees and _typed(view, key, row)):
                wrong[text] = (row, expected[text])
    return wrong


def _key(view: View, text: str) -> Key:
    """The key whose key text is `text` (no string: the views here have none)."""
    key = view.key_type.from_text(text)
    assert not isinstance(key, str), f"{view.name} has keys of type string"
    return key


def _askable(view: View, counts: Counter[str]) -> dict[str, int]:
    """The keys a lookup can ask for, with their counts: a GraphQL Float has no NaN and
    no infinities."""
    if view.key_type is not KeyType.DOUBLE:
        return dict(counts)
    return {text: n for text, n in counts.items() if math.isfinite(_double(view, text))}


def _double(view: View, text: str) -> float:
    key = _key(view, text)
    assert isinstance(key, float), f"{view.name} has no double keys"
    return key


@pytest.mark.parametrize("name", _VIEW_IDS)
def test_the_gateway_answers_every_key_its_count(
    grown_cluster: Cluster, written: dict[str, Written], name: str
) -> None:
    """Each key's count is read from the node its partition routes to; a key the gateway
    placed on another partition than Kafka did would answer null (or another count)."""
    _wait_counted(grown_cluster, written)
    view = written[name].view
    batch = GatewayConfig.from_env(grown_cluster.local.env()).max_lookup_keys
    pending = _askable(view, written[name].counts)
    last: dict[str, tuple[Any, int]] = {}

    def all_agree() -> bool:  # asks again only for the keys that did not agree yet
        nonlocal pending, last
        last = _disagreeing(grown_cluster, view, pending, batch)
        pending = {text: pending[text] for text in last}
        return not last

    try:
        wait_until(all_agree, ANSWER_TIMEOUT_S, f"every key of {name} to answer its count", 0.5)
    except TimeoutError:
        shown = [(_key(view, text), *found) for text, found in list(last.items())[:SHOWN]]
        raise AssertionError(
            f"{name}: {len(last)} keys answer otherwise; first (key, row, expected count): {shown}"
        ) from None


@pytest.mark.parametrize("key", [2**63 - 1, -(2**63)], ids=["max", "min"])
def test_a_long_key_may_be_given_as_a_json_number(
    grown_cluster: Cluster, written: dict[str, Written], key: int
) -> None:
    """A Long argument is an Int or a string of digits; it comes back as digits."""
    _wait_counted(grown_cluster, written)
    expected = written[ACCOUNT_COUNTS.name].counts[KeyType.LONG.text(key)]
    data = grown_cluster.data(
        "query($k: Long!) { accountCount(account: $k) { account count } }", {"k": key}
    )
    assert data == {"accountCount": {"account": str(key), "count": expected}}, key


def _order(view: View, key: Key) -> Any:
    """What a scan orders `key` by: the number, or a record's fields in turn (a string
    by its UTF-8 bytes)."""
    if isinstance(view.key_type, RecordKey):
        assert isinstance(key, dict)
        return tuple(
            key[n].encode() if isinstance(key[n], str) else key[n] for n in view.key_type.names
        )
    return key


def _shown(view: View, key: Key) -> dict[str, Any]:
    """The key fields of a row of `key`, as GraphQL shows them."""
    shown = _variable(view.key_type, key)
    return shown if isinstance(view.key_type, RecordKey) else {view.key_field: shown}


@pytest.mark.parametrize("view", [SEAT_COUNTS, ACCOUNT_COUNTS, SHOP_COUNTS], ids=lambda v: v.name)
def test_a_scan_is_in_key_order(
    grown_cluster: Cluster, written: dict[str, Written], view: View
) -> None:
    """Key texts sort as the keys do (numbers numerically, a record by its fields in
    turn), so a scan's first page holds the smallest keys, each typed and counted."""
    _wait_counted(grown_cluster, written)
    counts = written[view.name].counts
    smallest = sorted(counts)[:SCAN_PAGE]  # the order of key texts
    keys = [_key(view, text) for text in smallest]
    order = [_order(view, key) for key in keys]
    assert order == sorted(order), f"{view.name}: key texts do not sort as the keys do"
    assert order[0] == min(_order(view, _key(view, text)) for text in counts), view.name
    query = (
        f"query($n: Int!) {{ {view.scan_field}(first: $n) {{ edges {{ node"
        f" {{ {' '.join(key_names(view))} count }} }} }} }}"
    )
    edges = grown_cluster.data(query, {"n": SCAN_PAGE})[view.scan_field]["edges"]
    nodes = [edge["node"] for edge in edges]
    expected = [
        {**_shown(view, key), "count": counts[text]}
        for key, text in zip(keys, smallest, strict=True)
    ]
    pairs = zip(nodes, expected, strict=False)  # a short page differs past its end
    differ = next((i for i, (got, want) in enumerate(pairs) if got != want), None)
    assert nodes == expected, (
        f"{view.scan_field}(first: {SCAN_PAGE}): {len(nodes)} rows of {len(expected)}; "
        f"first difference at {differ}: "
        f"{'-' if differ is None else (nodes[differ], expected[differ])} (answer, expected)"
    )


def test_a_record_key_is_one_input_object_and_an_entity_of_all_its_fields(
    grown_cluster: Cluster, written: dict[str, Written]
) -> None:
    """`shopCount(order: {shop, seq, lane})`, the top-N showing each key's fields, and
    `_entities` finding a ShopCount by `@key(fields: "shop seq lane")`."""
    _wait_counted(grown_cluster, written)
    counts = written[SHOP_COUNTS.name].counts
    text = max(counts, key=lambda t: (counts[t], t))
    key = _shown(SHOP_COUNTS, _key(SHOP_COUNTS, text))
    row = {**key, "count": counts[text]}
    point = grown_cluster.data(
        "query($k: ShopCountKey!) { shopCount(order: $k) { shop seq lane count } }", {"k": key}
    )
    assert point == {"shopCount": row}
    top = grown_cluster.data("{ topShops(limit: 1) { shop seq lane count } }")["topShops"]
    assert [r["count"] for r in top] == [row["count"]]
    entities = grown_cluster.data(
        "query($r: [_Any!]!) { _entities(representations: $r) "
        "{ ... on ShopCount { shop seq lane count } } }",
        {"r": [{"__typename": "ShopCount", **key}]},
    )
    assert entities == {"_entities": [row]}


def test_a_representation_without_every_key_field_is_an_error_naming_them(
    grown_cluster: Cluster,
) -> None:
    body = grown_cluster.query(
        "query($r: [_Any!]!) { _entities(representations: $r) { ... on ShopCount { count } } }",
        {"r": [{"__typename": "ShopCount", "shop": "a", "seq": "1"}]},
    ).json()
    (error,) = body["errors"]
    assert (
        "ShopCount needs the key fields string 'shop', long 'seq', int 'lane'" in error["message"]
    ), body
