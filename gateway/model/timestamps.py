"""UTC datetimes and milliseconds since the epoch: the one place the gateway converts them.

Every datetime here is timezone-aware and in UTC; ms values are exact integers (no float
round trip).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["EPOCH", "ceil_ms", "floor_ms", "from_ms", "iso", "iso_ms", "parse_utc"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def from_ms(ms: int) -> datetime:
    """The UTC datetime `ms` milliseconds after the epoch."""
    return EPOCH + ms * _MS


def floor_ms(moment: datetime) -> int:
    """Whole milliseconds since the epoch, rounded down; `moment` must be aware."""
    return (moment - EPOCH) // _MS


def ceil_ms(moment: datetime) -> int:
    """Whole milliseconds since the epoch, rounded up; `moment` must be aware."""
    return -((EPOCH - moment) // _MS)


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC, as the DateTime scalar of the node subgraph expects it."""
    return moment.astimezone(UTC).isoformat()


def iso_ms(ms: int) -> str:
    """`ms` since the epoch as ISO-8601 UTC, to the millisecond."""
    return from_ms(ms).isoformat(timespec="milliseconds")


def parse_utc(text: str) -> datetime:
    """An ISO-8601 text with an offset, as UTC; ValueError for anything else."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError(f"{text!r} is outside the years 1 to 9999 in UTC") from exc
