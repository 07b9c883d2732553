"""The `Host` check against DNS rebinding, for the gateway and the nodes alike.

A page a developer visits can point its own domain name at 127.0.0.1 once loaded (DNS
rebinding): its browser then sends the page's requests to a server on loopback as to the
page's own origin, so the same-origin policy lets it read every answer. Nothing of the
request shows this but its `Host`, which names the page's domain. So a part serving without
authentication (the gateway anonymous, a node without the cluster secret) answers a request
only when its `Host` names:

- an IP literal (`127.0.0.1:8100`, `[::1]`): rebinding needs a domain name;
- `localhost` or a name ending in `.localhost`: browsers resolve those to loopback
  themselves, never through DNS;
- a name the part was told about (its `..._ALLOWED_HOSTS` setting, a node's own URL);
- nothing at all (no `Host`, or an empty one): browsers always send it.

Anything else is HTTP 421 (Misdirected Request: this server does not serve that authority)
with one error `MISDIRECTED_REQUEST` naming the host and the setting, before any route
runs; a WebSocket handshake is refused the same way before it is accepted. With
authentication on, a browser never attaches the bearer token by itself, so rebinding gains
nothing and the check runs only when the setting lists names.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence

from runtime.graphql_http import RequestError, Scope, send_json
from runtime.graphql_http.asgi import Receive, Send, refuse_websocket

__all__ = ["HostCheck", "HostPolicy", "hosts_problem", "is_loopback"]

log = logging.getLogger(__name__)

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# a Host value: a bracketed IPv6 literal or a name (or IPv4 literal), then an optional port
_HOST = re.compile(r"(?:\[(?P<ip6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_.-]+))(?::[0-9]*)?")
# a host name as the settings list it: letters, digits, `-`, `_` (compose service names), dots
_LISTED = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?\.?")
_MAX_SHOWN = 100  # characters of a refused Host named in the error
_MAX_REMEMBERED = 64  # allowed Host values kept, so a repeated one is not parsed again


def is_loopback(host: str | None) -> bool:
    """True for an address only this machine reaches: 127.0.0.0/8, ::1 (bracketed or not)
    and `localhost`. A host name is False: it may resolve to anything."""
    if host is None:
        return False
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def hosts_problem(names: Sequence[str]) -> str | None:
    """What is wrong with a list of allowed host names, or None: `*` alone, or host names
    without scheme, port or path."""
    if "*" in names:
        return None if len(names) == 1 else "`*` allows every host: list it alone"
    for name in names:
        if "/" in name:
            return f"{name!r} is not a host name: list names only, e.g. gateway.example"
        if _is_ip(name.strip("[]"), 4) or _is_ip(name.strip("[]"), 6):
            return f"{name!r} is an IP address, always answered: list host names only"
        if ":" in name:
            return f"{name!r} has a port: list names only; every port of a listed name is served"
        if not _LISTED.fullmatch(name.lower()):
            return f"{name!r} is not a host name (letters, digits, '-', '_' and dots)"
    return None


class HostPolicy:
    """Which `Host` values a part answers (see the module). `names` is its allowed-hosts
    setting (`*`: any), `variable` that setting's name; `required` says the part serves
    without authentication, so the check runs even with no names listed; `also` are names
    the part answers to by its own configuration (a node's URL)."""

    def __init__(
        self,
        names: Sequence[str],
        variable: str,
        *,
        part: str,
        required: bool,
        also: Iterable[str] = (),
    ) -> None:
        problem = hosts_problem(names)
        if problem is not None:
            raise ValueError(problem)
        self.variable = variable
        self.part = part
        self.enforced = (required or bool(names)) and "*" not in names
        self._names = frozenset(_bare(n) for n in (*names, *also) if n)
        self._allowed: set[bytes] = set()

    def allows(self, host: bytes) -> bool:
        """True when a request whose `Host` is `host` may be answered."""
        if host in self._allowed:
            return True
        allowed = self._allows(host.decode("latin-1").lower())
        if allowed and len(self._allowed) < _MAX_REMEMBERED:
            self._allowed.add(host)
        return allowed

    def _allows(self, host: str) -> bool:
        if not host:
            return True  # no authority: not a browser's request
        match = _HOST.fullmatch(host)
        if match is None:
            return False
        if match["ip6"] is not None:
            return _is_ip(match["ip6"], 6)
        name = _bare(match["name"])
        return (
            name in self._names
            or name == "localhost"
            or name.endswith(".localhost")
            or _is_ip(name, 4)
        )

    def refusal(self, host: bytes) -> RequestError:
        """The 421 answering a request for `host`."""
        shown = host.decode("latin-1")[:_MAX_SHOWN]
        match = _HOST.fullmatch(shown.lower())
        name = _bare(match["name"]) if match and match["name"] else shown
        return RequestError(
            f"this {self.part} is not told to answer for the host {name!r} (Host: {shown}): a "
            "web page could reach it by pointing its own domain name at this address (DNS "
            f"rebinding). If clients reach the {self.part} by that name, add it to "
            f"{self.variable} (IP addresses and localhost are always answered)",
            421,
            "MISDIRECTED_REQUEST",
        )


class HostCheck:
    """ASGI middleware: HTTP requests and WebSocket handshakes whose `Host` `policy` does not
    allow are refused before `app` sees them; other scopes pass."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    @classmethod
    def around(cls, app: ASGIApp, policy: HostPolicy) -> ASGIApp:
        """`app` behind the check, or `app` itself when `policy` checks nothing."""
        return cls(app, policy) if policy.enforced else app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            for name, value in scope["headers"]:
                if name == b"host" and not self.policy.allows(value):
                    await self._refuse(scope, receive, send, value)
                    return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, host: bytes) -> None:
        error = self.policy.refusal(host)
        client = scope.get("client")
        log.info(
            "refused a %s for the host %r from %s: not in %s",
            "WebSocket handshake" if scope["type"] == "websocket" else "request",
            host.decode("latin-1")[:_MAX_SHOWN],
            client[0] if client else "an unknown client",
            self.policy.variable,
        )
        if scope["type"] == "http":
            await send_json(send, error.status, error.body())
        elif (await receive())["type"] == "websocket.connect":
            await refuse_websocket(scope, send, error)


def _bare(name: str) -> str:
    """A host name as compared: lower case, without the root's trailing dot."""
    return name.lower().removesuffix(".")


def _is_ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False
