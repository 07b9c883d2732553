"""CORS: which browser pages of other origins may read the gateway's answers.

A browser lets a page read a cross-origin answer only when the answer names the page's
origin (`Access-Control-Allow-Origin`), and asks first with a preflight (OPTIONS with
`Access-Control-Request-Method`) before any request a plain form could not send: a JSON
POST, or one with an `authorization` header. The allowlist is STATEFED_GATEWAY_CORS_ORIGINS:

- empty (the default): no CORS headers at all, so no page of another origin reads anything;
- exact origins (`https://app.example.com`, `http://127.0.0.1:5173`): a listed origin's
  preflight and answers carry its origin, `Access-Control-Allow-Credentials: true` and
  `Vary: Origin`; any other origin gets no CORS headers (its browser blocks the read);
- `*` alone: any origin may read, never with credentials (browsers refuse `*` with them),
  for public, unauthenticated data only.

Preflights are answered here, 204, whatever the origin (the headers decide). That a page
cannot *send* a state-changing request without a preflight is the endpoint's business
(`runtime.graphql_http.csrf`), not this allowlist's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from runtime.graphql_http import Receive, Scope, Send

__all__ = ["ALLOWED_HEADERS", "Cors", "CorsPolicy", "origins_problem"]

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Header = tuple[bytes, bytes]

# what GraphQL clients send: JSON, a bearer token, Apollo's CSRF headers, trace context, and
# graphql-sse's stream token (gateway.edge.sse)
ALLOWED_HEADERS = (
    "accept, authorization, content-type, apollo-require-preflight, x-apollo-operation-name, "
    "x-request-id, traceparent, tracestate, x-graphql-event-stream-token"
)
_MAX_AGE_S = b"600"  # Chromium caps a cached preflight at 2 hours, Firefox at 24
_VARY = (b"vary", b"origin")
_EXPOSE = (b"access-control-expose-headers", b"x-request-id")  # readable by the page
_PREFLIGHT = (
    # PUT and DELETE: graphql-sse's single connection mode (gateway.edge.sse)
    (b"access-control-allow-methods", b"GET, POST, PUT, DELETE"),
    (b"access-control-allow-headers", ALLOWED_HEADERS.encode()),
    (b"access-control-max-age", _MAX_AGE_S),
)


def origins_problem(origins: Sequence[str]) -> str | None:
    """What is wrong with an allowlist, or None: `*` alone, or exact origins as browsers send
    them (scheme and host in lower case, no path, no default port)."""
    if "*" in origins:
        return None if len(origins) == 1 else "`*` allows every origin: list it alone"
    for origin in origins:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"{origin!r} is no origin: write scheme://host[:port], e.g. https://app.example"
        if origin != f"{parts.scheme}://{parts.netloc}" or parts.username or parts.password:
            return f"{origin!r} has a path, query or user: an origin is scheme://host[:port]"
        if origin != origin.lower():
            return f"{origin!r}: browsers send origins in lower case; write {origin.lower()!r}"
        try:
            port = parts.port
        except ValueError:
            return f"{origin!r} has no valid port"
        default = {"http": 80, "https": 443}[parts.scheme]
        if port == default:
            return f"{origin!r}: browsers omit the default port {default}; leave it out"
    return None


class CorsPolicy:
    """The CORS headers of preflights and answers, from an allowlist (see the module)."""

    def __init__(self, origins: Sequence[str]) -> None:
        problem = origins_problem(origins)
        if problem is not None:
            raise ValueError(problem)
        self.any = tuple(origins) == ("*",)
        self.listed = frozenset(o.encode("latin-1") for o in origins if o != "*")
        self.enabled = self.any or bool(self.listed)
        # answers differ by origin only when origins are listed: caches must key on it
        self._vary = [_VARY] if self.listed else []

    def answer_headers(self, origin: bytes) -> list[Header]:
        """The headers an answer to a request from `origin` gets."""
        allowed = self._allowed(origin)
        if allowed:
            allowed.append(_EXPOSE)
        return allowed + self._vary

    def preflight_headers(self, origin: bytes) -> list[Header]:
        """The headers of the 204 answering a preflight from `origin`."""
        allowed = self._allowed(origin)
        if allowed:
            allowed += _PREFLIGHT
        return allowed + self._vary

    def _allowed(self, origin: bytes) -> list[Header]:
        if self.any:
            return [(b"access-control-allow-origin", b"*")]
        if origin in self.listed:
            return [
                (b"access-control-allow-origin", origin),
                (b"access-control-allow-credentials", b"true"),
            ]
        return []


class Cors:
    """ASGI middleware applying `policy` around `app`: answers preflights itself and adds the
    CORS headers to the answers of requests that carry an `Origin`."""

    def __init__(self, app: ASGIApp, policy: CorsPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        if not self.policy.enabled and method != "OPTIONS":
            await self.app(scope, receive, send)
            return
        origin = preflight = None
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value
            elif name == b"access-control-request-method":
                preflight = value
        if method == "OPTIONS" and origin is not None and preflight is not None:
            await _no_content(send, self.policy.preflight_headers(origin))
            return
        extra = self.policy.answer_headers(origin) if origin is not None else []
        if not extra:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        await self.app(scope, receive, send_with_cors)


async def _no_content(send: Send, headers: list[Header]) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
