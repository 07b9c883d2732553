"""RESULTS.md keeps its hand-written optimizations section across benchmark runs."""

from __future__ import annotations

from tests.bench.results import kept_section

KEPT = "## Optimizations (before/after)\n\nWhat changed, measured how.\n\n| a | b |\n"


def test_the_section_is_cut_at_the_next_heading() -> None:
    markdown = f"# statefed benchmark results\n\n## 1. Restore\n\nx\n\n{KEPT}\n## Later\n\ny\n"
    assert kept_section(markdown) == KEPT


def test_the_section_may_end_the_file() -> None:
    assert kept_section(f"# results\n\n{KEPT}\n\n") == KEPT


def test_no_section_keeps_nothing() -> None:
    assert kept_section("# results\n\n## 1. Restore\n") == ""
    assert kept_section("# results: see ## Optimizations (before/after) below\n") == ""
