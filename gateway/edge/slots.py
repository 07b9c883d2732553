"""How many subscriptions may run: in total (STATEFED_GATEWAY_MAX_SUBSCRIPTIONS) and on one
connection (STATEFED_GATEWAY_MAX_SUBSCRIPTIONS_PER_CONNECTION: a WebSocket, an SSE
reservation, or the one operation of a distinct SSE request).

A subscription takes a `Slot` before its source stream starts and gives it back when the
stream ends, however it ends; one over either limit is refused with TOO_MANY_SUBSCRIPTIONS,
an error naming the setting to raise, and the connection stays usable.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MAX_OPERATIONS",
    "TOO_MANY_OPERATIONS",
    "TOO_MANY_SUBSCRIPTIONS",
    "Slot",
    "Slots",
    "TooManySubscriptions",
    "over_limit",
]

TOO_MANY_SUBSCRIPTIONS = "TOO_MANY_SUBSCRIPTIONS"
# operations at once on one WebSocket or SSE stream (gateway.edge.ws, gateway.edge.sse)
TOO_MANY_OPERATIONS = "TOO_MANY_OPERATIONS"
MAX_OPERATIONS = "STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION"
_TOTAL = "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS"
_PER_CONNECTION = "STATEFED_GATEWAY_MAX_SUBSCRIPTIONS_PER_CONNECTION"


class TooManySubscriptions(Exception):
    """A subscription over a limit; `variable` names the setting that raises it."""

    def __init__(self, message: str, limit: int, variable: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.variable = variable

    def errors(self) -> list[dict[str, Any]]:
        """The GraphQL errors refusing the subscription."""
        return over_limit(str(self), TOO_MANY_SUBSCRIPTIONS, self.limit, self.variable)


def over_limit(message: str, code: str, limit: int, variable: str) -> list[dict[str, Any]]:
    """The GraphQL errors refusing an operation over a connection's limit: `code`, the
    `limit` and the `variable` that sets it in its extensions."""
    extensions = {"code": code, "limit": limit, "variable": variable}
    return [{"message": message, "extensions": extensions}]


class Slot:
    """One running subscription's place; `release` is idempotent."""

    def __init__(self, slots: Slots, connection: Slots.Connection) -> None:
        self._slots = slots
        self._connection = connection
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots.running -= 1
            self._connection.running -= 1


class Slots:
    """The subscription limits of one gateway: at most `total` running, `per_connection` on
    any one connection."""

    class Connection:
        """The subscriptions running on one connection."""

        def __init__(self) -> None:
            self.running = 0

    def __init__(self, total: int, per_connection: int) -> None:
        self.total = total
        self.per_connection = per_connection
        self.running = 0

    def take(self, connection: Slots.Connection) -> Slot:
        """A slot for a new subscription on `connection`; TooManySubscriptions over a limit."""
        if connection.running >= self.per_connection:
            raise TooManySubscriptions(
                f"this connection already runs {connection.running} subscriptions, at most "
                f"{self.per_connection}: complete one first, or open another connection",
                self.per_connection,
                _PER_CONNECTION,
            )
        if self.running >= self.total:
            raise TooManySubscriptions(
                f"the gateway already runs {self.running} subscriptions, at most {self.total}: "
                "retry later",
                self.total,
                _TOTAL,
            )
        self.running += 1
        connection.running += 1
        return Slot(self, connection)
