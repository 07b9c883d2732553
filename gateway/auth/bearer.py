"""Authentication at the gateway: the principal of a request, from its bearer token.

With STATEFED_GATEWAY_AUTH=jwt every GraphQL request carries `Authorization: Bearer <JWT>`,
checked before its body is read or its document parsed: the signature with a key of
`gateway.auth.keys` (the algorithm fixed by the key, never by the token alone), the issuer and
audience configured, `exp` (required), `nbf` and `iat` with STATEFED_GATEWAY_JWT_LEEWAY_S
of clock skew, and a string `sub`. The principal is `sub` with the scopes of the `scope`
claim (space-separated) and of `scp` (a list, or space-separated too), and the second from
which the token stops verifying (`expires_at`: `exp` plus the leeway, on PyJWT's clock, the
wall clock); a subscription it authorized ends then, with SUBSCRIPTION_EXPIRED. A request
without a usable token is refused with `Unauthenticated`, which `refusal` turns into the HTTP
401 the client gets. Otherwise (anonymous) every request is `ANONYMOUS`.

Descriptions of refused tokens are fixed texts: nothing read from a token is echoed into
the `WWW-Authenticate` header.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import jwt
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAlgorithmError,
    InvalidAudienceError,
    InvalidIssuedAtError,
    InvalidIssuerError,
    MissingRequiredClaimError,
    PyJWTError,
)

from gateway.auth.keys import JwksFile, JwksUrl, Keys, SharedSecret
from gateway.config import GatewayConfig
from gateway.model.principal import ANONYMOUS, Principal
from runtime.graphql_http import RequestError

__all__ = [
    "SUBSCRIPTION_EXPIRED",
    "UNAUTHENTICATED",
    "Anonymous",
    "Authenticator",
    "JwtAuthenticator",
    "Unauthenticated",
    "authenticator_for",
    "authorization",
    "refusal",
]

UNAUTHENTICATED = "UNAUTHENTICATED"
_EXPIRED = "the token has expired"
# the message (code UNAUTHENTICATED) ending a subscription whose token expired while it ran
SUBSCRIPTION_EXPIRED = f"invalid bearer token: {_EXPIRED}; subscribe again with a fresh token"
_REQUIRED_CLAIMS = ["exp", "sub", "iss", "aud"]
_REFUSED: tuple[tuple[type[PyJWTError], str], ...] = (
    (ExpiredSignatureError, _EXPIRED),
    (ImmatureSignatureError, "the token is not valid yet"),  # nbf, or iat, in the future
    (InvalidIssuedAtError, "the token's iat is not a number"),
    (InvalidAudienceError, "the token is for another audience"),
    (InvalidIssuerError, "the token is from another issuer"),
    (MissingRequiredClaimError, "the token lacks a required claim (exp, sub, iss, aud)"),
    (InvalidAlgorithmError, "the token's algorithm is not accepted for its key"),
)


class Unauthenticated(Exception):
    """No usable bearer token: `description` says why, None when none was sent."""

    def __init__(self, description: str | None) -> None:
        super().__init__(description or "no bearer token")
        self.description = description


class Authenticator(Protocol):
    """Who a request is from, given its Authorization header (None when absent)."""

    async def start(self) -> None: ...

    async def principal(self, authorization: bytes | None) -> Principal: ...


class Anonymous:
    """Authentication off: every request is ANONYMOUS, whatever it sends."""

    async def start(self) -> None:
        return None

    async def principal(self, authorization: bytes | None) -> Principal:
        return ANONYMOUS


class JwtAuthenticator:
    """Bearer JWTs verified with `keys`, for `issuer` and `audience`, `leeway_s` of skew."""

    def __init__(self, keys: Keys, issuer: str, audience: str, leeway_s: int) -> None:
        self._keys = keys
        self._issuer = issuer
        self._audience = audience
        self._leeway_s = leeway_s

    async def start(self) -> None:
        await self._keys.load()

    async def principal(self, authorization: bytes | None) -> Principal:
        token = _bearer(authorization)
        try:
            header = jwt.get_unverified_header(token)
        except PyJWTError:
            raise Unauthenticated("the token is malformed") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._keys.algorithms:  # `none` too
            raise Unauthenticated("the token's algorithm is not accepted")
        kid = header.get("kid")
        key = await self._keys.find(kid if isinstance(kid, str) else None)
        if key is None:
            raise Unauthenticated("the token's key id is unknown")
        claims = self._verify(token, key.key, key.algorithms)
        # PyJWT refuses a token once int(exp) <= now - leeway: the same second, exactly
        expires_at = int(claims["exp"]) + self._leeway_s
        return Principal(claims["sub"], _scopes(claims), authenticated=True, expires_at=expires_at)

    def _verify(self, token: str, key: Any, algorithms: tuple[str, ...]) -> dict[str, Any]:
        try:
            return jwt.decode(
                token,
                key,
                algorithms=list(algorithms),
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway_s,
                options={"require": _REQUIRED_CLAIMS, "enforce_minimum_key_length": True},
            )
        except PyJWTError as exc:
            for kind, description in _REFUSED:
                if isinstance(exc, kind):
                    raise Unauthenticated(description) from None
            raise Unauthenticated("the token's signature or claims are invalid") from None


def _bearer(authorization: bytes | None) -> str:
    if authorization is None:
        raise Unauthenticated(None)
    scheme, _, token = authorization.decode("latin-1").strip().partition(" ")
    if scheme.lower() != "bearer":
        raise Unauthenticated(None)  # another scheme: as if no token was given (RFC 6750 3)
    token = token.strip()
    if not token:
        raise Unauthenticated("the bearer token is empty")
    return token


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    scopes: set[str] = set()
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if isinstance(value, str):
            scopes.update(value.split())
        elif isinstance(value, list):
            scopes.update(item for item in value if isinstance(item, str))
    return frozenset(scopes)


def authorization(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The Authorization header of an ASGI request's `headers` (None when absent)."""
    for name, value in headers:
        if name == b"authorization":
            return value
    return None


def refusal(exc: Unauthenticated) -> RequestError:
    """The HTTP 401 answering a request refused by `exc`, with its Bearer challenge."""
    if exc.description is None:
        message = "authentication required: send Authorization: Bearer <token>"
        challenge = 'Bearer realm="statefed"'
    else:
        message = f"invalid bearer token: {exc.description}"
        challenge = (
            f'Bearer realm="statefed", error="invalid_token", error_description="{exc.description}"'
        )
    headers = ((b"www-authenticate", challenge.encode("latin-1")),)
    return RequestError(message, 401, UNAUTHENTICATED, headers)


def authenticator_for(config: GatewayConfig, clock: Callable[[], int]) -> Authenticator:
    """The authenticator `config` asks for; `clock` (ms) times JWKS re-reads."""
    if not config.authenticates:
        return Anonymous()
    assert config.jwt_issuer is not None and config.jwt_audience is not None  # config checks
    keys: Keys
    if config.jwt_secret_file is not None:
        keys = SharedSecret(config.jwt_secret_file)
    elif config.jwks is not None and "://" in config.jwks:
        keys = JwksUrl(config.jwks, clock)
    else:
        assert config.jwks is not None
        keys = JwksFile(Path(config.jwks), clock)
    return JwtAuthenticator(keys, config.jwt_issuer, config.jwt_audience, config.jwt_leeway_s)
