"""Trust between the parts: the cluster secret, signed node calls and signed membership.

Nodes answer only the gateway, and the gateway routes only to nodes it can trust, by one
shared secret: a file named by STATEFED_CLUSTER_SECRET_FILE, the same file for the gateway
and every node. With it:

- every gateway -> node call carries `statefed-signature: v1=<unix ms>.<hex>`, an
  HMAC-SHA256 under the secret over the method, the request target, the timestamp, the
  `statefed-caller` and `statefed-request-id` headers and the body. A node accepts it
  within `MAX_SKEW_MS` of its own clock, so a captured call cannot be replayed later,
  and a change feed handshake only once by each node process (`RequestVerifier.once`;
  the handshake names the process, node.replication.trust);
- every membership record (and tombstone) a node publishes carries the same header
  (`schema.MEMBER_SIGNATURE_HEADER`) over the node id, the timestamp and the value; the
  gateway routes only to nodes whose records verify.

A domain tag heads each signed message, so a request's signature is never a record's. The
caller and request id headers go with every node call, signed or not: the node logs them.

```
SignatureError   a call or record is unsigned, signed with another secret, or out of time
ConfigError      (runtime.config) the secret file is missing, unreadable or too short
```
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from runtime.clock import Clock, wall_clock_ms
from runtime.config import ConfigError
from schema import MEMBER_SIGNATURE_HEADER

__all__ = [
    "CALLER_HEADER",
    "MAX_CALLERS",
    "MAX_CALLER_CHARS",
    "MAX_SKEW_MS",
    "MIN_SECRET_BYTES",
    "REQUEST_ID_HEADER",
    "SECRET_VARIABLE",
    "SIGNATURE_HEADER",
    "ClusterSecret",
    "KafkaHeaders",
    "NodeCallSigner",
    "RequestVerifier",
    "SignatureError",
    "SignedMembers",
    "Stamp",
    "encode_callers",
    "member_signature",
]

SECRET_VARIABLE = "STATEFED_CLUSTER_SECRET_FILE"
MIN_SECRET_BYTES = 32
# how far a signature's timestamp may be from the verifier's clock, either way: the
# window in which a captured call or record could be replayed
MAX_SKEW_MS = 60_000
SIGNATURE_HEADER = b"statefed-signature"
CALLER_HEADER = b"statefed-caller"
REQUEST_ID_HEADER = b"statefed-request-id"
# a coalesced node call names at most this many callers (then `+<more>`), each cut to
# this many characters once escaped: the header stays under ~1.1 KiB
MAX_CALLERS = 8
MAX_CALLER_CHARS = 128
# what a subject may show unescaped in the header: no comma (the separator), space, '%'
_CALLER_SAFE = "!#$&'*+/:;=?@[]^`{|}"
_REQUEST_TAG = b"statefed-request/v1\n"
_MEMBER_TAG = b"statefed-member/v1\n"
_PREFIX = b"v1="
_MAX_MS_DIGITS = 15

# a Kafka record's headers, as confluent-kafka gives and takes them
KafkaHeaders = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None


class SignatureError(Exception):
    """A call or record was not accepted; the message says why, never what would pass."""


class Stamp:
    """A parsed `v1=<ms>.<hex>` header value, found fresh (`RequestVerifier.stamp`)."""

    __slots__ = ("mac", "ms")

    def __init__(self, ms: bytes, mac: bytes) -> None:
        self.ms = ms
        self.mac = mac


class ClusterSecret:
    """The shared secret; signs and verifies. Its repr never shows the key."""

    __slots__ = ("_member", "_request")

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_SECRET_BYTES:
            raise ValueError(f"a cluster secret has at least {MIN_SECRET_BYTES} bytes")
        # keyed once, copied per message: a copy costs a fraction of keying HMAC anew
        self._request = hmac.new(key, _REQUEST_TAG, hashlib.sha256)
        self._member = hmac.new(key, _MEMBER_TAG, hashlib.sha256)

    @classmethod
    def read(cls, path: Path) -> ClusterSecret:
        """The secret in `path` (surrounding whitespace stripped); ConfigError naming
        STATEFED_CLUSTER_SECRET_FILE when it is missing, unreadable or too short."""
        try:
            key = path.read_bytes().strip()
        except OSError as exc:
            raise ConfigError(
                SECRET_VARIABLE, f"cannot read the cluster secret {str(path)!r}: {exc.strerror}"
            ) from exc
        if len(key) < MIN_SECRET_BYTES:
            raise ConfigError(
                SECRET_VARIABLE,
                f"{str(path)!r} holds {len(key)} bytes, a cluster secret needs at least "
                f"{MIN_SECRET_BYTES}: make one with `head -c 48 /dev/urandom | base64 > {path}`",
            )
        return cls(key)

    def __repr__(self) -> str:
        return "ClusterSecret(<hidden>)"

    def sign_request(
        self, method: bytes, target: bytes, caller: bytes, request_id: bytes, body: bytes, ms: int
    ) -> bytes:
        """The `statefed-signature` value of one node call made at `ms`."""
        stamp = str(ms).encode()
        return (
            _PREFIX
            + stamp
            + b"."
            + self._request_mac(method, target, caller, request_id, body, stamp)
        )

    def request_matches(
        self,
        stamp: Stamp,
        method: bytes,
        target: bytes,
        caller: bytes,
        request_id: bytes,
        body: bytes,
    ) -> bool:
        expected = self._request_mac(method, target, caller, request_id, body, stamp.ms)
        return hmac.compare_digest(expected, stamp.mac)

    def sign_member(self, node_id: str, value: bytes | None, ms: int) -> bytes:
        """The signature header value of a membership record (None = tombstone) sent at `ms`."""
        stamp = str(ms).encode()
        return _PREFIX + stamp + b"." + self._member_mac(node_id, value, stamp)

    def verify_member(self, node_id: str, value: bytes | None, signature: bytes | None) -> int:
        """The signed time (ms) of a membership record; SignatureError unless it was signed
        with this secret for `node_id` and this value."""
        stamp = _parse_stamp(signature)
        expected = self._member_mac(node_id, value, stamp.ms)
        if not hmac.compare_digest(expected, stamp.mac):
            raise SignatureError("its signature is not of this cluster's secret")
        return int(stamp.ms)

    def _request_mac(
        self,
        method: bytes,
        target: bytes,
        caller: bytes,
        request_id: bytes,
        body: bytes,
        stamp: bytes,
    ) -> bytes:
        mac = self._request.copy()
        mac.update(b"\n".join((method, target, stamp, caller, request_id, b"")))
        mac.update(body)  # not joined to the head: no copy of the body
        return mac.hexdigest().encode()

    def _member_mac(self, node_id: str, value: bytes | None, stamp: bytes) -> bytes:
        # '-' marks a tombstone, so it never verifies as a record with an empty value
        kind = b"-" if value is None else b"+"
        mac = self._member.copy()
        mac.update(b"\n".join((node_id.encode(), stamp, kind, b"")))
        if value is not None:
            mac.update(value)
        return mac.hexdigest().encode()


def member_signature(headers: KafkaHeaders) -> bytes | None:
    """The signature among a membership record's Kafka headers, None when it has none."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for name, value in pairs:
        if name == MEMBER_SIGNATURE_HEADER:
            return value.encode() if isinstance(value, str) else value
    return None


