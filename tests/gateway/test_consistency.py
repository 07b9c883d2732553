"""Read-your-writes in the gateway: consistency tokens, waiting for the pipeline's status
to cover a write, asking the nodes to have applied its changelog offsets, and the
CONSISTENCY_TIMEOUT errors when either does not happen before the request's deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.cluster.consistency import AppliedAtLeast, Token, parse_token, wait_processed
from gateway.cluster.pipeline import StatusBoard
from gateway.config import GatewayConfig
from gateway.model.errors import BadRequestError, ConsistencyTimeoutError
from schema import WORD_COUNTS, ViewStatus, partition_for
from tests.gateway.fakes import FULL, LaggingNode, codes, post_query, running_gateway

P = 4
TOPIC = WORD_COUNTS.changelog_topic
COUNTS = {f"w{i}": i + 1 for i in range(20)}
READ = "query($w: String!, $t: String) { wordCount(word: $w, atLeast: $t) { count } }"


def status(source: dict[int, int], changelog: dict[int, int]) -> ViewStatus:
    return ViewStatus(WORD_COUNTS.name, 1, 0, 0, source, changelog)


def test_a_token_is_topic_partition_offset_of_the_views_input() -> None:
    token = parse_token(WORD_COUNTS, "words:3:1207")
    assert token == Token("words", 3, 1207) and str(token) == "words:3:1207"
    for bad in ("words:3", "words:-1:2", "words:a:2", "wo rds:1:2", ""):
        with pytest.raises(BadRequestError, match="no consistency token"):
            parse_token(WORD_COUNTS, bad)
    with pytest.raises(BadRequestError, match="reads topic words"):
        parse_token(WORD_COUNTS, "bookings:0:1")


def test_a_token_for_a_partition_the_topic_lacks_is_refused_once_the_count_is_known() -> None:
    assert parse_token(WORD_COUNTS, "words:5:1", partitions=6) == Token("words", 5, 1)
    with pytest.raises(BadRequestError, match=r"partition 6 of topic words, which has 6 .*0\.\.5"):
        parse_token(WORD_COUNTS, "words:6:1", partitions=6)
    # the count not read from the broker yet: nothing to check against, the read waits
    assert parse_token(WORD_COUNTS, "words:99:1") == Token("words", 99, 1)


def test_a_read_with_a_token_for_a_missing_partition_fails_at_once() -> None:
    node = LaggingNode(40, COUNTS, P)
    config = GatewayConfig(timeout_ms=10_000, retries=0)

    async def scenario() -> tuple[dict[str, Any], float]:
        async with running_gateway([node], P, config=config, statuses=StatusBoard()) as http:
            started = asyncio.get_running_loop().time()
            body = (await post_query(http, READ, {"w": "w7", "t": f"words:{P}:1"}))[1]
            return body, asyncio.get_running_loop().time() - started

    body, took_s = asyncio.run(scenario())
    assert codes(body) == ["BAD_USER_INPUT"]
    assert f"partition {P} of topic words" in body["errors"][0]["message"]
    assert took_s < config.timeout_s / 5  # refused, not waited out
    assert node.requests == 0


def test_a_node_is_asked_only_for_the_partitions_it_reads() -> None:
    applied = AppliedAtLeast(TOPIC, ((0, 5), (2, 9)))
    assert applied.extension([2, 3], wait_s=1.0) == {
        "topic": TOPIC,
        "offsets": {"2": 9},
        "waitMs": 800,  # the node answers before the gateway's own deadline
    }
    assert applied.extension([1, 3], wait_s=1.0) is None


def test_changelog_offsets_on_the_board_only_grow() -> None:
    board = StatusBoard()
    board.put(status({0: 4}, {0: 10, 1: 7}))
    board.put(status({0: 6}, {0: 12}))  # e.g. a restarted pipeline wrote only to partition 0
    newest = board.get(WORD_COUNTS.name)
    assert newest is not None
    assert newest.source_offsets == {0: 6} and newest.changelog_offsets == {0: 12, 1: 7}


def test_the_wait_ends_with_the_status_covering_the_write() -> None:
    board = StatusBoard()
    board.put(status({3: 1207}, {0: 50}))  # offset 1207 is the next to process: not yet

    async def scenario() -> AppliedAtLeast:
        loop = asyncio.get_running_loop()
        waiting = asyncio.create_task(
            wait_processed(board, WORD_COUNTS, Token("words", 3, 1207), loop.time() + 30)
        )
        await asyncio.sleep(0)
        assert not waiting.done()
        board.put(status({3: 1208}, {0: 51, 2: 8}))
        return await waiting

    assert asyncio.run(scenario()) == AppliedAtLeast(TOPIC, ((0, 51), (2, 8)))


def test_a_write_the_pipeline_has_not_processed_times_out() -> None:
    board = StatusBoard()
    board.put(status({3: 10}, {}))

    async def scenario() -> None:
        deadline = asyncio.get_running_loop().time() + 0.05
        await wait_processed(board, WORD_COUNTS, Token("words", 3, 99), deadline)

    with pytest.raises(ConsistencyTimeoutError, match="processed up to offset 10") as caught:
        asyncio.run(scenario())
    assert caught.value.extensions()["reason"] == "PIPELINE_BEHIND"


def read(
    node: LaggingNode, board: StatusBoard, token: str, timeout_ms: int = 5000
) -> dict[str, Any]:
    # an answer comes back at once; only a wait for the pipeline lasts the whole deadline
    config = GatewayConfig(timeout_ms=timeout_ms, retries=0)

    async def scenario() -> dict[str, Any]:
        async with running_gateway([node], P, config=config, statuses=board) as http:
            return (await post_query(http, READ, {"w": "w7", "t": token}))[1]

    return asyncio.run(scenario())


def test_a_read_with_a_processed_token_waits_for_the_owning_copy() -> None:
    board = StatusBoard()
    board.put(status({0: 6}, dict.fromkeys(range(P), 40)))
    node = LaggingNode(40, COUNTS, P)
    body = read(node, board, "words:0:5")
    assert body["data"] == {"wordCount": {"count": COUNTS["w7"]}} and "errors" not in body
    # a lookup asks only the key's partition to have caught up
    assert [w["offsets"] for w in node.waits] == [{str(partition_for("w7", P)): 40}]


def test_a_copy_that_has_not_caught_up_is_a_consistency_timeout() -> None:
    board = StatusBoard()
    board.put(status({0: 6}, dict.fromkeys(range(P), 41)))
    body = read(LaggingNode(40, COUNTS, P), board, "words:0:5")
    assert body["data"] == {"wordCount": None}
    assert codes(body) == ["CONSISTENCY_TIMEOUT"]
    assert body["errors"][0]["extensions"]["reason"] == "NODE_BEHIND"


def test_a_token_the_pipeline_has_not_reached_is_a_consistency_timeout() -> None:
    board = StatusBoard()
    board.put(status({0: 5}, {}))
    node = LaggingNode(40, COUNTS, P)
    body = read(node, board, "words:0:5", timeout_ms=300)
    assert body["data"] == {"wordCount": None}
    assert codes(body) == ["CONSISTENCY_TIMEOUT"]
    assert body["errors"][0]["extensions"] == {
        "code": "CONSISTENCY_TIMEOUT",
        "reason": "PIPELINE_BEHIND",
        "view": WORD_COUNTS.name,
        "token": "words:0:5",
    }
    assert node.requests == 0


SCAN = "query($t: String) { allWordCounts(first: 1000, atLeast: $t) { edges { node { word } } } }"


def test_a_scan_with_a_token_asks_every_partition_to_have_caught_up() -> None:
    board = StatusBoard()
    board.put(status({0: 6}, dict.fromkeys(range(P), 40)))
    node = LaggingNode(40, COUNTS, P)
    config = GatewayConfig(timeout_ms=5000, retries=0)

    async def scenario(token: str) -> dict[str, Any]:
        async with running_gateway([node], P, config=config, statuses=board) as http:
            return (await post_query(http, SCAN, {"t": token}))[1]

    body = asyncio.run(scenario("words:0:5"))
    assert "errors" not in body, body
    assert [e["node"]["word"] for e in body["data"]["allWordCounts"]["edges"]] == sorted(
        COUNTS, key=str.encode
    )
    assert [w["offsets"] for w in node.waits] == [{str(p): 40 for p in range(P)}]
    board.put(status({0: 6}, dict.fromkeys(range(P), 41)))
    behind = asyncio.run(scenario("words:0:5"))
    assert set(codes(behind)) == {"CONSISTENCY_TIMEOUT"}
    assert behind["data"]["allWordCounts"]["edges"] == []


@pytest.mark.parametrize(
    "field",
    [
        'topWords(limit: -1, atLeast: "words:0:5") { word }',
        'topHostsByPages(limit: 0, atLeast: "pageviews:0:5") { host }',
        'topHostsPerMinute(limit: 5, window: {start: "2026-01-01T00:00:01Z"},'
        ' atLeast: "pageviews:0:5") { host }',
        'hostAccessWindows(host: "", atLeast: "pageviews:0:5") { count }',
        'hostAccessWindowTotals(from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z",'
        ' atLeast: "pageviews:0:5") { count }',
        'bookingHistory(customer: "c", first: 0, atLeast: "bookings:0:5") { edges { cursor } }',
        'bookingHistory(customer: "c", after: "not a cursor!", atLeast: "bookings:0:5")'
        " { edges { cursor } }",
        'bookingHistoryAsOf(customer: "", at: "2026-01-01T00:00:00Z", atLeast: "bookings:0:5")'
        " { trip }",
        'allWordCounts(first: 0, atLeast: "words:0:5") { edges { cursor } }',
        'allWordCounts(from: "b", to: "a", atLeast: "words:0:5") { edges { cursor } }',
    ],
)
def test_arguments_no_node_could_answer_are_refused_before_the_wait_for_a_write(
    field: str,
) -> None:
    """A write the pipeline has not processed makes a read wait up to its deadline; a read
    that would be refused anyway is refused at once, as lookups are."""
    node = LaggingNode(40, COUNTS, P)
    config = GatewayConfig(timeout_ms=10_000, retries=0)

    async def scenario() -> tuple[dict[str, Any], float]:
        gateway = running_gateway([node], P, config=config, statuses=StatusBoard(), catalogue=FULL)
        async with gateway as http:
            started = asyncio.get_running_loop().time()
            body = (await post_query(http, f"{{ {field} }}"))[1]
            return body, asyncio.get_running_loop().time() - started

    body, took_s = asyncio.run(scenario())
    assert codes(body) == ["BAD_USER_INPUT"], body
    assert took_s < config.timeout_s / 5  # refused, not waited out
    assert node.requests == 0
