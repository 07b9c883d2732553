"""DateTime arguments and results of the subgraph: UTC datetimes <-> ms since the epoch.

Every datetime returned is timezone-aware UTC. An argument without a UTC offset, a range
with from after to, or a window start off the window grid is a `BadRequestError`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from node.errors import BadRequestError
from runtime.moments import in_utc
from schema import View

__all__ = ["ceil_ms", "from_ms", "iso_ms", "time_range", "window_start_ms"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def from_ms(ms: int) -> datetime:
    """The UTC datetime `ms` milliseconds after the epoch."""
    return _EPOCH + ms * _MS


def iso_ms(ms: int) -> str:
    """ISO-8601 in UTC with milliseconds, for times the node reports (e.g. freshness)."""
    return from_ms(ms).isoformat(timespec="milliseconds")


def ceil_ms(moment: datetime) -> int:
    """Whole ms since the epoch, rounded up; `moment` must be aware."""
    return -((_EPOCH - moment) // _MS)


def _utc(view: View, name: str, moment: datetime) -> datetime:
    try:
        return in_utc(name, moment)
    except ValueError as exc:
        raise BadRequestError(view.name, str(exc)) from exc


def time_range(
    view: View, since: datetime | None, until: datetime | None
) -> tuple[int | None, int | None]:
    """`[since, until)` as whole ms (rounded up: event times are whole ms, so rounding
    changes nothing that falls inside); None = open."""
    since_ms = None if since is None else ceil_ms(_utc(view, "from", since))
    until_ms = None if until is None else ceil_ms(_utc(view, "to", until))
    if since_ms is not None and until_ms is not None and since_ms > until_ms:
        assert since is not None and until is not None
        raise BadRequestError(
            view.name, f"from {since.isoformat()} is after to {until.isoformat()}"
        )
    return since_ms, until_ms


def window_start_ms(view: View, start: datetime) -> int:
    """The ms of `start`, which must begin one of the view's windows."""
    assert view.window is not None, f"view {view.name} has no windows"
    size = view.window.hop_ms
    moment = _utc(view, "window start", start)
    ms = (moment - _EPOCH) // _MS
    if ms < 0:
        raise BadRequestError(view.name, f"window start {moment.isoformat()} is before 1970")
    if from_ms(ms) != moment or ms % size != 0:
        containing = from_ms(ms - ms % size)
        raise BadRequestError(
            view.name,
            f"window start {moment.isoformat()} is not aligned to the windows' start every "
            f"{size} ms (the window containing it starts at {containing.isoformat()})",
        )
    return ms
