"""tooling.configdocs: the configuration reference rendered from `setting(...)` declarations."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.config import EnvConfig, setting
from tooling.configdocs import Part, main, render, rows


@dataclass(frozen=True)
class _One(EnvConfig):
    port: int = setting("T_PORT", 8100, low=1, high=65535, doc="where it serves")
    flag: bool = setting("T_FLAG", False, doc="a switch")
    mode: str = setting("T_MODE", "a", choices=("a", "b"), doc="the mode")
    state: Path = setting("T_STATE", Path("x/n1"), doc="its data", shown_default="`x/<id>`")
    secret: Path | None = setting("T_SECRET", None, parse=Path, doc="the shared secret")


@dataclass(frozen=True)
class _Other(EnvConfig):
    secret: Path | None = setting("T_SECRET", None, parse=Path, doc="the shared secret")
    size: int = setting("T_SIZE_MB", 16, low=0, doc="memory it may take")


@dataclass(frozen=True)
class _Undocumented(EnvConfig):
    size: int = setting("T_SIZE_MB", 16)


@dataclass(frozen=True)
class _Disagreeing(EnvConfig):
    secret: Path | None = setting("T_SECRET", None, parse=Path, doc="another meaning")


def _parts(*configs: type) -> list[Part]:
    titles = [config.__name__.strip("_") for config in configs]
    return [Part(c, t.lower(), t, "Intro.") for c, t in zip(configs, titles, strict=True)]


def test_each_variable_is_one_row_with_its_default_what_it_accepts_and_its_doc() -> None:
    sections = rows(_parts(_One, _Other))
    one = {row.variable: row for row in sections["One"]}
    assert (one["T_PORT"].default, one["T_PORT"].accepts) == ("`8100`", "an integer in 1..65,535")
    assert (one["T_FLAG"].default, one["T_FLAG"].accepts) == ("`false`", "`true` or `false`")
    assert one["T_MODE"].accepts == "one of `a`, `b`"
    assert one["T_STATE"].default == "`x/<id>`", "a default derived at run time is shown as said"
    assert one["T_PORT"].meaning == "where it serves"
    assert [row.variable for row in sections["Other"]] == ["T_SIZE_MB"]
    assert sections["Other"][0].accepts == "an integer >= 0"


def test_a_variable_several_parts_read_is_listed_once_naming_them() -> None:
    shared = rows(_parts(_One, _Other))["Shared by several parts"]
    assert [(row.variable, row.read_by, row.default) for row in shared] == [
        ("T_SECRET", ("one", "other"), "unset")
    ]


def test_a_setting_without_a_doc_or_with_two_meanings_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="T_SIZE_MB has no doc"):
        rows(_parts(_Undocumented))
    with pytest.raises(ValueError, match="T_SECRET has different docs"):
        rows(_parts(_One, _Disagreeing))


def test_the_page_has_a_table_per_part_and_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    page = render(_parts(_One, _Other))
    assert "## One\n\nIntro.\n\n| variable | default | accepts | meaning |" in page
    assert "| `T_SECRET` | one, other | unset | a path | the shared secret |" in page
    reference = tmp_path / "configuration.md"
    assert main(["--write", str(reference)]) == 0
    assert main(["--check", str(reference)]) == 0
    reference.write_text(reference.read_text() + "\nedited by hand\n")
    assert main(["--check", str(reference)]) == 1
