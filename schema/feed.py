"""The change feed between a node and the gateway: what the node applied, per follow.

The gateway opens one WebSocket per node at `FEED_PATH?node=<node id>&boot=<incarnation>`
(`feed_query`: the node process its membership record announces; subprotocol
`FEED_SUBPROTOCOL`, the handshake signed with the cluster secret like a node call, so its
signature names the node process it was made for) and sends JSON text frames;
the node answers with JSON text frames. One connection carries any number of *follows*,
each a stream of one partition's changes of some views (optionally of some keys only),
from given changelog offsets, in offset order per changelog topic.

Gateway to node:

    {"type": "follow", "id": 7, "partition": 3, "views": ["wordcount"],
     "keys": ["kafka"] | null, "from": {"<changelog topic>": <next offset>} | null,
     "snapshot": false, "heartbeat": false, "limit": 0}
    {"type": "unfollow", "id": 7}

`from` names, per changelog topic of `views`, the first offset wanted; a topic it leaves
out (or `from: null`) starts at the copy's applied offset now (only new changes). A follow
from an offset the node no longer keeps in memory is replayed from the changelog, so a
follow never has a gap. With `"snapshot": true` (and no `from`), the node first sends the
current row of every asked key (null if it has none), read atomically with the offsets the
follow then continues from. With `"keys": null` too, it sends the row of every key the
partition holds (count, latest and aggregate views only), at most `limit` rows: a partition
holding more answers an `error` instead (the gateway holding a whole view). Such a snapshot
may come in several `changes` frames, each but the last with `"more": true`.

Node to gateway:

    {"type": "following", "id": 7, "partition": 3, "role": "ACTIVE", "state": "RUNNING",
     "from": {topic: offset}, "applied": {topic: next offset}, "end": {topic: end offset}}
    {"type": "changes", "id": 7, "changes": [<change>, ...], "applied": {topic: next offset}}
    {"type": "progress", "id": 7, "role": ..., "state": ..., "applied": {...}, "end": {...},
     "leased": true}
    {"type": "gone", "id": 7, "reason": "..."}   # the node stopped holding the partition
    {"type": "error", "id": 7 | null, "message": "...", "tooLarge": true}  # past `limit`
    {"type": "error", "id": 7, "message": "...", "refused": true}  # see below

An `error` with `"refused": true` answers a follow this node takes from no one: views it
does not serve (another catalogue, mid rolling upgrade), or a field it cannot read. Following
it again, here or on another copy of the same catalogue, gets the same answer. Any other
`error` ends the follow for a reason of the moment (a snapshot of a copy restoring, a
changelog the replay could not read).

A follow with `"heartbeat": true` gets a `progress` frame about every half second even
when nothing changed: a position heartbeat. `leased` is false while the node's lease has
lapsed (it was paused longer than its term and the group has not confirmed its assignment
since): such a frame vouches for nothing. The gateway cache answers for a copy only while
its heartbeats keep coming with `leased: true`; silence is never read as "no change".

`following` comes first for each follow, with the offsets it starts from; then, for a
snapshot follow, one `changes` frame of snapshot changes (`"snapshot": true`, `offset` =
the applied offset of the view's topic: the row holds every record below it). `applied` of a
`changes` frame is where the follow stands after it: every change of those topics below it
was sent. A change is `Change.to_json()`: the view, key, changelog offset, and the row
that record made (the changelog value's JSON object, see schema.changelog) or `null` when
it deleted the entry `at` names (a window's start; an event's position; [] for a key).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = [
    "FEED_INCARNATION_PARAMETER",
    "FEED_NODE_PARAMETER",
    "FEED_PATH",
    "FEED_SUBPROTOCOL",
    "Change",
    "FeedFrameError",
    "feed_query",
    "offsets_of",
]

FEED_PATH = "/feed"
FEED_SUBPROTOCOL = "statefed-feed.v1"
# the query parameters naming the node, and its process, a handshake is for
FEED_NODE_PARAMETER = "node"
FEED_INCARNATION_PARAMETER = "boot"


def feed_query(node_id: str, incarnation: str) -> str:
    """The query string (no `?`) of a handshake with the feed of node `node_id`'s process
    `incarnation` (its membership record's)."""
    node, boot = quote(node_id, safe=""), quote(incarnation, safe="")
    return f"{FEED_NODE_PARAMETER}={node}&{FEED_INCARNATION_PARAMETER}={boot}"


class FeedFrameError(ValueError):
    """A feed frame that is not what this module describes."""


@dataclass(frozen=True)
class Change:
    """One applied changelog record: `row` is its value's JSON object, None for a delete."""

    view: str
    key: str
    offset: int
    row: Mapping[str, Any] | None
    at: tuple[int, ...] = field(default=())
    snapshot: bool = False  # the key's row as of `offset` (next offset), not one record

    def to_json(self) -> dict[str, Any]:
        doc = {"view": self.view, "key": self.key, "offset": self.offset, "row": self.row,
               "at": list(self.at)}  # fmt: skip
        if self.snapshot:
            doc["snapshot"] = True
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> Change:
        """The change `doc` encodes; FeedFrameError naming what is wrong with it."""
        if not isinstance(doc, dict):
            raise FeedFrameError(f"a change is an object, not {type(doc).__name__}")
        view, key, offset, row = doc.get("view"), doc.get("key"), doc.get("offset"), doc.get("row")
        at = doc.get("at", [])
        if not isinstance(view, str) or not isinstance(key, str):
            raise FeedFrameError(f"change {str(doc)[:200]}: view and key must be strings")
        if not isinstance(offset, int) or not _is_offset(offset):
            raise FeedFrameError(f"change {str(doc)[:200]}: offset must be an int >= 0")
        if row is not None and not isinstance(row, dict):
            raise FeedFrameError(f"change {str(doc)[:200]}: row must be an object or null")
        if not isinstance(at, list) or not all(_is_offset(part) for part in at):
            raise FeedFrameError(f"change {str(doc)[:200]}: at must be a list of ints >= 0")
        snapshot = doc.get("snapshot", False)
        if not isinstance(snapshot, bool):
            raise FeedFrameError(f"change {str(doc)[:200]}: snapshot must be a boolean")
        return cls(view, key, offset, row, tuple(at), snapshot)


def _is_offset(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def offsets_of(doc: object, what: str) -> dict[str, int]:
    """The {topic: offset} object `doc` of a frame's field `what`, checked."""
    if not isinstance(doc, dict) or not all(
        isinstance(topic, str) and _is_offset(offset) for topic, offset in doc.items()
    ):
        raise FeedFrameError(f"{what} must map changelog topics to offsets >= 0, not {doc!r:.200}")
    return dict(doc)
