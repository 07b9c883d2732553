"""What the gateway reads from nodes, per view kind, before it becomes a GraphQL object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schema import View, field_value

__all__ = [
    "Edge",
    "Event",
    "Page",
    "PartialTotal",
    "Ranked",
    "Row",
    "Scanned",
    "WindowCount",
    "changelog_values",
    "ranked_count",
]


@dataclass(frozen=True)
class Row:
    """One entity of a COUNT view."""

    key: str
    count: int


@dataclass(frozen=True)
class WindowCount:
    """The count of one key in the window [start, end) of a windowed_count view; of a
    windowed aggregate view, also its results by name (`values`)."""

    key: str
    start: datetime
    end: datetime
    count: int
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    """One event of a latest or history view (or an aggregate view's row): its key, event
    time and value fields."""

    key: str
    event_time: datetime
    values: Mapping[str, Any] = field(default_factory=dict)


Ranked = Row | WindowCount | Event  # a row of a top-N: an aggregate view's rows are Events


def ranked_count(row: Ranked) -> int:
    """The count a row of a count or windowed top-N is ranked by. An aggregate view's row
    is ranked by a field of its own (`runtime.ranking.value_rank`), and no top of one is
    kept or watched by count: asking is a bug."""
    if isinstance(row, Event):
        raise TypeError(f"an aggregate row has no count to rank by: {row}")
    return row.count


Scanned = Row | WindowCount | Event  # a row of a whole-view scan, of any kind


@dataclass(frozen=True)
class ResultTotal:
    """One numeric result of an aggregate view over some keys: its sum, least and greatest
    value (None: none of the keys has a value of it)."""

    name: str
    sum: float | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class PartialTotal:
    """What one partition holds of a view (of the window [start, end) for windowed views):
    its number of keys and the sum of their counts (for an aggregate view, each numeric
    result's total instead)."""

    partition: int
    keys: int
    count: int
    start: datetime | None = None
    end: datetime | None = None
    results: tuple[ResultTotal, ...] = ()


@dataclass(frozen=True)
class Edge:
    cursor: str
    event: Event


@dataclass(frozen=True)
class Page:
    """One page of a key's history, as the owning node cut it."""

    edges: list[Edge]
    has_next_page: bool
    end_cursor: str | None

    @classmethod
    def empty(cls) -> Page:
        return cls([], False, None)


def changelog_values(view: View, row: Mapping[str, Any]) -> dict[str, Any]:
    """The values of a changelog row's `fields` (`schema.changelog`: a latest or history
    event's, an aggregate's or a window's results) by name, as the view's type shows them."""
    fields = row.get("fields")
    fields = fields if isinstance(fields, dict) else {}
    return {spec.name: field_value(spec.type, fields.get(spec.name)) for spec in view.row_fields}
