"""Word counts end to end: Kafka -> Spark -> LevelDB partition stores on two nodes -> gateway."""

from __future__ import annotations

import threading

import httpx
import pytest

from schema import partition_for
from tests.e2e.conftest import Cluster
from tooling.demodata import skewed_words
from tooling.processes import wait_until

SEED = ["kafka"] * 8 + ["franz"] * 3 + ["caste"] * 2 + ["trail", "castle"]


def _node_partitions(cluster: Cluster) -> dict[str, set[int]]:
    held: dict[str, set[int]] = {}
    for node_id, url in cluster.local.node_urls.items():
        held[node_id] = set(httpx.get(f"{url}/health", timeout=5).json()["active"])
    return held


def test_seed_scenario_through_the_gateway(cluster: Cluster) -> None:
    cluster.produce(SEED)
    cluster.wait_counts_equal_truth(["kafka", "franz", "caste", "trail", "castle"])

    assert cluster.data('{ wordCount(word: "kafka") { word count } }') == {
        "wordCount": {"word": "kafka", "count": 8}
    }
    assert cluster.data('{ wordCount(word: "trail") { count } }') == {"wordCount": {"count": 1}}
    assert cluster.data('{ wordCount(word: "never-produced") { count } }') == {"wordCount": None}
    rows = cluster.data('{ wordCounts(words: ["kafka", "franz", "nope"]) { word count } }')
    assert rows == {
        "wordCounts": [{"word": "kafka", "count": 8}, {"word": "franz", "count": 3}, None]
    }


def test_a_node_that_does_not_own_the_key_says_not_owner(cluster: Cluster) -> None:
    cluster.wait_counts_equal_truth(["kafka"])
    partition = partition_for("kafka", 6)
    held = _node_partitions(cluster)
    foreign = [n for n, parts in held.items() if partition not in parts]
    assert len(foreign) == 1, held
    url = f"{cluster.local.node_urls[foreign[0]]}/graphql"
    body = cluster.query('{ wordCount(word: "kafka") { count } }', url=url).json()
    codes = [e["extensions"]["code"] for e in body["errors"]]
    assert codes == ["NOT_OWNER"]
    assert body["errors"][0]["extensions"]["partition"] == partition


def test_fifty_thousand_skewed_words_equal_the_ground_truth(cluster: Cluster) -> None:
    words = skewed_words(50_000, vocabulary=1000, seed=7, prefix="z")
    cluster.produce(words)
    vocabulary = sorted(set(words))
    cluster.wait_counts_equal_truth(vocabulary, timeout_s=180)

    truth_top = sorted(cluster.truth.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    top = cluster.data("{ topWords(limit: 10) { word count } }")["topWords"]
    assert [(r["word"], r["count"]) for r in top] == truth_top

    held = _node_partitions(cluster)
    assert all(held.values()), held
    assert set.isdisjoint(*held.values()), held
    assert set.union(*held.values()) == set(range(6))


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("{ wordCount(word: ", "GRAPHQL_PARSE_FAILED"),
        ("{ wordCount(nope: 1) { count } }", "GRAPHQL_VALIDATION_FAILED"),
        ('{ wordCount(word: "") { count } }', "BAD_USER_INPUT"),
        ('{ wordCounts(words: ["ok", ""]) { count } }', "BAD_USER_INPUT"),
        ("{ topWords(limit: -1) { word } }", "BAD_USER_INPUT"),
        ("{ topWords(limit: 0) { word } }", "BAD_USER_INPUT"),
        ("{ topWords(limit: 1001) { word } }", "BAD_USER_INPUT"),
        ("{ topWords(limit: 99999999999) { word } }", "GRAPHQL_VALIDATION_FAILED"),
    ],
)
def test_bad_requests_get_clear_graphql_errors(cluster: Cluster, query: str, code: str) -> None:
    response = cluster.query(query)
    assert response.status_code < 500
    errors = response.json()["errors"]
    assert errors and all(e["message"] for e in errors)
    assert {e["extensions"]["code"] for e in errors} == {code}


def test_restarting_pipeline_and_a_node_mid_stream_never_double_counts(cluster: Cluster) -> None:
    words = skewed_words(30_000, vocabulary=300, seed=11, prefix="r")
    chunks = [words[i : i + 1000] for i in range(0, len(words), 1000)]
    done = threading.Event()
    errors: list[BaseException] = []

    def stream() -> None:
        try:
            for chunk in chunks:
                cluster.produce(chunk)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            done.set()

    produced_before = sum(cluster.truth.values())
    producer = threading.Thread(target=stream, name="stream")
    producer.start()
    wait_until(lambda: sum(cluster.truth.values()) >= produced_before + 5000, 60, "stream start")

    local = cluster.local
    assert local.pipeline is not None
    local.pipeline.kill()  # a crash: the checkpoint, not a clean stop, must keep counts exact
    local.start_pipeline()
    local.nodes["n2"].stop()  # clean stop while the group is stable
    local.wait_routable()
    local.start_node("n2")
    local.wait_routable()

    producer.join(timeout=300)
    assert done.is_set() and not errors, errors
    cluster.wait_counts_equal_truth(sorted(set(words)), timeout_s=180)
