"""One reader of `STATEFED_*` configuration for every part.

A part's configuration is a frozen dataclass deriving from `EnvConfig`; each field read
from the environment is declared with `setting(variable, default, ..., doc=...)`, which
records the variable, how to parse it, its bounds and what it means to a user: the
configuration reference (`docs/configuration.md`) is rendered from these declarations by
`tooling.configdocs`. `from_env(environ)` reads the mapping in one place (`os.environ` in
a process, a dict in a test), and `__post_init__` checks every value against its
declaration however the dataclass was built.

The rules are the same for every part and variable:

- unset, or set to the empty string (`VAR=` in a shell or a compose file): the default;
- anything else has its surrounding whitespace stripped, then is parsed by the field's
  type: integers and floats (with inclusive bounds), booleans (`true`/`false`, `1`/`0`,
  `yes`/`no`, `on`/`off`, any case), paths, and strings (never empty);
- every problem is a `ConfigError` (a `ValueError`) whose message starts with the
  variable and says what value would be accepted.

Durations are integers of milliseconds with an `_ms` suffix in the field and variable.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

__all__ = [
    "ConfigError",
    "Declaration",
    "EnvConfig",
    "comma_separated",
    "declarations",
    "setting",
    "settings_group",
]

_T = TypeVar("_T")
_C = TypeVar("_C", bound="EnvConfig")
_METADATA_KEY = "statefed.setting"
_GROUP_KEY = "statefed.settings_group"
_FLAGS = dict.fromkeys(("true", "1", "yes", "on"), True) | dict.fromkeys(
    ("false", "0", "no", "off"), False
)


class ConfigError(ValueError):
    """A configuration variable is invalid; the message starts with the variable's name.

    Each part subclasses it into its own exception tree (`node.errors.ConfigError`,
    `pipeline.errors.PipelineConfigError`), so a launcher catches one type for all parts.
    """

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One variable a configuration dataclass reads, as its `setting(...)` declared it."""

    variable: str
    default: object
    kind: type  # bool, int, float, Path, str; `object` for a field with its own parser
    parse: Callable[[str], object]
    low: float | None
    high: float | None
    choices: tuple[str, ...] | None
    doc: str  # what it means to a user: one Markdown table cell of the reference
    shown_default: str | None  # the default the reference shows, when derived at run time


def setting(
    variable: str,
    default: _T,
    *,
    parse: Callable[[str], _T] | None = None,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[str] | None = None,
    doc: str = "",
    shown_default: str | None = None,
) -> _T:
    """A dataclass field read from `variable`, parsed by the default's type unless `parse`
    is given; `low`/`high` bound numbers inclusively, `choices` lists the accepted strings.
    `doc` says what it means to a user; `shown_default` is the default the configuration
    reference shows instead of `default` when the real one is derived at run time."""
    # an optional number (default None, parsed as int or float) is bounded and named as one
    kind = parse if default is None and parse in (int, float) else _kind(default)
    spec = Declaration(
        variable,
        default,
        kind,
        parse or _PARSERS.get(kind, str),
        low,
        high,
        None if choices is None else tuple(choices),
        doc,
        shown_default,
    )
    field: _T = dataclasses.field(default=default, metadata={_METADATA_KEY: spec})
    return field


def settings_group(read: Callable[[Mapping[str, str]], _T], default: _T) -> _T:
    """A dataclass field read from a family of variables at once by `read(environ)` (the
    Kafka client settings, `runtime.kafka`); `read` raises `ConfigError` naming the variable."""
    field: _T = dataclasses.field(default=default, metadata={_GROUP_KEY: read})
    return field


def _kind(default: object) -> type:
    # bool before int: True is an int too
    for kind in (bool, int, float, Path, str):
        if isinstance(default, kind):
            return kind
    return object


def comma_separated(raw: str) -> tuple[str, ...]:
    """A setting's comma-separated list: the parts stripped, the empty ones left out."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _parse_bool(raw: str) -> bool:
    value = _FLAGS.get(raw.lower())
    if value is None:
        raise ValueError(raw)
    return value


def _parse_int(raw: str) -> int:
    """ASCII digits with an optional sign: not int()'s other digits, `_` or spaces."""
    if re.fullmatch(r"[+-]?[0-9]+", raw.strip()) is None:
        raise ValueError(raw)
    return int(raw)


