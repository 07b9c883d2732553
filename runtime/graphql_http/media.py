"""Content negotiation of GraphQL over HTTP: which media type a response is written in, and
which request bodies are JSON.

A client that accepts `application/graphql-response+json` gets it, with that media type's
status codes (a response without `data` is 4xx); `application/json` stays the answer for
clients that ask for it, send no `Accept` or accept anything (`*/*`). Only `application/json`
(UTF-8, with or without `charset`) is a JSON request body.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["MediaType", "is_json_request", "negotiate"]

_CACHED = 64  # distinct Accept / Content-Type values remembered: clients send a handful


@dataclass(frozen=True, slots=True)
class MediaType:
    """A response media type and the `content-type` header it is written with. (Two
    constants, compared by identity; not an Enum, whose `.value` costs a descriptor call
    per response.)"""

    name: str
    content_type: bytes
    JSON: ClassVar[MediaType]
    GRAPHQL_RESPONSE: ClassVar[MediaType]


MediaType.JSON = MediaType("application/json", b"application/json; charset=utf-8")
MediaType.GRAPHQL_RESPONSE = MediaType(
    "application/graphql-response+json", b"application/graphql-response+json; charset=utf-8"
)


_BY_NAME = {
    "application/graphql-response+json": MediaType.GRAPHQL_RESPONSE,
    "application/json": MediaType.JSON,
    "application/*": MediaType.JSON,
    "*/*": MediaType.JSON,
}


@functools.lru_cache(maxsize=_CACHED)
def negotiate(accept: bytes | None) -> MediaType | None:
    """The media type to answer an `Accept` header with; None when it accepts neither.

    The highest `q` wins, the first listed among equals; wildcards mean `application/json`,
    the spec's default until clients have moved to the new media type.
    """
    if not accept or not accept.strip():
        return MediaType.JSON
    best: MediaType | None = None
    best_q = 0.0
    for entry in accept.decode("latin-1").lower().split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        media = _BY_NAME.get(name)
        q = _weight(params)
        if media is not None and q > best_q:
            best, best_q = media, q
    return best


def _weight(params: list[str]) -> float:
    """The `q` of one Accept entry; 0 for a charset other than UTF-8 (JSON is UTF-8)."""
    q = 1.0
    for param in params:
        key, _, value = param.partition("=")
        value = value.strip().strip('"')
        if key.strip() == "q":
            try:
                q = float(value)
            except ValueError:
                return 0.0
        elif key.strip() == "charset" and value not in ("utf-8", "utf8"):
            return 0.0
    return q if 0.0 < q <= 1.0 else 0.0


@functools.lru_cache(maxsize=_CACHED)
def is_json_request(content_type: bytes | None) -> bool:
    """True for `application/json`, with no parameter but a UTF-8 `charset`."""
    if content_type is None:
        return False
    name, *params = (p.strip() for p in content_type.decode("latin-1").lower().split(";"))
    if name != "application/json":
        return False
    for param in params:
        key, _, value = param.partition("=")
        if key.strip() != "charset" or value.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True
