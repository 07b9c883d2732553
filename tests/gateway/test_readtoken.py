"""Read tokens (gateway.cluster.readtoken): every data answer carries the positions it reflects,
and a read passing one as `atLeast` asks the nodes for copies that have applied them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.cluster.readtoken import ReadPositions, is_read_token
from gateway.config import GatewayConfig
from gateway.model.errors import BadRequestError
from schema import WORD_COUNTS, partition_for
from tests.gateway.fakes import LaggingNode, codes, post_query, running_gateway

P = 4
TOPIC = WORD_COUNTS.changelog_topic
COUNTS = {f"w{i}": i + 1 for i in range(20)}
READ = "query($w: String!, $t: String) { wordCount(word: $w, atLeast: $t) { count } }"
MANY = "query($ws: [String!]!) { wordCounts(words: $ws) { count } }"


def test_positions_encode_to_an_opaque_token_and_back() -> None:
    positions = ReadPositions()
    positions.raise_to(TOPIC, 3, 1207)
    positions.raise_to(TOPIC, 3, 1100)  # never lowered
    positions.raise_to("other.changelog", 0, 5)
    token = positions.token()
    assert is_read_token(token) and not is_read_token("words:3:1207")
    parsed = ReadPositions.parse(WORD_COUNTS, token)
    assert parsed.applied_at_least(WORD_COUNTS) == positions.applied_at_least(WORD_COUNTS)
    applied = parsed.applied_at_least(WORD_COUNTS)
    assert applied is not None and applied.topic == TOPIC and applied.offsets == ((3, 1207),)
    assert parsed.token() == token


def test_merging_keeps_the_newer_position_of_each_partition() -> None:
    mine, theirs = ReadPositions(), ReadPositions()
    mine.raise_to(TOPIC, 0, 10)
    mine.raise_to(TOPIC, 1, 30)
    theirs.raise_to(TOPIC, 0, 20)
    theirs.raise_to(TOPIC, 1, 25)
    mine.merge(theirs)
    applied = mine.applied_at_least(WORD_COUNTS)
    assert applied is not None and applied.offsets == ((0, 20), (1, 30))


@pytest.mark.parametrize(
    "text",
    [
        "r1.",
        "r1.not-base64!",
        "r1.WzFd",
        "r1.eyJ0Ijp7IngiOjF9fQ",
        "r1.eyJ0Ijp7IjAiOi0xfX0",
        "r1.eyJ0IjogeyLCsiI6IDF9fQ",  # {"t": {"²": 1}}: a digit to str.isdigit(), not to int()
    ],
    ids=[
        "empty",
        "not-base64",
        "a-list",
        "partition-not-a-number",
        "negative-offset",
        "partition-a-superscript-digit",
    ],
)
def test_a_token_no_gateway_gave_is_a_bad_request_naming_the_fix(text: str) -> None:
    with pytest.raises(BadRequestError, match=r"pass back extensions\.readToken"):
        ReadPositions.parse(WORD_COUNTS, text)


def _ask(node: LaggingNode, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    config = GatewayConfig(timeout_ms=2000, retries=0)

    async def scenario() -> dict[str, Any]:
        async with running_gateway([node], P, config=config) as http:
            return (await post_query(http, query, variables))[1]

    return asyncio.run(scenario())


def test_an_answer_carries_the_positions_it_read_and_hides_them_from_its_freshness() -> None:
    """Positions go to the read token, and with the offsets applied (for the gateway's cache)
    leave the freshness the client sees."""
    words = ["w1", "w2", "w3"]
    body = _ask(LaggingNode(200, COUNTS, P), MANY, {"ws": words})
    read = sorted({partition_for(w, P) for w in words})
    token = ReadPositions.parse(WORD_COUNTS, body["extensions"]["readToken"])
    applied = token.applied_at_least(WORD_COUNTS)
    # the fake node's copy of partition p has applied up to 100 + p
    assert applied is not None and applied.offsets == tuple((p, 100 + p) for p in read)
    assert body["extensions"]["freshness"]
    assert all(
        "positions" not in entry and "applied" not in entry
        for entry in body["extensions"]["freshness"]
    )


def test_a_read_passing_a_token_asks_the_copy_for_its_positions() -> None:
    partition = partition_for("w7", P)
    given = ReadPositions()
    given.raise_to(TOPIC, partition, 150)
    given.raise_to(TOPIC, (partition + 1) % P, 999)  # of a partition this read does not touch
    node = LaggingNode(200, COUNTS, P)
    body = _ask(node, READ, {"w": "w7", "t": given.token()})
    assert body["data"] == {"wordCount": {"count": COUNTS["w7"]}}, body
    assert [w["offsets"] for w in node.waits] == [{str(partition): 150}]
    # the answer's token is never older than the one passed, also where nothing was read
    answered = ReadPositions.parse(WORD_COUNTS, body["extensions"]["readToken"])
    assert answered.applied_at_least(WORD_COUNTS) == given.applied_at_least(WORD_COUNTS)


def test_a_copy_behind_the_token_is_a_consistency_timeout() -> None:
    given = ReadPositions()
    given.raise_to(TOPIC, partition_for("w7", P), 300)
    body = _ask(LaggingNode(200, COUNTS, P), READ, {"w": "w7", "t": given.token()})
    assert body["data"] == {"wordCount": None}
    assert codes(body) == ["CONSISTENCY_TIMEOUT"]


def test_a_malformed_read_token_is_refused_before_any_node_is_asked() -> None:
    node = LaggingNode(200, COUNTS, P)
    body = _ask(node, READ, {"w": "w7", "t": "r1.garbage"})
    assert codes(body) == ["BAD_USER_INPUT"], body
    assert node.requests == 0


def test_an_answer_from_copies_that_applied_nothing_yet_still_carries_a_token() -> None:
    positions = ReadPositions()
    positions.add_entries(TOPIC, [{"partition": 2, "positions": {}}])
    assert positions and positions.applied_at_least(WORD_COUNTS) is not None
    assert ReadPositions.parse(WORD_COUNTS, positions.token()).token() == positions.token()
