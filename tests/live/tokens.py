"""HS256 bearer tokens for the transport tests, and the gateway settings that verify them."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import jwt

from gateway.config import GatewayConfig

__all__ = ["AUDIENCE", "ISSUER", "Issuer", "new_issuer"]

ISSUER = "https://issuer.test/"
AUDIENCE = "statefed-gateway"


@dataclasses.dataclass(frozen=True)
class Issuer:
    """Signs tokens with `secret`, which a gateway with `config` (authentication on)
    verifies."""

    secret: bytes
    config: GatewayConfig

    def token(self, **changes: Any) -> str:
        """A token for `alice`, valid for 5 minutes; `changes` set claims (None drops one)."""
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300}
        claims.update(changes)
        return jwt.encode({k: v for k, v in claims.items() if v is not None}, self.secret, "HS256")

    def bearer(self, **changes: Any) -> dict[str, str]:
        """The Authorization header of `token(**changes)`."""
        return {"authorization": f"Bearer {self.token(**changes)}"}


def new_issuer(directory: Path, **settings: Any) -> Issuer:
    """An issuer whose secret is written to `directory`; `settings` are more of the gateway's."""
    secret = os.urandom(32).hex().encode()
    path = directory / "secret"
    path.write_bytes(secret)
    config = GatewayConfig(
        auth="jwt", jwt_secret_file=path, jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **settings
    )
    return Issuer(secret, config)
