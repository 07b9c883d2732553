"""runtime.config: the rules every part's configuration is read by."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.config import ConfigError, EnvConfig, setting


class _Error(ConfigError):
    pass


@dataclass(frozen=True)
class _Config(EnvConfig):
    config_error = _Error

    name: str = setting("T_NAME", "n")
    count: int = setting("T_COUNT", 3, low=1, high=10)
    ratio: float = setting("T_RATIO", 0.5, low=0.0, high=1.0)
    flag: bool = setting("T_FLAG", False)
    path: Path = setting("T_PATH", Path("/tmp/x"))
    mode: str = setting("T_MODE", "a", parse=str.lower, choices=("a", "b"))
    spec: str | None = setting("T_SPEC", None, parse=str)


def test_unset_and_empty_variables_keep_the_default() -> None:
    assert _Config.from_env({}) == _Config()
    assert _Config.from_env(dict.fromkeys(_Config.ENV.values(), "")) == _Config()


def test_values_are_stripped_and_parsed_by_type() -> None:
    environ = {
        "T_NAME": " m ",
        "T_COUNT": "10",
        "T_RATIO": "0.25",
        "T_FLAG": "On",
        "T_PATH": "/var/x",
        "T_MODE": "B",
        "T_SPEC": "pkg.mod:NAME",
    }
    config = _Config.from_env(environ)
    assert config == _Config("m", 10, 0.25, True, Path("/var/x"), "b", "pkg.mod:NAME")
    assert _Config.ENV["count"] == "T_COUNT"


@pytest.mark.parametrize(
    ("variable", "raw", "message"),
    [
        ("T_COUNT", "ten", "must be an integer in 1..10, got 'ten'"),
        ("T_COUNT", "٨", "must be an integer in 1..10, got '٨'"),  # int() takes it
        ("T_COUNT", "1_0", "must be an integer in 1..10, got '1_0'"),
        ("T_RATIO", "nan", "must be a number in 0.0..1.0, got 'nan'"),
        ("T_COUNT", "11", "must be an integer in 1..10, got 11"),
        ("T_RATIO", "2", "must be a number in 0.0..1.0, got 2.0"),
        ("T_FLAG", "maybe", "must be true or false (also 1/0, yes/no, on/off), got 'maybe'"),
        ("T_MODE", "c", "must be one of a, b, got 'c'"),
        ("T_NAME", "  ", "is blank: unset it (or set it empty) for the default"),
    ],
)
def test_errors_name_the_variable_and_what_it_accepts(
    variable: str, raw: str, message: str
) -> None:
    with pytest.raises(_Error) as raised:
        _Config.from_env({variable: raw})
    assert str(raised.value) == f"{variable}: {message}"
    assert raised.value.variable == variable


def test_values_given_directly_are_checked_too() -> None:
    with pytest.raises(_Error, match=r"^T_COUNT: "):
        _Config(count=0)
    with pytest.raises(_Error, match=r"^T_FLAG: "):
        _Config(flag=1)  # type: ignore[arg-type]
    with pytest.raises(_Error, match=r"^T_NAME: must not be empty"):
        _Config(name="")
