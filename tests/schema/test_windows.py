"""WindowSpec: tumbling and hopping windows, which windows hold an event, what is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema import WindowSpec

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


@pytest.mark.parametrize("slide", [0, -1, 7_000, 90_000])
def test_a_slide_that_does_not_divide_the_size_is_refused_with_an_example(slide: int) -> None:
    with pytest.raises(ValueError) as refused:
        WindowSpec(size_ms=60_000, grace_ms=0, retention_ms=HOUR, slide_ms=slide)
    assert str(refused.value) == (
        f"window slide_ms must divide size_ms (60000), so that every window starts where an "
        f"earlier one did plus a whole number of slides, got {slide}: e.g. slide_ms=15000, "
        f"or None for tumbling windows"
    )
