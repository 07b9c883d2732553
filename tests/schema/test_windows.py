"""WindowSpec: tumbling, hopping and session windows, which windows hold an event, and
what a view refuses, naming itself."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema import View, ViewKind, WindowSpec

HOUR = 3_600_000


@st.composite
def specs(draw: st.DrawFn) -> WindowSpec:
    hop = draw(st.integers(1, 10_000))
    size = hop * draw(st.integers(1, 12))
    slide = None if size == hop and draw(st.booleans()) else hop
    return WindowSpec(size_ms=size, grace_ms=0, retention_ms=size, slide_ms=slide)


@given(specs(), st.integers(0, 2**42))
def test_an_event_falls_in_every_aligned_window_holding_it_and_no_other(
    spec: WindowSpec, event_ms: int
) -> None:
    starts = spec.starts_of(event_ms)
    assert len(starts) == spec.size_ms // spec.hop_ms
    assert list(starts) == sorted(starts)
    # by brute force over the aligned starts near the event
    near = range(event_ms - spec.size_ms - spec.hop_ms, event_ms + spec.hop_ms + 1)
    holding = [s for s in near if s % spec.hop_ms == 0 and s <= event_ms < s + spec.size_ms]
    assert list(starts) == holding


def test_tumbling_windows_are_the_default_and_do_not_overlap() -> None:
    minute = WindowSpec(size_ms=60_000, grace_ms=0, retention_ms=HOUR)
    assert minute.hop_ms == 60_000 and not minute.hopping
    assert minute.starts_of(125_000) == (120_000,)
    assert minute.kept_per_key() == 61  # an hour's windows and the one being filled


def test_hopping_windows_overlap_by_size_over_slide() -> None:
    hop = WindowSpec(size_ms=60_000, grace_ms=0, retention_ms=HOUR, slide_ms=20_000)
    assert hop.hopping
    assert hop.starts_of(125_000) == (80_000, 100_000, 120_000)
    assert hop.kept_per_key() == 180 + 3


def _view(window: WindowSpec) -> View:
    return View("v", "t", ViewKind.WINDOWED_COUNT, "key", "V", "point", top_field="top",
                window=window)  # fmt: skip


@pytest.mark.parametrize("slide", [0, -1, 7_000, 90_000])
def test_a_slide_that_does_not_divide_the_size_is_refused_with_an_example(slide: int) -> None:
    with pytest.raises(ValueError) as refused:
        _view(WindowSpec(size_ms=60_000, grace_ms=0, retention_ms=HOUR, slide_ms=slide))
    assert str(refused.value) == (
        f"view v: window slide_ms must divide size_ms (60000), so that every window starts "
        f"where an earlier one did plus a whole number of slides, got {slide}: e.g. "
        f"slide_ms=15000, or None for tumbling windows"
    )


@pytest.mark.parametrize(
    ("window", "message"),
    [
        (WindowSpec(retention_ms=HOUR), "needs a size_ms (tumbling or hopping windows) or a"),
        (WindowSpec(size_ms=1, gap_ms=1, retention_ms=HOUR), "exactly one of them"),
        (WindowSpec(gap_ms=0, retention_ms=HOUR), "gap_ms must be > 0, got 0"),
        (WindowSpec(size_ms=HOUR), "retention_ms must be > 0 and at least size_ms, got 0"),
        (WindowSpec(gap_ms=1), "retention_ms must be > 0 and at least size_ms, got 0"),
        (WindowSpec(size_ms=1, grace_ms=-1, retention_ms=1), "size_ms and grace_ms must be"),
        (
            WindowSpec(size_ms=60_000, grace_ms=HOUR, retention_ms=HOUR - 1),
            f"retention_ms must be at least grace_ms ({HOUR}), got {HOUR - 1}: late events",
        ),
        (
            WindowSpec(gap_ms=60_000, grace_ms=HOUR, retention_ms=HOUR),
            f"retention_ms must be more than grace_ms ({HOUR}), got {HOUR}: a session is",
        ),
    ],
)
def test_a_window_without_a_size_or_gap_is_refused_naming_the_view(
    window: WindowSpec, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^view v: window .*{re.escape(message)}"):
        _view(window)


def test_sessions_start_at_any_millisecond_and_overlap_nothing() -> None:
    sessions = WindowSpec(gap_ms=30 * 60_000, grace_ms=0, retention_ms=HOUR)
    assert _view(sessions).window == sessions
    assert sessions.session and not sessions.hopping and sessions.hop_ms == 1
    assert sessions.kept_per_key() == 4  # at least a gap long and a gap apart
    with pytest.raises(ValueError, match="depends on the other events"):
        sessions.starts_of(0)
