"""The catalogue the differential cluster runs: the built-in one plus one view added by a
single entry, to show that a view of an existing kind needs no code."""

from __future__ import annotations

from schema import CATALOGUE as BUILT_IN
from schema import View, ViewKind

WORD_TALLY = View(
    name="word_tally",
    topic="words",
    kind=ViewKind.COUNT,
    key_field="term",
    type_name="WordTally",
    point_field="wordTally",
    many_field="wordTallies",
    top_field="topTallies",
)

CATALOGUE = (*BUILT_IN, WORD_TALLY)