def _parse_float(raw: str) -> float:
    """A finite number (not nan or inf)."""
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


_PARSERS: dict[type, Callable[[str], object]] = {
    bool: _parse_bool,
    int: _parse_int,
    float: _parse_float,
    Path: Path,
}
_KIND_NAMES = {
    bool: "true or false (also 1/0, yes/no, on/off)",
    int: "an integer",
    float: "a number",
}


class _Variables:
    """`Config.ENV`: each field read from the environment, mapped to its variable."""

    def __get__(self, instance: object, owner: type) -> Mapping[str, str]:
        return {name: spec.variable for name, spec in _settings(owner)}


def _settings(cls: type) -> list[tuple[str, Declaration]]:
    return [
        (field.name, field.metadata[_METADATA_KEY])
        for field in dataclasses.fields(cls)
        if _METADATA_KEY in field.metadata
    ]


def declarations(cls: type) -> list[Declaration]:
    """The variables the configuration dataclass `cls` reads through `setting(...)`, in
    declaration order; the families read by `settings_group` fields are not among them."""
    return [spec for _, spec in _settings(cls)]


class EnvConfig:
    """Base of a part's frozen configuration dataclass: `from_env` and the checks."""

    ENV: ClassVar[_Variables] = _Variables()
    # the error raised for a bad value; each part names its own subclass
    config_error: ClassVar[type[ConfigError]] = ConfigError

    @classmethod
    def from_env(cls: type[_C], environ: Mapping[str, str]) -> _C:
        """Read the configuration; unset variables keep their defaults."""
        return cls(**cls.env_values(environ))

    @classmethod
    def env_values(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        """The parsed value of each field whose variable is set (and not empty)."""
        values: dict[str, Any] = {}
        for name, spec in _settings(cls):
            raw = environ.get(spec.variable)
            if raw is None or raw == "":
                continue
            if not raw.strip():
                raise cls.config_error(
                    spec.variable, "is blank: unset it (or set it empty) for the default"
                )
            try:
                values[name] = spec.parse(raw.strip())
            except ValueError as exc:
                raise cls.config_error(spec.variable, f"{_expected(spec)}, got {raw!r}") from exc
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            read = field.metadata.get(_GROUP_KEY)
            if read is None:
                continue
            try:
                values[field.name] = read(environ)
            except ConfigError as exc:  # in the part's own exception tree
                raise cls.config_error(exc.variable, exc.problem) from exc
        return values

    def __post_init__(self) -> None:
        for name, spec in _settings(type(self)):
            problem = _problem(spec, getattr(self, name))
            if problem is not None:
                raise self.config_error(spec.variable, problem)


def _expected(spec: Declaration) -> str:
    if spec.kind not in _KIND_NAMES:
        return "is not valid"
    kind = _KIND_NAMES[spec.kind]
    if spec.low is not None and spec.high is not None:
        return f"must be {kind} in {spec.low}..{spec.high}"
    if spec.low is not None:
        return f"must be {kind} >= {spec.low}"
    if spec.high is not None:
        return f"must be {kind} <= {spec.high}"
    return f"must be {kind}"


def _problem(spec: Declaration, value: object) -> str | None:
    """What is wrong with `value` for `spec`, or None when it is acceptable."""
    if value is None and spec.default is None:  # an optional setting left unset
        return None
    if spec.kind in _KIND_NAMES:
        if not _in_bounds(spec, value):
            return f"{_expected(spec)}, got {value!r}"
    elif isinstance(value, str | Path) and not str(value).strip():
        return "must not be empty"
    if spec.choices is not None and value not in spec.choices:
        return f"must be one of {', '.join(spec.choices)}, got {value!r}"
    return None


def _in_bounds(spec: Declaration, value: object) -> bool:
    if spec.kind is bool:
        return isinstance(value, bool)
    numbers = (int,) if spec.kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, numbers):
        return False
    return (spec.low is None or value >= spec.low) and (spec.high is None or value <= spec.high)
