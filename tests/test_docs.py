"""The docs (docs/, the site's pages) document every setting the code reads and every error
reason, and the configuration reference is the one the settings' declarations render."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.model.errors import ConsistencyTimeoutError, Reason, RoutingError
from runtime.config import declarations
from tooling.configdocs import PARTS, main, render

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "configuration.md"
VARIABLE = re.compile(r"STATEFED_[A-Z][A-Z0-9_]*[A-Z0-9]")


def _variables_in_code() -> set[str]:
    found: set[str] = set()
    for package in ("schema", "runtime", "node", "gateway", "pipeline", "tooling"):
        for path in (ROOT / package).rglob("*.py"):
            found |= set(VARIABLE.findall(path.read_text()))
    return found


def _pages() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md"))}


def _variables_in(texts: list[str]) -> set[str]:
    return {variable for text in texts for variable in VARIABLE.findall(text)}


def test_every_environment_variable_is_in_the_docs() -> None:
    missing = sorted(_variables_in_code() - _variables_in(list(_pages().values())))
    assert not missing, (
        f"document these in docs/ (a setting: its doc=, then `make docs`): {missing}"
    )


def test_the_docs_and_the_readme_name_no_variable_the_code_does_not_read() -> None:
    texts = [*_pages().values(), (ROOT / "README.md").read_text(encoding="utf-8")]
    assert sorted(_variables_in(texts) - _variables_in_code()) == []


def test_the_configuration_reference_is_the_one_the_declarations_render() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: run `make docs` (python -m tooling.configdocs --write "
        "docs/configuration.md)"
    )
    assert main(["--check", str(REFERENCE)]) == 0


def test_every_declared_setting_has_a_row_in_the_configuration_reference() -> None:
    rows = set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", REFERENCE.read_text(), re.MULTILINE))
    declared = {d.variable for part in PARTS for d in declarations(part.config)}
    assert sorted(declared - rows) == []
    undocumented = sorted(
        d.variable for part in PARTS for d in declarations(part.config) if not d.doc.strip()
    )
    assert undocumented == [], "give these settings a doc= where they are declared"


def _routing_errors() -> list[type[RoutingError]]:
    found: list[type[RoutingError]] = []
    todo: list[type[RoutingError]] = [RoutingError]
    while todo:
        error = todo.pop()
        found.append(error)
        todo.extend(error.__subclasses__())
    return found


def test_every_error_reason_is_in_the_troubleshooting_pages_reason_table() -> None:
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    table = page[page.index("| reason | code | what it means | what to do |") :]
    table = table[: table.index("\n\n")]
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE))
    assert documented == {reason.value for reason in Reason}
    raised = {error.reason for error in _routing_errors() if "reason" in vars(error)}
    raised.add(ConsistencyTimeoutError("v", "t:0:0", None).extensions()["reason"])
    assert raised == set(Reason), "every reason is raised, and every raised reason is listed"


def test_the_readme_links_every_page_and_stays_short() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(docs/([a-z]+\.md)(?:#[a-z0-9-]+)?\)", readme))
    assert linked == {path.name for path in _pages()}
    assert len(readme.splitlines()) <= 250, "the detail belongs in docs/"
