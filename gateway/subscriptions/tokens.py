"""Resume tokens: opaque text naming a view and, per partition, the next changelog offset a
subscription's messages cover.

Every update of a subscription carries its newest token; a client that resubscribes with
it (`after`) gets every later change of its keys exactly once. The text is
`sf1.<base64url of JSON {"v": view, "o": {partition: offset}}>`: opaque to clients, but
readable in a log.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from gateway.model.errors import BadRequestError

__all__ = ["ResumeToken"]

_PREFIX = "sf1."
_MAX_CHARS = 64 * 1024  # a token of a few thousand partitions; longer is no token of ours
_FIX = "pass the `token` of the newest update you received, or leave `after` out to start anew"


@dataclass(frozen=True)
class ResumeToken:
    """Per partition of `view`, the next changelog offset the subscription has covered."""

    view: str
    offsets: Mapping[int, int]

    def text(self) -> str:
        doc = {"v": self.view, "o": {str(p): o for p, o in sorted(self.offsets.items())}}
        return _PREFIX + base64.urlsafe_b64encode(orjson.dumps(doc)).decode().rstrip("=")

    @classmethod
    def parse(cls, view: str, text: str, partitions: int | None = None) -> ResumeToken:
        """The token `text` of `view` (with `partitions` partitions, when known);
        BadRequestError naming the view and how to fix it when it is malformed or foreign."""
        doc = _decode(view, text)
        name, offsets = doc.get("v"), doc.get("o")
        if not isinstance(name, str) or not isinstance(offsets, dict):
            raise BadRequestError(view, f"`after` {text[:80]!r} is no resume token: {_FIX}")
        if name != view:
            raise BadRequestError(
                view, f"`after` is a resume token of view {name}, not of view {view}: {_FIX}"
            )
        parsed: dict[int, int] = {}
        for key, offset in offsets.items():
            partition = int(key) if isinstance(key, str) and key.isdigit() else -1
            if not _is_count(offset) or partition < 0:
                raise BadRequestError(view, f"`after` is a damaged resume token: {_FIX}")
            if partitions is not None and partition >= partitions:
                raise BadRequestError(
                    view,
                    f"`after` names partition {partition}, but the view has {partitions}: "
                    f"the token is from another cluster; {_FIX}",
                )
            parsed[partition] = offset
        return cls(view, parsed)


def _decode(view: str, text: str) -> dict[str, object]:
    if not text.startswith(_PREFIX) or len(text) > _MAX_CHARS:
        raise BadRequestError(view, f"`after` {text[:80]!r} is no resume token: {_FIX}")
    body = text[len(_PREFIX) :]
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, ValueError) as exc:
        raise BadRequestError(view, f"`after` is a damaged resume token: {_FIX}") from exc
    if not isinstance(doc, dict):
        raise BadRequestError(view, f"`after` is a damaged resume token: {_FIX}")
    return doc


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
