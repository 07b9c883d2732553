"""No unacknowledged breaking change between the baseline SDL (schema/baseline/, the last
release's contract) and the schema the code generates; see schema/baseline/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.api.schema import print_sdl
from tests.contract import (
    ACKNOWLEDGED,
    BASELINE_DIR,
    GENERATED,
    acknowledged,
    shown,
)
from tooling.breaking import breaking_changes


def current_changes() -> list[str]:
    changes = []
    for name, generate in sorted(GENERATED.items()):
        baseline = (BASELINE_DIR / f"{name}.graphql").read_text(encoding="utf-8")
        changes.extend(breaking_changes(name, baseline, generate()))
    return changes


def test_every_breaking_change_since_the_baseline_is_acknowledged() -> None:
    unacknowledged = [c for c in current_changes() if c not in acknowledged()]
    if unacknowledged:
        pytest.fail(
            "breaking changes against the baseline in schema/baseline/: undo them, or add these "
            f"lines to {shown(ACKNOWLEDGED)} to say they are deliberate (schema/baseline/"
            "README.md):\n" + "\n".join(unacknowledged),
            pytrace=False,
        )


def test_every_acknowledgement_is_a_breaking_change_still() -> None:
    stale = sorted(set(acknowledged()) - set(current_changes()))
    if stale:
        pytest.fail(
            f"{shown(ACKNOWLEDGED)} acknowledges changes that no longer happen (reverted, or the "
            "baseline was rolled): remove these lines:\n" + "\n".join(stale),
            pytrace=False,
        )


def test_breaking_changes_are_found_and_named() -> None:
    before = print_sdl()
    after = (
        before.replace("  topWords(\n", "  topWordz(\n")
        .replace(
            "  wordCount(\n    word: String!\n", "  wordCount(\n    word: String!\n    n: Int!\n"
        )
        .replace("  ): WordCount\n", "  ): Int\n")
        .replace('type WordCount @key(fields: "word", resolvable: true)', "type WordCount")
    )
    assert breaking_changes("gateway", before, before) == []
    changes = breaking_changes("gateway", before, after)
    assert "gateway: FIELD_REMOVED: Field Query.topWords was removed." in changes
    assert "gateway: REQUIRED_ARG_ADDED: A required argument Query.wordCount(n:) was added." in (
        changes
    )
    assert (
        "gateway: FIELD_CHANGED_KIND: Field Query.wordCount changed type from WordCount to Int."
        in changes
    )
    assert 'gateway: ENTITY_KEY_REMOVED: WordCount @key(fields: "word") was removed.' in changes
    added = before.replace("  topWords(", "  newField: Int\n  topWords(")
    assert breaking_changes("gateway", before, added) == []  # additions are not breaking
    # a client leaving the argument out gets other answers (an aggregate view's `by`)
    ranked = before.replace("by: HostPagesRanking! = VIEWS", "by: HostPagesRanking! = PAGES")
    assert breaking_changes("gateway", before, ranked) == [
        f"gateway: ARG_DEFAULT_VALUE_CHANGE: {root}.topHostsByPages(by:) has changed "
        "defaultValue from VIEWS to PAGES."
        for root in ("Query", "Subscription")
    ]


def test_acknowledgements_skip_comments_and_blanks(tmp_path: Path) -> None:
    path = tmp_path / "ACKNOWLEDGED"
    path.write_text("# why: ...\n\n  gateway: FIELD_REMOVED: Field Query.x was removed.  \n")
    assert acknowledged(path) == ["gateway: FIELD_REMOVED: Field Query.x was removed."]
    assert acknowledged(tmp_path / "missing") == []
