"""The keys bearer tokens are verified with: a JWKS (file or URL) or a shared HS256 secret.

Which algorithms a key verifies is fixed by the key, never by the token: RSA keys verify
RS256 and PS256, P-256 EC keys ES256 (narrowed to the JWK's `alg` when it names one), the
secret HS256 only. Other keys of a JWKS (symmetric, other curves) are skipped.

A JWKS is cached. A token naming an unknown `kid` makes a file be re-read if it changed
(a stat per unknown kid, a read only on change), and a URL be fetched again at most once
per `REFETCH_INTERVAL_MS`, so tokens with made-up kids cannot hammer the key server. A
URL's keys are also fetched again once they are `MAX_AGE_MS` old, so removed keys stop
verifying; a failed fetch keeps the keys held and is logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import orjson
from jwt import PyJWK
from jwt.exceptions import PyJWTError

__all__ = [
    "MAX_AGE_MS",
    "REFETCH_INTERVAL_MS",
    "JwksFile",
    "JwksUrl",
    "KeySetError",
    "Keys",
    "SharedSecret",
    "VerificationKey",
]

log = logging.getLogger(__name__)

REFETCH_INTERVAL_MS = 30_000  # at most one fetch of a JWKS URL per this, for unknown kids
MAX_AGE_MS = 300_000  # a JWKS URL's keys are fetched again once this old
_FILE_RECHECK_MS = 1_000  # a JWKS file is checked for changes at most this often
_FETCH_TIMEOUT_S = 5.0
_MIN_SECRET_BYTES = 32  # RFC 7518 3.2: an HS256 key at least as long as the hash
_ALGORITHMS_OF_KEY_TYPE = {"RSA": ("RS256", "PS256"), "EC": ("ES256",)}


class KeySetError(Exception):
    """The keys could not be read: the message names the source and what is wrong."""


@dataclass(frozen=True)
class VerificationKey:
    """One key and the only algorithms a token verified with it may use."""

    key: Any  # a cryptography public key, or the secret's bytes
    algorithms: tuple[str, ...]


class Keys(Protocol):
    """Where the keys come from: `load` at start-up, then `find` per token."""

    algorithms: frozenset[str]  # every algorithm some key of the source may verify

    async def load(self) -> None: ...

    async def find(self, kid: str | None) -> VerificationKey | None: ...


class SharedSecret:
    """An HS256 secret read from a file at start-up (surrounding whitespace stripped)."""

    algorithms = frozenset({"HS256"})

    def __init__(self, path: Path) -> None:
        self._path = path
        self._key: VerificationKey | None = None

    async def load(self) -> None:
        variable = "STATEFED_GATEWAY_JWT_SECRET_FILE"
        try:
            secret = self._path.read_bytes().strip()
        except OSError as exc:
            raise KeySetError(f"{variable}: cannot read {self._path}: {exc}") from exc
        if len(secret) < _MIN_SECRET_BYTES:
            raise KeySetError(
                f"{variable}: the secret in {self._path} has {len(secret)} bytes; HS256 needs "
                f"at least {_MIN_SECRET_BYTES} (e.g. `openssl rand -hex 32`)"
            )
        self._key = VerificationKey(secret, ("HS256",))

    async def find(self, kid: str | None) -> VerificationKey | None:
        return self._key


def parse_jwks(document: bytes, source: str) -> dict[str | None, VerificationKey]:
    """The usable keys of a JWKS document by `kid`; KeySetError when it is none."""
    try:
        keys = orjson.loads(document)["keys"]
        if not isinstance(keys, list):
            raise TypeError("`keys` is not a list")
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise KeySetError(f"JWKS {source}: not a JSON object with a `keys` list: {exc}") from exc
    found: dict[str | None, VerificationKey] = {}
    for entry in keys:
        key = _verification_key(entry, source) if isinstance(entry, dict) else None
        if key is not None:
            found[entry.get("kid")] = key
    if not found:
        raise KeySetError(f"JWKS {source}: no usable key (RSA, or EC on P-256)")
    return found


def _verification_key(entry: Mapping[str, Any], source: str) -> VerificationKey | None:
    allowed = _ALGORITHMS_OF_KEY_TYPE.get(str(entry.get("kty")), ())
    named = entry.get("alg")
    if named is not None:
        allowed = tuple(a for a in allowed if a == named)
    if not allowed or entry.get("use", "sig") != "sig":
        log.warning("JWKS %s: key %r skipped: not a signing key", source, entry.get("kid"))
        return None
    try:
        key = PyJWK(dict(entry), allowed[0]).key
    except PyJWTError as exc:  # a P-384 key, a malformed modulus, ...
        log.warning("JWKS %s: key %r skipped: %s", source, entry.get("kid"), exc)
        return None
    return VerificationKey(key, allowed)


class _Jwks:
    """A cached JWKS: `_fresh` decides when to read it again."""

    algorithms = frozenset(a for group in _ALGORITHMS_OF_KEY_TYPE.values() for a in group)

    def __init__(self, source: str, clock: Callable[[], int]) -> None:
        self.source = source
        self._clock = clock
        self._keys: dict[str | None, VerificationKey] = {}
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        self._keys = await self._read()

    async def find(self, kid: str | None) -> VerificationKey | None:
        key = self._keys.get(kid)
        if key is not None and not self._stale():
            return key
        async with self._lock:  # concurrent requests wait for one read
            if self._keys.get(kid) is None or self._stale():
                await self._refresh(known=kid in self._keys)
        return self._keys.get(kid)

    async def _refresh(self, *, known: bool) -> None:
        if not self._due(known):
            return
        try:
            self._keys = await self._read()
        except KeySetError as exc:
            log.warning("%s; keeping the %d keys held", exc, len(self._keys))

    def _stale(self) -> bool:
        raise NotImplementedError

    def _due(self, known: bool) -> bool:
        raise NotImplementedError

    async def _read(self) -> dict[str | None, VerificationKey]:
        raise NotImplementedError


class JwksFile(_Jwks):
    """A JWKS in a file, read again when it changed (size, modification time or inode)."""

    def __init__(self, path: Path, clock: Callable[[], int]) -> None:
        super().__init__(str(path), clock)
        self._path = path
        self._seen: tuple[int, int, int] | None = None
        self._checked_ms = clock()

    def _stale(self) -> bool:
        return self._clock() - self._checked_ms >= _FILE_RECHECK_MS

    def _due(self, known: bool) -> bool:
        self._checked_ms = self._clock()
        try:
            return self._stat() != self._seen
        except OSError:
            return True  # _read says what is wrong

    def _stat(self) -> tuple[int, int, int]:
        stat = os.stat(self._path)
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    async def _read(self) -> dict[str | None, VerificationKey]:
        try:
            seen = self._stat()
            document = self._path.read_bytes()
        except OSError as exc:
            raise KeySetError(f"STATEFED_GATEWAY_JWKS: cannot read {self._path}: {exc}") from exc
        keys = parse_jwks(document, self.source)
        self._seen = seen
        return keys


class JwksUrl(_Jwks):
    """A JWKS served at an https URL (http on loopback), fetched with its own short-lived
    client (fetches are rare) that honours HTTPS_PROXY and SSL_CERT_FILE."""

    def __init__(self, url: str, clock: Callable[[], int]) -> None:
        super().__init__(url, clock)
        self._fetched_ms: int | None = None

    def _stale(self) -> bool:
        return self._fetched_ms is None or self._clock() - self._fetched_ms >= MAX_AGE_MS

    def _due(self, known: bool) -> bool:
        if self._fetched_ms is None:
            return True
        interval = MAX_AGE_MS if known else REFETCH_INTERVAL_MS
        return self._clock() - self._fetched_ms >= interval

    async def load(self) -> None:
        try:
            await super().load()
        except KeySetError as exc:  # the key server may come up after the gateway
            log.warning("%s; fetching again when a token arrives", exc)

    async def _read(self) -> dict[str | None, VerificationKey]:
        self._fetched_ms = self._clock()
        try:
            async with httpx.AsyncClient(timeout=_FETCH_TIMEOUT_S) as client:
                response = await client.get(self.source, headers={"accept": "application/json"})
                response.raise_for_status()
        except httpx.HTTPError as exc:
            raise KeySetError(f"JWKS {self.source}: fetch failed: {exc!r}") from exc
        return parse_jwks(response.content, self.source)
