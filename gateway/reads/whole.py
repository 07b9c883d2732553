"""Views the gateway cache holds whole: every key's row of every partition, so a lookup of
any key, held or absent, is answered from memory while the partitions' follows vouch.

A partition of a whole view is loaded by a snapshot follow of every key
(`schema.feed`: `keys` null) on the copy the cache's partition follow reads, then kept by
that follow's changes, new keys and deletes included. The load registers before the
snapshot is asked for: a change the follow brings meanwhile is kept (`seen`) and wins over
the snapshot's row when it is at or after the snapshot's offset; a snapshot read below what
the follow had reached when the load registered could miss a change that went by, and is
asked for again. A partition answers only once loaded, in the follow generation it was
loaded in, and once that follow reached the snapshot's offset (`floor`).

The rows of whole views count against the cache's memory bound before the rows it caches
key by key. A view whose rows outgrow it is let go (`WholeViews.drop`) and cached key by
key again: it never pushes out more than the bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.reads.entries import AS_OF, SIZE, Entry, change_entry, unpacked
from gateway.reads.kinds import cacheable
from gateway.reads.protocol import CachedRow
from schema import View
from schema.feed import Change

__all__ = ["WholePart", "WholeView", "WholeViews", "views_to_hold"]


def views_to_hold(catalogue: Iterable[View], names: Iterable[str]) -> list[View]:
    """The views of `catalogue` named to hold whole; ValueError names those the cache cannot
    hold (not count, latest or aggregate views of it) and those it could."""
    cached = {view.name: view for view in catalogue if cacheable(view)}
    wanted = list(dict.fromkeys(names))
    unknown = [name for name in wanted if name not in cached]
    if unknown:
        raise ValueError(
            f"names {', '.join(unknown)}, not a count, latest or aggregate view of the "
            f"catalogue: name some of {', '.join(sorted(cached)) or '(none)'}"
        )
    return [cached[name] for name in wanted]


@dataclass
class WholePart:
    """The rows of one view in one partition, kept by one follow `generation`."""

    generation: int
    rows: dict[str, Entry] = field(default_factory=dict)
    bytes: int = 0
    loaded: bool = False
    floor: int = 0  # the snapshot's offset: the follow must reach it before a row answers
    seen: dict[str, Change] = field(default_factory=dict)  # changes while loading

    def put(self, generation: int, key: str, made: tuple[Entry, int], as_of: int) -> int:
        """Set `key`'s row (a packed row of `change_entry`; () deletes it); the bytes added."""
        held, size = made
        old = self.rows.pop(key, None)
        before = self.bytes
        if old is not None:
            self.bytes -= old[SIZE]
        if held:
            self.rows[key] = (generation, as_of, size, *held)
            self.bytes += size
        return self.bytes - before


class WholeView:
    """One view held whole: its partitions' rows, and whether all of them answer."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.partitions = 0  # P, once the routing table names it
        self.parts: dict[int, WholePart] = {}
        self.complete = False  # every partition loaded: `holds` is true of any key

    def recount(self) -> None:
        parts = self.parts
        self.complete = self.partitions > 0 and all(
            p in parts and parts[p].loaded for p in range(self.partitions)
        )

    @property
    def bytes(self) -> int:
        return sum(part.bytes for part in self.parts.values())

    @property
    def entries(self) -> int:
        return sum(len(part.rows) for part in self.parts.values())


class WholeViews:
    """The views held whole, by name, and the bytes their rows take."""

    def __init__(self, views: Iterable[View]) -> None:
        self.views = {view.name: WholeView(view) for view in views}
        self.bytes = 0

    def get(self, name: str) -> WholeView | None:
        return self.views.get(name)

    def begin(self, whole: WholeView, partition: int, generation: int) -> WholePart:
        """A load of `partition` for a new follow `generation` starts: the old rows go,
        changes from now are kept for the snapshot to come."""
        self.lose(whole, partition)
        part = whole.parts[partition] = WholePart(generation)
        return part

    def lose(self, whole: WholeView, partition: int) -> None:
        """The follow `partition`'s rows were kept by ended: they answer no more."""
        part = whole.parts.pop(partition, None)
        if part is not None:
            self.bytes -= part.bytes
        whole.complete = False

    def take(self, whole: WholeView, part: WholePart, offset: int, snapshot: Sequence[Any]) -> None:
        """Rows of the snapshot of every key of `part`, read at changelog `offset` (its
        changes' JSON; FeedFrameError names one that is not a change: the rows before it
        stay, counted, until the part is lost)."""
        view, generation = whole.view, part.generation
        for doc in snapshot:
            change = Change.from_json(doc)
            if change.snapshot:
                made = change_entry(view, change.key, change.row)
                self._put(part, generation, change.key, made, offset)

    def loaded(self, whole: WholeView, part: WholePart, offset: int) -> None:
        """The whole snapshot of `part`, read at `offset`, was taken: the changes seen
        meanwhile at or after that offset replace its rows, and the partition answers."""
        part.floor = offset
        for key, seen in part.seen.items():
            if seen.offset >= part.floor:
                made = change_entry(whole.view, key, seen.row)
                self._put(part, part.generation, key, made, seen.offset + 1)
        part.seen = {}
        part.loaded = True
        whole.recount()

    def changed(self, whole: WholeView, partition: int, generation: int, change: Change) -> None:
        """A change the follow `generation` of `partition` brought."""
        part = whole.parts.get(partition)
        if part is None or part.generation != generation:
            return
        if not part.loaded:
            part.seen[change.key] = change
            return
        if change.offset < part.floor:  # the snapshot holds it: the follow had not got there
            return
        current = part.rows.get(change.key)
        if current is None or change.offset >= current[AS_OF]:
            made = change_entry(whole.view, change.key, change.row)
            self._put(part, generation, change.key, made, change.offset + 1)

    def _put(
        self, part: WholePart, generation: int, key: str, made: tuple[Entry, int], as_of: int
    ) -> None:
        """`part.put`, counted at once: a row in a part is in `bytes` whatever fails after
        it, as `lose` takes the part's bytes back whole."""
        self.bytes += part.put(generation, key, made, as_of)

    def drop(self, whole: WholeView) -> None:
        """Hold `whole` no more (its rows outgrew the bound): it is cached key by key. Once:
        a view dropped already is left as it is."""
        if self.views.get(whole.view.name) is not whole:
            return
        for partition in list(whole.parts):
            self.lose(whole, partition)
        del self.views[whole.view.name]

    def rows(
        self, whole: WholeView, partition: int, generation: int, reached: int, keys: Iterable[str]
    ) -> dict[str, CachedRow] | None:
        """The rows of `keys` (None for a key the view does not hold) when `partition` is
        loaded in follow `generation` and the follow `reached` its snapshot's offset."""
        part = whole.parts.get(partition)
        if part is None or not part.loaded or part.generation != generation:
            return None
        if part.floor > reached:
            return None
        rows = part.rows
        found: dict[str, CachedRow] = {}
        for key in keys:
            entry = rows.get(key)
            found[key] = None if entry is None else unpacked(key, entry)
        return found

    @property
    def entries(self) -> int:
        """The rows held of every view held whole."""
        return sum(whole.entries for whole in self.views.values())

    @property
    def complete(self) -> int:
        """The views held whole that answer any key now."""
        return sum(1 for whole in self.views.values() if whole.complete)
