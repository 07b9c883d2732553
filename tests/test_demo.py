"""The demo's example queries answer with the demo's data: the windows they name are
minutes its page views fall in, whenever the demo runs."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

from gateway.model.timestamps import parse_utc
from tooling import demodata
from tooling.demo import examples, iso_minute

NOW_MS = 1_795_000_123_456  # any moment: the examples are built from it


def _minute_counts(now_ms: int) -> Counter[int]:
    """Page views per minute start (ms) in the demo's first batch."""
    records = demodata.pageviews(3000, random.Random(1), now_ms)
    times = [json.loads(r.value or b"")["timestamp"] for r in records]
    return Counter(t - t % 60_000 for t in times)


def _named(text: str, argument: str) -> int:
    found = re.search(rf'{argument}: "([^"]+)"', text)
    assert found, f"no {argument} in the examples:\n{text}"
    return int(parse_utc(found.group(1)).timestamp() * 1000)


def test_the_window_the_top_hosts_example_names_holds_demo_page_views() -> None:
    window = _named(examples(NOW_MS), r"window: \{start")
    assert window % 60_000 == 0
    assert _minute_counts(NOW_MS)[window] > 100


def test_the_host_windows_example_starts_before_every_demo_page_view() -> None:
    since = _named(examples(NOW_MS), "from")
    assert since <= min(_minute_counts(NOW_MS))


def test_a_minute_start_is_written_as_windows_start() -> None:
    assert iso_minute(NOW_MS) == "2026-11-18T11:08:00Z"
