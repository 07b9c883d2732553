"""Read tokens: what an answer reflected, so that a later read can ask for nothing older.

Every data answer carries `extensions.readToken`: for each changelog partition the answer
read, the next offset the copy that answered had applied (everything before it is in the
answer, node `positions`), merged with every read token the request passed. A read that
passes a token as `atLeast` is answered only by copies that have applied at least the
token's offsets for its view (the same wait as for a write's token, `AppliedAtLeast`),
from any gateway and across failovers: a changelog's offsets are the same for every copy.

The text is `r1.` and the base64url (unpadded) of the JSON `{"<changelog topic>":
{"<partition>": <next offset>}}`: opaque to clients, who pass back the newest they got.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from gateway.cluster.consistency import AppliedAtLeast
from gateway.model.errors import BadRequestError
from schema import View

__all__ = ["PREFIX", "ReadPositions", "is_read_token"]

PREFIX = "r1."
_MAX_TEXT = 64 * 1024  # a token of every partition of every view stays far below this


def is_read_token(text: str) -> bool:
    """Whether `text` is a read token (else it may be a write's consistency token)."""
    return text.startswith(PREFIX)


class ReadPositions:
    """Next offsets per changelog topic and partition, only ever raised."""

    __slots__ = ("_topics",)

    def __init__(self) -> None:
        self._topics: dict[str, dict[int, int]] = {}

    def __bool__(self) -> bool:
        return bool(self._topics)

    def raise_to(self, topic: str, partition: int, offset: int) -> None:
        offsets = self._topics.setdefault(topic, {})
        if offset > offsets.get(partition, -1):
            offsets[partition] = offset

    def add_entries(self, topic: str, entries: Iterable[Mapping[str, Any]]) -> None:
        """The positions of `topic` that freshness entries from nodes (or the cache) report."""
        for entry in entries:
            positions, partition = entry.get("positions"), entry.get("partition")
            if isinstance(positions, dict) and isinstance(partition, int):
                offset = positions.get(topic, 0)  # nothing applied of it yet
                if isinstance(offset, int) and offset >= 0:
                    self.raise_to(topic, partition, offset)

    @classmethod
    def parse(cls, view: View, text: str) -> ReadPositions:
        """The positions of the read token `text`, passed to a field of `view`;
        BadRequestError naming `view` when it is not a token a gateway gave."""
        parsed = cls()
        parsed._topics = _decode(view, text)
        return parsed

    def merge(self, other: ReadPositions) -> None:
        for topic, offsets in other._topics.items():
            for partition, offset in offsets.items():
                self.raise_to(topic, partition, offset)

    def applied_at_least(self, view: View) -> AppliedAtLeast | None:
        """What copies read for `view` must have applied, None when nothing."""
        offsets = self._topics.get(view.changelog_topic)
        if not offsets:
            return None
        return AppliedAtLeast(view.changelog_topic, tuple(sorted(offsets.items())))

    def token(self) -> str:
        document = {
            topic: {str(p): n for p, n in sorted(offsets.items())}
            for topic, offsets in sorted(self._topics.items())
        }
        encoded = base64.urlsafe_b64encode(orjson.dumps(document)).rstrip(b"=")
        return PREFIX + encoded.decode("ascii")


def _decode(view: View, text: str) -> dict[str, dict[int, int]]:
    problem = (
        f"atLeast {text[:60]!r}... is no read token: pass back extensions.readToken of an "
        "earlier answer unchanged"
    )
    body = text[len(PREFIX) :]
    if len(text) > _MAX_TEXT:
        raise BadRequestError(view.name, f"{problem} (longer than {_MAX_TEXT} characters)")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        document = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise BadRequestError(view.name, problem) from None
    if not isinstance(document, dict):
        raise BadRequestError(view.name, problem)
    decoded: dict[str, dict[int, int]] = {}
    for topic, offsets in document.items():
        if not isinstance(offsets, dict):
            raise BadRequestError(view.name, problem)
        decoded[topic] = {}
        for partition, offset in offsets.items():
            # ASCII digits only: str.isdigit() takes '²', which int() refuses
            if not (partition.isascii() and partition.isdigit()):
                raise BadRequestError(view.name, problem)
            if type(offset) is not int or offset < 0:
                raise BadRequestError(view.name, problem)
            decoded[topic][int(partition)] = offset
    return decoded
