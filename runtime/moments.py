"""A client's time argument in UTC, checked the same way by the gateway and the nodes: it
must carry an offset, and its UTC instant must fall in the years a `datetime` holds (year 1
at +14:00 is before the first one). Each part raises the problem as its own
BAD_USER_INPUT error."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["in_utc"]


def in_utc(name: str, moment: datetime) -> datetime:
    """`moment` (the argument `name`) in UTC; ValueError saying why it cannot be."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} {moment.isoformat()} needs a UTC offset (e.g. ...T12:00:00Z)")
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:  # year 1 at +14:00, year 9999 at -14:00
        raise ValueError(
            f"{name} {moment.isoformat()} is outside the years 1 to 9999 in UTC"
        ) from exc
