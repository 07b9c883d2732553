"""The windows of a windowed view: tumbling, hopping or session windows of event time.

A `WindowSpec` is checked when its view is (`View` names the view in the error): a window
without a size or a gap, or with both, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WindowSpec"]


@dataclass(frozen=True)
class WindowSpec:
    """Windows of event time: give `size_ms`, or `gap_ms` for session windows.

    `size_ms`: windows of that length, a new one starting every `slide_ms` (None: every
    `size_ms`, tumbling windows; less: hopping windows, which overlap, so an event counts
    in `size_ms / slide_ms` of them). They start at whole multiples of the slide since the
    epoch.

    `gap_ms`: session windows. A key's session is its events with no gap of more than
    `gap_ms` between them, from its first event to its last plus the gap; sessions are as
    long as their events make them, and a session is written once the watermark has
    passed its end (the pipeline keeps it open until no event can join it).

    Events up to `grace_ms` late (behind the newest event time seen) still count; windows
    that ended more than `retention_ms` ago are removed and never returned, so the
    retention is at least the grace (more than it for sessions, written once the grace
    has passed their end).
    """

    size_ms: int = 0
    grace_ms: int = 0
    retention_ms: int = 0
    slide_ms: int | None = None
    gap_ms: int | None = None

    def problem(self) -> str | None:
        """What is wrong with the spec, said as the fix; None when it is whole."""
        if (self.size_ms > 0) == (self.gap_ms is not None):
            return (
                "needs a size_ms (tumbling or hopping windows) or a gap_ms (session "
                f"windows), exactly one of them, got size_ms={self.size_ms} and "
                f"gap_ms={self.gap_ms}"
            )
        if self.gap_ms is not None and self.gap_ms <= 0:
            return f"gap_ms must be > 0, got {self.gap_ms}"
        if self.size_ms < 0 or self.grace_ms < 0:
            return f"size_ms and grace_ms must be >= 0, got {self.size_ms} and {self.grace_ms}"
        if self.retention_ms < self.size_ms or self.retention_ms <= 0:
            return (
                f"retention_ms must be > 0 and at least size_ms, got {self.retention_ms}: "
                "how long windows are kept after they end"
            )
        if self.retention_ms < self.grace_ms or (
            self.session and self.retention_ms == self.grace_ms
        ):
            return self._retention_within_grace()
        if self.slide_ms is not None and not (
            0 < self.slide_ms <= self.size_ms and self.size_ms % self.slide_ms == 0
        ):
            return (
                f"slide_ms must divide size_ms ({self.size_ms}), so that every window "
                f"starts where an earlier one did plus a whole number of slides, got "
                f"{self.slide_ms}: e.g. slide_ms={self.size_ms // 4}, or None for tumbling "
                f"windows"
            )
        return None

    def _retention_within_grace(self) -> str:
        if self.session:
            return (
                f"retention_ms must be more than grace_ms ({self.grace_ms}), got "
                f"{self.retention_ms}: a session is written once the grace has passed its "
                "end, so one kept no longer than the grace is removed as it arrives"
            )
        return (
            f"retention_ms must be at least grace_ms ({self.grace_ms}), got "
            f"{self.retention_ms}: late events change a window until the grace has passed "
            "its end, so one removed sooner loses them"
        )

    @property
    def session(self) -> bool:
        """Session windows: as long as their events make them, starting at any ms."""
        return self.gap_ms is not None

    @property
    def hop_ms(self) -> int:
        """How far apart windows start: the slide, or the size for tumbling windows; any
        whole ms (1) for sessions."""
        if self.session:
            return 1
        return self.slide_ms or self.size_ms

    @property
    def hopping(self) -> bool:
        return not self.session and self.hop_ms < self.size_ms

    def starts_of(self, event_ms: int) -> tuple[int, ...]:
        """The starts of the windows of a size an event at `event_ms` falls in, oldest
        first (sessions depend on the other events: see `WindowSpec`)."""
        if self.session:
            raise ValueError("a session's start depends on the other events of its key")
        last = event_ms - event_ms % self.hop_ms
        return tuple(range(last - self.size_ms + self.hop_ms, last + 1, self.hop_ms))

    def kept_per_key(self) -> int:
        """The most windows of one key the retention keeps (a range query's largest
        answer); for sessions, which are at least the gap long and start at least the gap
        apart, as many as fit."""
        if self.gap_ms is not None:
            return self.retention_ms // self.gap_ms + 2
        return self.retention_ms // self.hop_ms + self.size_ms // self.hop_ms
