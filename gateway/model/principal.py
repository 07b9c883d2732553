"""Who is asking: the principal a request is made for, from its bearer token or anonymous."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ANONYMOUS", "Principal"]


@dataclass(frozen=True)
class Principal:
    """The caller of one request: the token's subject and scopes, or anonymous."""

    subject: str
    scopes: frozenset[str] = field(default_factory=frozenset)
    authenticated: bool = False
    # the Unix second (wall clock) from which its token no longer verifies; None: never
    expires_at: int | None = None

    def may(self, scope: str | None) -> bool:
        """True when no scope is needed, or the principal holds `scope`."""
        return scope is None or scope in self.scopes


ANONYMOUS = Principal("anonymous")
