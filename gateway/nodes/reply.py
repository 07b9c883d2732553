"""What one node call answers: the aliased field `r` and its freshness, or a gateway error
that names the view, node, partitions and keys the call was for."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.model.errors import (
    BadRequestError,
    NodeProtocolError,
    NodeUnavailableError,
    NotCaughtUpError,
    NotOwnerError,
)

__all__ = ["NodeReply", "decode_reply"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeReply:
    """The aliased field `r` of a node's answer, and the freshness entries it carried."""

    data: Any
    freshness: list[dict[str, Any]]


def decode_reply(status: int, content: bytes, view: str, where: dict[str, Any]) -> NodeReply:
    """The node's answer to one call, or the gateway error it amounts to."""
    if status >= 500:
        raise NodeUnavailableError(view, f"HTTP {status}", **where)
    # what the node answered goes to the operator's log, not into the client's error
    if status != 200:
        log.warning("node %s answered HTTP %s: %r", where["node"], status, content[:200])
        raise NodeProtocolError(view, f"HTTP {status}", **where)
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        log.warning("node %s answered no JSON (%s): %r", where["node"], exc, content[:200])
        raise NodeProtocolError(view, "answer is not JSON", **where) from exc
    if not isinstance(doc, dict):
        raise NodeProtocolError(view, "answer is not a JSON object", **where)
    if doc.get("errors"):
        raise _node_error(doc["errors"], view, where)
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("r") is None:
        raise NodeProtocolError(view, "answer has no data and no errors", **where)
    extensions = doc.get("extensions")
    freshness = extensions.get("freshness") if isinstance(extensions, dict) else None
    entries = [e for e in freshness if isinstance(e, dict)] if isinstance(freshness, list) else []
    return NodeReply(data=data["r"], freshness=entries)


def _node_error(errors: Any, view: str, where: dict[str, Any]) -> Exception:
    first = errors[0] if isinstance(errors, list) and isinstance(errors[0], dict) else {}
    message = str(first.get("message", errors))[:300]
    extensions = first.get("extensions")
    extensions = extensions if isinstance(extensions, dict) else {}
    code = extensions.get("code")
    if code == "NOT_OWNER":
        disowned = extensions.get("partitions") or [extensions.get("partition")]
        named = [p for p in disowned if isinstance(p, int)] or list(where["partitions"])
        return NotOwnerError(
            view, f"NOT_OWNER: {message}", partitions=named, node=where["node"], keys=where["keys"]
        )
    if code == "NOT_CAUGHT_UP":
        return NotCaughtUpError(view, message, **where)
    if code == "BAD_USER_INPUT":  # e.g. a cursor only the node can decode: the client's mistake
        return BadRequestError(view, f"node {where['node']} rejected the arguments: {message}")
    return NodeProtocolError(view, f"node error {code or 'without code'}: {message}", **where)
