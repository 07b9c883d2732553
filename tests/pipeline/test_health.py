"""The pipeline's health file and `statefed pipeline --check-health`, which container health
checks run (the running pipeline writing it is shown in test_run.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import HealthFile, PipelineConfig, PipelineConfigError, check_health
from runtime.clock import wall_clock_ms

REPO = Path(__file__).resolve().parents[2]
NOW = 1_767_225_600_000


def test_a_fresh_beat_is_healthy_and_names_the_queries(tmp_path: Path) -> None:
    path = tmp_path / "health"
    HealthFile(path, clock=lambda: NOW).beat(5)
    assert check_health(path, 30_000, NOW + 30_000) == (True, "5 queries running (30000 ms ago)")


def test_a_stale_beat_is_unhealthy_and_names_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "health"
    HealthFile(path, clock=lambda: NOW).beat(5)
    healthy, why = check_health(path, 30_000, NOW + 30_001)
    assert not healthy
    assert "30.0 s ago" in why
    assert "STATEFED_PIPELINE_HEALTH_MAX_AGE_MS" in why


def test_a_missing_or_damaged_file_is_unhealthy(tmp_path: Path) -> None:
    path = tmp_path / "health"
    assert check_health(path, 30_000, NOW)[0] is False
    assert "starting or not running" in check_health(path, 30_000, NOW)[1]
    for damaged in (b"", b"{", b"[]", b'{"updated_ms": 1}', b'{"updated_ms": "x", "queries": 1}'):
        path.write_bytes(damaged)
        healthy, why = check_health(path, 30_000, NOW)
        assert not healthy and "unreadable health file" in why, damaged


def test_clear_removes_the_file_and_a_beat_replaces_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "health"
    health = HealthFile(path, clock=lambda: NOW)
    health.clear()  # nothing there yet: no error
    health.beat(3)
    health.beat(4)
    assert check_health(path, 1000, NOW) == (True, "4 queries running (0 ms ago)")
    assert [p.name for p in tmp_path.iterdir()] == ["health"]  # no partial file left
    health.clear()
    assert not path.exists()


def test_no_path_keeps_no_file(tmp_path: Path) -> None:
    health = HealthFile(None)
    health.beat(2)
    health.clear()
    assert list(tmp_path.iterdir()) == []


def test_the_settings_are_read_and_checked() -> None:
    config = PipelineConfig.from_env(
        {
            "STATEFED_PIPELINE_HEALTH_FILE": "/tmp/statefed/pipeline.health",
            "STATEFED_PIPELINE_HEALTH_MAX_AGE_MS": "5000",
        }
    )
    assert config.health_file == Path("/tmp/statefed/pipeline.health")
    assert config.health_max_age_ms == 5000
    assert PipelineConfig.from_env({}).health_file is None
    with pytest.raises(PipelineConfigError, match=r"^STATEFED_PIPELINE_HEALTH_MAX_AGE_MS"):
        PipelineConfig.from_env({"STATEFED_PIPELINE_HEALTH_MAX_AGE_MS": "10"})


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooling.cli", "pipeline", "--check-health"],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_command_exits_0_when_healthy_and_1_when_not(tmp_path: Path) -> None:
    path = tmp_path / "health"
    env = {"STATEFED_PIPELINE_HEALTH_FILE": str(path)}
    missing = _check(env)
    assert missing.returncode == 1, missing
    assert missing.stdout.startswith("statefed pipeline: unhealthy: no health file")

    HealthFile(path).beat(7)
    fresh = _check(env)
    assert fresh.returncode == 0, fresh
    assert fresh.stdout.startswith("statefed pipeline: healthy: 7 queries running")

    HealthFile(path, clock=lambda: wall_clock_ms() - 60_000).beat(7)
    stale = _check({**env, "STATEFED_PIPELINE_HEALTH_MAX_AGE_MS": "30000"})
    assert stale.returncode == 1, stale
    assert "last seen running" in stale.stdout


def test_the_command_without_a_health_file_setting_says_what_to_set() -> None:
    result = _check({"STATEFED_PIPELINE_HEALTH_FILE": ""})
    assert result.returncode == 1
    assert "STATEFED_PIPELINE_HEALTH_FILE is not set" in result.stderr
