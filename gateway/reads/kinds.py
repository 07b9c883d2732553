"""What each view kind is to the gateway's reads: the documents it sends the nodes and how
it reads their rows, and what of it the cache keeps. `KINDS` is the one table the planner,
the cache and the fast path look kinds up in; the public fields of each kind are in
`gateway.api.kinds`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.model.rows import Event, Row, changelog_values
from gateway.model.timestamps import from_ms
from gateway.nodes.documents import (
    NodeDocuments,
    ViewQueries,
    aggregate_totals_document,
    count_columns,
    count_row,
    count_selection,
    event_columns,
    event_selection,
    history_document,
    lookup_document,
    ranked_top_document,
    read_event,
    scan_document,
    top_document,
    totals_document,
    window_columns,
    window_row,
    window_selection,
    windows_document,
)
from schema import View, ViewKind

__all__ = ["KINDS", "ReadKind", "cacheable", "kind_of", "to_row", "view_queries"]

# (view, key, changelog row) -> what a node lookup of the key answers
RowFromChangelog = Callable[[View, str, Mapping[str, Any]], Row | Event]


@dataclass(frozen=True)
class ReadKind:
    """A kind to the reads: `documents` what the gateway asks a view's nodes and how it
    reads their rows; `cached_row`, for kinds whose lookups the cache answers, the lookup's
    answer from a changelog row (`schema.changelog`); `cached_top` whether the cache keeps
    the view's merged top-N."""

    documents: Callable[[View], NodeDocuments]
    cached_row: RowFromChangelog | None = None
    cached_top: bool = False


def _count_documents(view: View) -> NodeDocuments:
    selection = count_selection(view)
    return NodeDocuments(
        lookup=lookup_document(view, selection),
        top=top_document(view, selection, windowed=False),
        read_row=count_row,
        read_ranked=count_row,
        scan=scan_document(view, ordered=True),
        totals=totals_document(view, windowed=False),
        scan_columns=count_columns(),
    )


def _count_row(view: View, key: str, row: Mapping[str, Any]) -> Row:
    return Row(key, int(row["count"]))


def _windowed_documents(view: View) -> NodeDocuments:
    return NodeDocuments(
        top=top_document(view, window_selection(view), windowed=True),
        windows=windows_document(view),
        read_ranked=functools.partial(window_row, view),
        totals=totals_document(view, windowed=True),
        scan=scan_document(view, timed=True),
        scan_columns=window_columns(view),
    )


def _latest_documents(view: View) -> NodeDocuments:
    return NodeDocuments(
        lookup=lookup_document(view, event_selection(view)),
        read_row=functools.partial(read_event, view),
        scan=scan_document(view),
        scan_columns=event_columns(view),
    )


def _latest_row(view: View, key: str, row: Mapping[str, Any]) -> Event:
    return Event(key, from_ms(int(row["event_ms"])), changelog_values(view, row))


def _aggregate_documents(view: View) -> NodeDocuments:
    selection, read = event_selection(view), functools.partial(read_event, view)
    return NodeDocuments(
        lookup=lookup_document(view, selection),
        top=ranked_top_document(view, selection),
        read_row=read,
        read_ranked=read,
        totals=aggregate_totals_document(view),
        scan=scan_document(view, ranked=True),
        scan_columns=event_columns(view),
    )


def _history_documents(view: View) -> NodeDocuments:
    return NodeDocuments(
        history=history_document(view),
        history_newest=history_document(view, newest_first=True),
        scan=scan_document(view),
        scan_columns=event_columns(view),
    )


KINDS: dict[ViewKind, ReadKind] = {
    ViewKind.COUNT: ReadKind(_count_documents, cached_row=_count_row, cached_top=True),
    ViewKind.WINDOWED_COUNT: ReadKind(_windowed_documents),
    ViewKind.LATEST: ReadKind(_latest_documents, cached_row=_latest_row),
    ViewKind.HISTORY: ReadKind(_history_documents),
    ViewKind.AGGREGATE: ReadKind(_aggregate_documents, cached_row=_latest_row),
    ViewKind.WINDOWED_AGGREGATE: ReadKind(_windowed_documents),
}


def kind_of(view: View) -> ReadKind:
    """What `view`'s kind is to the reads, or an error naming the view if it has none."""
    try:
        return KINDS[view.kind]
    except KeyError:
        raise ValueError(
            f"view {view.name}: kind {view.kind.value} is not served by the gateway yet"
        ) from None


def view_queries(view: View) -> ViewQueries:
    """The node documents of `view` and the readers of their answers."""
    return ViewQueries(view, kind_of(view).documents(view))


def cacheable(view: View) -> bool:
    """Whether lookups of `view` are answered from the cache (count, latest and aggregate
    views)."""
    return kind_of(view).cached_row is not None


def to_row(view: View, key: str, row: Mapping[str, Any]) -> Row | Event:
    """What a node lookup of `key` answers, from the changelog row (`schema.changelog`) of a
    view whose lookups the cache answers: the same values the node's fields give."""
    read = kind_of(view).cached_row
    if read is None:
        raise ValueError(f"view {view.name}: a {view.kind.value} view is not cached")
    return read(view, key, row)
