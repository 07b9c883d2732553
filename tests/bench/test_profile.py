"""Profiles say where a process's time goes: each sample's self time goes to the area of
its innermost frame with a known file, so the areas add up to the whole profile."""

from __future__ import annotations

import pytest

from tests.bench.profile import Profile, write_profiles
from tests.bench.report import Report

_COLLAPSED = "\n".join(
    [
        # the innermost frame is uvicorn's
        "run (asyncio/runners.py:1);send (/x/site-packages/uvicorn/protocols/http/h.py:2) 4",
        # a generated `__init__` (no file) is the time of the planner that called it
        "run (asyncio/runners.py:1);Planner._rounds (/work/main/gateway/reads/planner.py:9);"
        "__init__ (<string>:1) 3",
        "run (asyncio/runners.py:1);_object (/work/main/gateway/execute/fastpath.py:5) 2",
        # the cache's own code is an area of its own, apart from the planner that calls it
        "run (asyncio/runners.py:1);Planner.lookup (/work/main/gateway/reads/planner.py:3);"
        "GatewayCache.holds (/work/main/gateway/reads/cache.py:7) 2",
        # nothing known on the stack
        "<module> (<frozen runpy>:1) 1",
    ]
)


def test_each_sample_counts_for_the_area_of_its_innermost_known_frame() -> None:
    profile = Profile.from_collapsed("gateway", _COLLAPSED)
    assert dict(profile.areas) == {
        "HTTP server (uvicorn)": 4,
        "gateway: reads (planner)": 3,
        "gateway: plans and responses": 2,
        "gateway: cache": 2,
        "other": 1,
    }
    shares = profile.to_json()["area_percent"]
    assert sum(shares.values()) == pytest.approx(100.0)
    assert shares["HTTP server (uvicorn)"] == pytest.approx(100 * 4 / 12)


def test_the_report_shows_where_the_time_goes_beside_the_hottest_functions() -> None:
    section = Report().section("shapes", "Shapes")
    write_profiles(section, [Profile.from_collapsed("gateway", _COLLAPSED)], "Profiled.")
    titles = [table.headers[0] for table in section.tables]
    assert titles == [
        "gateway: hottest functions (self)",
        "gateway: statefed code (inclusive)",
        "gateway: where the time goes (self time)",
    ]
    assert section.tables[2].rows[0] == ["HTTP server (uvicorn)", "33.3"]