class SignedMembers:
    """Which membership records count with the cluster secret: those signed with it and
    no older than the one taken of their node (a replayed record or tombstone undoes no
    newer one). A node id whose records are not signed is warned about once (again after
    it signed one, or once `MAX_WARNED` other ids were); `ignored` starts the warning, with
    `{node}` for the node id."""

    MAX_WARNED = 1024

    def __init__(self, secret: ClusterSecret, log: logging.Logger, ignored: str) -> None:
        self._secret = secret
        self._log = log
        self._ignored = ignored
        self._signed_ms: dict[str, int] = {}  # when the record taken of each node was signed
        self._warned: set[str] = set()

    def authentic(self, node_id: str, value: bytes | None, headers: KafkaHeaders) -> bool:
        """Whether the record (a tombstone: `value` None) of `node_id` counts."""
        try:
            signed_ms = self._secret.verify_member(node_id, value, member_signature(headers))
        except SignatureError as exc:
            self._warn(node_id, exc)
            return False
        self._warned.discard(node_id)
        if signed_ms < self._signed_ms.get(node_id, 0):
            self._log.debug("membership record of node %r older than the one held", node_id)
            return False
        self._signed_ms[node_id] = signed_ms  # a tombstone's too: no replayed record revives
        return True

    def forget(self, keep: Callable[[str, int], bool]) -> None:
        """Forget the signing times of the nodes `keep(node_id, signed_ms)` is False for."""
        for node_id, signed_ms in list(self._signed_ms.items()):
            if not keep(node_id, signed_ms):
                del self._signed_ms[node_id]

    def _warn(self, node_id: str, exc: SignatureError) -> None:
        if node_id in self._warned:
            return
        if len(self._warned) >= self.MAX_WARNED:
            self._warned.clear()
        self._warned.add(node_id)
        self._log.warning(
            "%s: %s (is it given the cluster's %s?)",
            self._ignored.format(node=repr(node_id)),
            exc,
            SECRET_VARIABLE,
        )


