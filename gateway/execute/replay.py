"""The reads the fast path made before it found it cannot answer (`Replay`): a doubt
that arises only once the nodes were read (a row that does not serialize, a read that
raised) hands them to execution, which gets exactly those results from the planner, never
a second read, and reports what it makes of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from gateway.execute.asked import Asked
from gateway.model.rows import Page, WindowCount
from gateway.reads.protocol import (
    DEFAULT_READ,
    KeyRead,
    LookupResult,
    ReadOptions,
    Reads,
    ScanAsk,
    ScanResult,
    TopResult,
    TotalsResult,
)

__all__ = ["Replay", "Result"]


# of one read, as `Replay` keeps it
Result = LookupResult | TopResult | KeyRead[Any] | TotalsResult | ScanResult | Exception

# a read the fast path made: of a view (by name), what (a lookup, a top-N, a key's windows
# or events, totals, a scan) and its arguments, and its options
_ReadKey = tuple[str, str, tuple[Any, ...], ReadOptions]


def _read_key(asked: Asked) -> _ReadKey:
    view = asked.root.view
    assert view is not None
    if asked.root.top:
        return (view.name, "top", (asked.limit, asked.by, asked.window), asked.options)
    if asked.root.windows:
        return (view.name, "windows", (asked.keys[0], *asked.span), asked.options)
    if asked.root.totals:
        return (view.name, "totals", asked.span, asked.options)
    if asked.root.scan is not None:
        return (view.name, "scan", (asked.scan,), asked.options)
    if asked.root.history:
        return (view.name, "history", (asked.keys[0], *asked.span, *asked.page), asked.options)
    return (view.name, "lookup", tuple(asked.keys), asked.options)


@dataclass
class Replay:
    """The reads the fast path made before it found it cannot answer: execution gets their
    results (or exceptions) from `planner`, each once, rather than reading again."""

    reads: list[tuple[Asked, Result]]
    _left: dict[_ReadKey, list[Result]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for asked, result in self.reads:
            self._left.setdefault(_read_key(asked), []).append(result)

    def planner(self, reads: Reads) -> Reads:
        """`reads` answering these reads from their results."""
        return cast(Reads, _Replayed(reads, self._left))


class _Replayed:
    """A planner whose lookups, top-N, windows, totals, pages of events and scans made
    already are answered from their results; anything else is `reads`'."""

    def __init__(self, reads: Reads, left: dict[_ReadKey, list[Result]]) -> None:
        self._reads = reads
        self._left = left

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reads, name)

    def _made(self, key: _ReadKey) -> Result | None:
        """The result of the read `key` made already (raised again if it raised), or None
        when none is left: the planner reads."""
        made = self._left.get(key)
        result = made.pop(0) if made else None
        if isinstance(result, Exception):
            raise result
        return result

    async def lookup(
        self, view: Any, keys: Sequence[str], deadline: float, options: ReadOptions
    ) -> LookupResult:
        result = self._made((view.name, "lookup", tuple(keys), options))
        if result is None:
            return await self._reads.lookup(view, keys, deadline, options)
        assert isinstance(result, LookupResult)
        return result

    async def top(
        self,
        view: Any,
        limit: int,
        deadline: float,
        window: Any = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult:
        result = self._made((view.name, "top", (limit, by, window), options))
        if result is None:
            return await self._reads.top(view, limit, deadline, window, options, by)
        assert isinstance(result, TopResult)
        return result

    async def windows(
        self,
        view: Any,
        key: str,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> KeyRead[list[WindowCount]]:
        result = self._made((view.name, "windows", (key, since, until), options))
        if result is None:
            return await self._reads.windows(view, key, since, until, deadline, options)
        assert isinstance(result, KeyRead)
        return result

    async def totals(
        self,
        view: Any,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> TotalsResult:
        result = self._made((view.name, "totals", (since, until), options))
        if result is None:
            return await self._reads.totals(view, since, until, deadline, options)
        assert isinstance(result, TotalsResult)
        return result

    async def history(
        self,
        view: Any,
        key: str,
        since: datetime | None,
        until: datetime | None,
        first: int,
        after: str | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
        newest_first: bool = False,
    ) -> KeyRead[Page]:
        made = (key, since, until, first, after, newest_first)
        result = self._made((view.name, "history", made, options))
        if result is None:
            return await self._reads.history(
                view, key, since, until, first, after, deadline, options, newest_first
            )
        assert isinstance(result, KeyRead)
        return result

    async def scan(
        self, view: Any, ask: ScanAsk, deadline: float, options: ReadOptions = DEFAULT_READ
    ) -> ScanResult:
        result = self._made((view.name, "scan", (ask,), options))
        if result is None:
            return await self._reads.scan(view, ask, deadline, options)
        assert isinstance(result, ScanResult)
        return result
