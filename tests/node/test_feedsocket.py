"""The `/feed` WebSocket endpoint (node.replication.feedsocket) driven as an ASGI app, no
socket and no broker: malformed frames are answered with an `error` frame and the
connection goes on."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import orjson

from node.changelog.feed import ChangeFeed
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.replication.feedsocket import FeedEndpoint
from node.replication.trust import CallGuard
from schema import WORD_COUNTS
from schema.feed import FEED_SUBPROTOCOL


def endpoint() -> FeedEndpoint:
    """An open node's feed endpoint (no cluster secret) holding no partition."""
    guard = CallGuard("n1", "boot", required=False, max_body_bytes=1 << 20)
    feed = ChangeFeed(1 << 20, [WORD_COUNTS])
    return FeedEndpoint(
        feed, PartitionRegistry("n1"), NodeConfig(), [WORD_COUNTS], guard, lambda: 0
    )


def exchange(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Connect, send `frames` as text, disconnect; the frames the node sent back."""
    scope = {"type": "websocket", "path": "/feed", "subprotocols": [FEED_SUBPROTOCOL]}
    incoming: list[dict[str, Any]] = [
        {"type": "websocket.connect"},
        *({"type": "websocket.receive", "text": orjson.dumps(f).decode()} for f in frames),
        {"type": "websocket.disconnect", "code": 1000},
    ]
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    asyncio.run(endpoint()(scope, receive, send))
    assert sent[0] == {"type": "websocket.accept", "subprotocol": FEED_SUBPROTOCOL}
    return [orjson.loads(m["text"]) for m in sent[1:]]


def test_an_unfollow_whose_id_is_no_follows_id_is_refused_and_the_connection_goes_on() -> None:
    answers = exchange(
        [
            {"type": "unfollow", "id": [7]},  # unhashable: no follow's id
            {"type": "unfollow", "id": {"a": 1}},
            {"type": "unfollow", "id": "7"},
            {"type": "unfollow", "id": 7},  # a follow that ended already: nothing to say
            {"type": "ping"},  # still read: answered
        ]
    )
    assert [(a["type"], a["id"]) for a in answers] == [("error", None)] * 4
    assert [a["message"].split(",")[0] for a in answers[:3]] == [
        "an unfollow's id must be the int id of a follow"
    ] * 3
    assert answers[3]["message"] == "unknown frame type 'ping': follow or unfollow"
