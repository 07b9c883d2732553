"""The README documents every setting the code reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
VARIABLE = re.compile(r"STATEFED_[A-Z][A-Z0-9_]*[A-Z0-9]")


def _variables_in_code() -> set[str]:
    found: set[str] = set()
    for package in ("schema", "runtime", "node", "gateway", "pipeline", "tooling"):
        for path in (ROOT / package).rglob("*.py"):
            found |= set(VARIABLE.findall(path.read_text()))
    return found


def test_every_environment_variable_is_in_the_readme() -> None:
    readme = set(VARIABLE.findall((ROOT / "README.md").read_text()))
    missing = sorted(_variables_in_code() - readme)
    assert not missing, f"document these in README.md's configuration table: {missing}"


def test_the_readme_names_no_variable_the_code_does_not_read() -> None:
    readme = set(VARIABLE.findall((ROOT / "README.md").read_text()))
    assert sorted(readme - _variables_in_code()) == []
