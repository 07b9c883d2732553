"""The README documents every setting the code reads, and every error reason."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.errors import ConsistencyTimeoutError, Reason, RoutingError

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


def _routing_errors() -> list[type[RoutingError]]:
    found: list[type[RoutingError]] = []
    todo: list[type[RoutingError]] = [RoutingError]
    while todo:
        error = todo.pop()
        found.append(error)
        todo.extend(error.__subclasses__())
    return found


def test_every_error_reason_is_in_the_readmes_reason_table() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| reason | code | what it means | what to do |") :]
    table = table[: table.index("\n\n")]
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE))
    assert documented == {reason.value for reason in Reason}
    raised = {error.reason for error in _routing_errors() if "reason" in vars(error)}
    raised.add(ConsistencyTimeoutError("v", "t:0:0", None).extensions()["reason"])
    assert raised == set(Reason), "every reason is raised, and every raised reason is listed"
