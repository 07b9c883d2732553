"""The node's door: with the cluster secret, `/graphql` and the `/feed` WebSocket
handshake answer only calls the gateway signed (runtime.trust); any other call gets 401
with `WWW-Authenticate` and one UNAUTHENTICATED error, and never reaches GraphQL. A
handshake is signed like a GET of its target with an empty body, and its target names the
node and the node process it is for (`?node=<id>&boot=<incarnation>`, schema.feed; the
incarnation is random per process, announced in the node's membership record): it is
admitted by that process only, and once. So a captured one replayed within the
signature's time window opens no other session: not on this node, not on another, not on
this node restarted.

The signature's presence, shape and time are checked before the body is read; the body is
then read (within the endpoint's limit), checked against the signature and handed to the
endpoint whole. Refused calls are logged at INFO with the client's address, the caller it
claimed and why; accepted calls at DEBUG with their caller and request id (one line per
call would drown an INFO log at thousands of calls a second).
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs

from runtime.graphql_http import Receive, RequestError, Scope
from runtime.graphql_http.asgi import Message, read_body
from runtime.trust import (
    CALLER_HEADER,
    REQUEST_ID_HEADER,
    SIGNATURE_HEADER,
    RequestVerifier,
    SignatureError,
)
from schema.feed import FEED_INCARNATION_PARAMETER, FEED_NODE_PARAMETER

__all__ = ["CallGuard"]

log = logging.getLogger(__name__)

UNAUTHENTICATED = "UNAUTHENTICATED"
_CHALLENGE = ((b"www-authenticate", b'StatefedSignature realm="statefed-node"'),)
_BODYLESS = ("GET", "HEAD")


class CallGuard:
    """Admits calls to `/graphql` and `/feed` of node `node_id`'s process `incarnation`:
    every call when open (`required` False), else only those signed with the cluster
    secret, once `arm` gave it the verifier (503 until then). Bodies are read up to
    `max_body_bytes`."""

    def __init__(
        self,
        node_id: str,
        incarnation: str,
        required: bool,
        max_body_bytes: int,
        limit_hint: str = "",
    ) -> None:
        self.node_id = node_id
        self.incarnation = incarnation
        self.required = required
        self.verifier: RequestVerifier | None = None
        self.max_body_bytes = max_body_bytes
        self.limit_hint = limit_hint

    def arm(self, verifier: RequestVerifier) -> None:
        """Check calls with `verifier` from now on (the node read its secret at start-up)."""
        self.verifier = verifier

    async def admit(self, scope: Scope, receive: Receive) -> Receive:
        """The `receive` the endpoint reads the call from; RequestError 401 when it is not
        signed with the cluster secret."""
        if self.verifier is None:
            self._unchecked(scope)
            return receive
        signature, caller, request_id, length = _signed_headers(scope)
        bodyless = scope["method"] in _BODYLESS
        try:
            stamp = self.verifier.stamp(signature)
            body = b""
            if not bodyless:
                body = await read_body(receive, length, self.max_body_bytes, self.limit_hint)
            method, target = scope["method"].encode(), _target(scope)
            self.verifier.verify(stamp, method, target, caller or b"", request_id or b"", body)
        except SignatureError as exc:
            raise _refused(scope, caller, request_id, exc) from exc
        if log.isEnabledFor(logging.DEBUG):
            log.debug("call %s from caller %s", _shown(request_id), _shown(caller))
        return receive if bodyless else _replay(body, receive)

    def admit_handshake(self, scope: Scope) -> None:
        """Admit a WebSocket handshake (the change feed), signed like a GET of its target
        with an empty body; RequestError 401 when it is not (503 while starting)."""
        if self.verifier is None:
            self._unchecked(scope)
            return
        signature, caller, request_id, _length = _signed_headers(scope)
        try:
            stamp = self.verifier.stamp(signature)
            target = _target(scope)
            self.verifier.verify(stamp, b"GET", target, caller or b"", request_id or b"", b"")
            self._check_named(scope)
            self.verifier.once(stamp)  # a handshake opens a session: never replayed
        except SignatureError as exc:
            raise _refused(scope, caller, request_id, exc) from exc
        log.debug("handshake %s from caller %s", _shown(request_id), _shown(caller))

    def _check_named(self, scope: Scope) -> None:
        """SignatureError unless the handshake's (signed) target names this node process."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        node = query.get(FEED_NODE_PARAMETER, [])
        incarnation = query.get(FEED_INCARNATION_PARAMETER, [])
        if not node or not incarnation:
            raise SignatureError(
                "it names no node process (a gateway older than this node: upgrade gateways first)"
            )
        if node != [self.node_id]:
            raise SignatureError(
                f"it was made for node {', '.join(node)!r:.200}, not for this node "
                f"{self.node_id!r} (a replayed handshake)"
            )
        if incarnation != [self.incarnation]:
            raise SignatureError(
                f"it was made for another process of node {self.node_id!r} (a replayed "
                f"handshake, or one made before this node restarted: the gateway tries "
                f"again once it reads this node's new membership record)"
            )

    def _unchecked(self, scope: Scope) -> None:
        """Admit a call while no verifier is armed: 503 while one is required. The headers
        are read only to log the call (at DEBUG): an open node's calls skip them."""
        if self.required:
            raise RequestError("the node is starting: try again shortly", 503, "UNAVAILABLE")
        if log.isEnabledFor(logging.DEBUG):
            _signature, caller, request_id, _length = _signed_headers(scope)
            log.debug("call %s from caller %s (not checked)", _shown(request_id), _shown(caller))


_Signed = tuple[bytes | None, bytes | None, bytes | None, bytes | None]


def _signed_headers(scope: Scope) -> _Signed:
    """The signature, caller, request id and content length headers of a call."""
    signature = caller = request_id = length = None
    for name, value in scope["headers"]:
        if name == SIGNATURE_HEADER:
            signature = value
        elif name == CALLER_HEADER:
            caller = value
        elif name == REQUEST_ID_HEADER:
            request_id = value
        elif name == b"content-length":
            length = value
    return signature, caller, request_id, length


def _refused(
    scope: Scope, caller: bytes | None, request_id: bytes | None, exc: SignatureError
) -> RequestError:
    """Log a refused call; the 401 it gets."""
    client = scope.get("client")
    log.info(
        "refused a call to %s from %s (caller %s, request %s): %s",
        scope["path"],
        "unknown" if client is None else f"{client[0]}:{client[1]}",
        _shown(caller),
        _shown(request_id),
        exc,
    )
    return RequestError(
        f"this node answers only calls the gateway signed with the cluster's secret: "
        f"refused, {exc}",
        401,
        UNAUTHENTICATED,
        _CHALLENGE,
    )


def _target(scope: Scope) -> bytes:
    """The request target as the caller signed it: the raw path and query string."""
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    return path + b"?" + query if query else path


def _shown(value: bytes | None) -> str:
    """A header as logged: cut, and quoted so that it cannot forge log lines."""
    return "-" if value is None else repr(value[:300].decode("latin-1"))


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` giving `body` whole, then what the connection says next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