def _parse_stamp(signature: bytes | None) -> Stamp:
    """The timestamp and MAC of a `v1=<ms>.<hex>` value; SignatureError when it is none."""
    if signature is None:
        raise SignatureError("it carries no signature")
    if not signature.startswith(_PREFIX):
        raise SignatureError("its signature is not of version v1")
    ms, dot, mac = signature[len(_PREFIX) :].partition(b".")
    if not dot or not ms.isdigit() or len(ms) > _MAX_MS_DIGITS or len(mac) != 64:
        raise SignatureError("its signature is malformed")
    return Stamp(ms, mac)


class RequestVerifier:
    """Checks a node call's signature: `stamp` before the body is read (presence, shape,
    time), `verify` once it is."""

    def __init__(
        self, secret: ClusterSecret, clock: Clock = wall_clock_ms, max_skew_ms: int = MAX_SKEW_MS
    ) -> None:
        self._secret = secret
        self._clock = clock
        self._max_skew_ms = max_skew_ms
        self._used: dict[bytes, int] = {}  # MAC -> signed ms, of the calls `once` admitted

    def stamp(self, signature: bytes | None) -> Stamp:
        """The call's stamp; SignatureError when it has none, or its time is too far from now."""
        stamp = _parse_stamp(signature)
        skew = int(stamp.ms) - self._clock()
        if abs(skew) > self._max_skew_ms:
            when = "old" if skew < 0 else "far in the future"
            raise SignatureError(
                f"its signature is {abs(skew)} ms {when} (at most {self._max_skew_ms} ms are "
                "accepted: check the clocks of gateway and node)"
            )
        return stamp

    def verify(
        self,
        stamp: Stamp,
        method: bytes,
        target: bytes,
        caller: bytes,
        request_id: bytes,
        body: bytes,
    ) -> None:
        if not self._secret.request_matches(stamp, method, target, caller, request_id, body):
            raise SignatureError("its signature is not of this cluster's secret")

    def once(self, stamp: Stamp) -> None:
        """Admit a verified call's signature once: SignatureError when a call with it was
        admitted before. For calls that open a session (the change feed's handshake), so
        that one captured within its time window cannot open another; the gateway signs
        each with a request id of its own. A signature is remembered while its time is
        within the window (older ones `stamp` refuses anyway)."""
        oldest = self._clock() - self._max_skew_ms
        while self._used:
            first = next(iter(self._used))
            if self._used[first] >= oldest:
                break
            del self._used[first]
        if stamp.mac in self._used:
            raise SignatureError("its signature was used before (a replayed call)")
        self._used[stamp.mac] = int(stamp.ms)


def encode_callers(callers: Sequence[str]) -> bytes:
    """The `statefed-caller` value: the distinct subjects in order, comma-separated, each
    percent-escaped (commas, spaces, '%', controls, non-ASCII) and cut to MAX_CALLER_CHARS;
    past MAX_CALLERS, `+<n>` says how many more. No callers: `gateway` (its own call)."""
    distinct = list(dict.fromkeys(callers))
    if not distinct:
        return b"gateway"
    shown = [quote(c, safe=_CALLER_SAFE)[:MAX_CALLER_CHARS] for c in distinct[:MAX_CALLERS]]
    if len(distinct) > MAX_CALLERS:
        shown.append(f"+{len(distinct) - MAX_CALLERS}")
    return ",".join(shown).encode("ascii")


class NodeCallSigner:
    """The headers of the gateway's node calls: the callers and a request id always, the
    signature when the cluster has a secret (None: unsigned, the loopback dev mode)."""

    def __init__(self, secret: ClusterSecret | None, clock: Clock = wall_clock_ms) -> None:
        self._secret = secret
        self._clock = clock
        # request ids unique across gateway processes without a random draw per call
        self._prefix = os.urandom(4).hex().encode()
        self._ids = itertools.count(1)
        self._callers: dict[str, bytes] = {}  # one caller's header value, per subject

    @property
    def signs(self) -> bool:
        return self._secret is not None

    def headers(
        self, method: bytes, target: bytes, body: bytes, callers: Sequence[str]
    ) -> list[tuple[bytes, bytes]]:
        caller = self._caller(callers)
        request_id = b"%s-%x" % (self._prefix, next(self._ids))
        headers = [(CALLER_HEADER, caller), (REQUEST_ID_HEADER, request_id)]
        if self._secret is not None:
            signature = self._secret.sign_request(
                method, target, caller, request_id, body, self._clock()
            )
            headers.append((SIGNATURE_HEADER, signature))
        return headers

    def _caller(self, callers: Sequence[str]) -> bytes:
        if len(callers) != 1:
            return encode_callers(callers)
        (subject,) = callers
        value = self._callers.get(subject)
        if value is None:
            value = encode_callers(callers)
            if len(self._callers) < 4096:  # subjects come from tokens: keep the memo bounded
                self._callers[subject] = value
        return value
