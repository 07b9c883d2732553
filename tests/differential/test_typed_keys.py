"""The gateway routes every key to the partition Kafka put it in: records Kafka's real Java
producer keyed with its Integer, Long and Double serializers are counted by the pipeline and
answered by the gateway for every key.

KeyProducer (tests/javaproducer.py) writes KEYS_PER_VIEW keys, edge cases then seeded
random ones, into the topic of each typed count view of the differential catalogue
(tests/differential/views.py); one consumer pass reads every record back. Each record must
lie on the partition its view computes from the key text (by which the pipeline, the nodes
and the gateway all place a key), the views' totals must come to the records read, and a
multi-key lookup of every key, in the largest batches the gateway takes, must answer the
key's count with the key typed as its GraphQL type says: an Int as a JSON number, a Long
as a string of digits, a Float as the number. A Float cannot carry NaN or an infinity, so
those keys are in the partition check only: the pipeline dead-letters them.

Nothing here depends on how many nodes run: the differential tests grow the cluster from
one node to three, and this module runs between them in name order (or alone).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.config import GatewayConfig
from runtime.topics import partition_count
from schema import KeyType, View
from tests import javaproducer
from tests.differential.views import ACCOUNT_COUNTS, PRICE_COUNTS, SEAT_COUNTS, TYPED_KEY_VIEWS
from tests.e2e.conftest import Cluster
from tests.javaproducer import Record
from tooling.processes import wait_until

KEYS_PER_VIEW = 33_334  # 100,002 records in all
COUNTED_TIMEOUT_S = 120.0  # for the pipeline and the nodes to count every record
ANSWER_TIMEOUT_S = 60.0  # for every lookup to agree once the totals do
SCAN_PAGE = 1000
SHOWN = 5  # mismatches a failure message names
Key = int | float
_VIEW_IDS = [view.name for view in TYPED_KEY_VIEWS]


@dataclass(frozen=True)
class Written:
    """What KeyProducer wrote into one view's topic, read back, and how many partitions
    the topic has."""

    view: View
    records: list[Record]
    partitions: int

    def key_of(self, record: Record) -> Key:
        """The key Java wrote (a number: the views here have no string keys)."""
        key = self.view.key_type.deserialize(record.key)
        assert not isinstance(key, str), f"{self.view.name} has keys of type string"
        return key

    def counts(self) -> Counter[str]:
        """Records per key text, every key Java wrote."""
        return Counter(self.view.key_type.text(self.key_of(record)) for record in self.records)

    def counted(self) -> Counter[str]:
        """Records per key text the view must count: a NaN or an infinity, which GraphQL's
        Float cannot carry, is a dead letter (pipeline.keys)."""
        return Counter(
            {text: n for text, n in self.counts().items() if math.isfinite(_key(self.view, text))}
        )


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
        computed = view.partition_of(view.key_type.text(key), ours.partitions)
        if computed != record.partition:
            wrong.append((key, record.partition, computed))
    assert not wrong, (
        f"{name}: {len(wrong)} of {len(records)} keys are not on the partition the view "
        f"computes; first (key, Kafka's partition, computed): {wrong[:SHOWN]}"
    )


def test_the_double_keys_include_nan_and_the_infinities(written: dict[str, Written]) -> None:
    """The partition check above covers the keys no lookup can ask for."""
    texts = set(written[PRICE_COUNTS.name].counts())
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
    expected = {name: (len(w.counted()), w.counted().total()) for name, w in written.items()}
    last: list[dict[str, tuple[float, float]] | None] = [None]

    def counted() -> bool:
        last[0] = _totals(cluster)
        return last[0] == expected

    try:
        wait_until(counted, COUNTED_TIMEOUT_S, "the typed views to count every record", 0.5)
    except TimeoutError:
        raise AssertionError(f"(keys, count) per view: {last[0]}, expected {expected}") from None


def _variable(key_type: KeyType, key: Key) -> Any:
    """A key as JSON in GraphQL variables: a Long as a string of digits, else a number."""
    return str(key) if key_type is KeyType.LONG else key


def _typed(key_type: KeyType, key: Key, shown: Any) -> bool:
    """Whether the key field shows `key` as its GraphQL type: an Int as a JSON number, a
    Long as its digits, a Float as the same double (texts compare -0.0 apart from 0.0)."""
    if key_type is KeyType.INT:
        return type(shown) is int and shown == key
    if key_type is KeyType.LONG:
        return type(shown) is str and shown == str(key)
    return type(shown) is float and key_type.text(shown) == key_type.text(key)


def _lookup(cluster: Cluster, view: View, keys: list[Key]) -> list[Any]:
    """The rows of one multi-key lookup of `keys`; AssertionError with the body when it
    has errors (the totals were read from every partition just before)."""
    graphql_type = view.key_type.graphql_type
    query = (
        f"query($k: [{graphql_type}!]!) {{ {view.many_field}({view.keys_arg}: $k)"
        f" {{ {view.key_field} count }} }}"
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
            if not (agrees and _typed(view.key_type, key, row[view.key_field])):
                wrong[text] = (row, expected[text])
    return wrong


def _key(view: View, text: str) -> Key:
    """The key whose key text is `text` (a number: the views here have no string keys)."""
    key = view.key_type.from_text(text)
    assert not isinstance(key, str), f"{view.name} has keys of type string"
    return key


def _askable(view: View, counts: Counter[str]) -> dict[str, int]:
    """The keys a lookup can ask for, with their counts: a GraphQL Float has no NaN and
    no infinities."""
    return {text: n for text, n in counts.items() if math.isfinite(_key(view, text))}


@pytest.mark.parametrize("name", _VIEW_IDS)
def test_the_gateway_answers_every_key_its_count(
    grown_cluster: Cluster, written: dict[str, Written], name: str
) -> None:
    """Each key's count is read from the node its partition routes to; a key the gateway
    placed on another partition than Kafka did would answer null (or another count)."""
    _wait_counted(grown_cluster, written)
    view = written[name].view
    batch = GatewayConfig.from_env(grown_cluster.local.env()).max_lookup_keys
    pending = _askable(view, written[name].counts())
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
    expected = written[ACCOUNT_COUNTS.name].counts()[KeyType.LONG.text(key)]
    data = grown_cluster.data(
        "query($k: Long!) { accountCount(account: $k) { account count } }", {"k": key}
    )
    assert data == {"accountCount": {"account": str(key), "count": expected}}, key


@pytest.mark.parametrize("view", [SEAT_COUNTS, ACCOUNT_COUNTS], ids=lambda v: v.name)
def test_a_scan_is_in_numeric_order(
    grown_cluster: Cluster, written: dict[str, Written], view: View
) -> None:
    """Key texts sort as the numbers do, so a scan's first page holds the smallest keys,
    negative ones first, each typed and counted."""
    _wait_counted(grown_cluster, written)
    counts = written[view.name].counts()
    smallest = sorted(counts)[:SCAN_PAGE]  # the order of key texts
    keys = [_key(view, text) for text in smallest]
    assert keys == sorted(keys), f"{view.name}: key texts do not sort as the keys do"
    query = (
        f"query($n: Int!) {{ {view.scan_field}(first: $n) {{ edges {{ node"
        f" {{ {view.key_field} count }} }} }} }}"
    )
    edges = grown_cluster.data(query, {"n": SCAN_PAGE})[view.scan_field]["edges"]
    nodes = [edge["node"] for edge in edges]
    expected = [
        {view.key_field: _variable(view.key_type, key), "count": counts[text]}
        for key, text in zip(keys, smallest, strict=True)
    ]
    pairs = zip(nodes, expected, strict=False)  # a short page differs past its end
    differ = next((i for i, (got, want) in enumerate(pairs) if got != want), None)
    assert nodes == expected, (
        f"{view.scan_field}(first: {SCAN_PAGE}): {len(nodes)} rows of {len(expected)}; "
        f"first difference at {differ}: "
        f"{'-' if differ is None else (nodes[differ], expected[differ])} (answer, expected)"
    )
