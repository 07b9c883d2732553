"""What the planner's reads take and give, and the face of the planner that the resolvers
use (`Reads`): the public fields depend on this, not on the planner, which depends on
each kind's node documents (`gateway.api.kinds`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from gateway.cluster.consistency import AppliedAtLeast
from gateway.cluster.routing import RoutingTable
from gateway.model.cursors import KEY_ORDER, ScanFilter
from gateway.model.errors import RoutingError
from gateway.model.inputs import TimeRange
from gateway.model.principal import ANONYMOUS
from gateway.model.rows import Event, Page, PartialTotal, Ranked, Row, WindowCount
from gateway.model.scans import ScanPage
from schema import View

__all__ = [
    "DEFAULT_READ",
    "SKIPPED",
    "CacheHits",
    "CachedRow",
    "KeyRead",
    "LookupResult",
    "ReadOptions",
    "Reads",
    "ScanAsk",
    "ScanResult",
    "TopResult",
    "TotalsResult",
]

T = TypeVar("T")


CachedRow = Row | Event | None


@dataclass
class CacheHits:
    """What the cache answered of one lookup: rows by key, the freshness of each partition it
    answered, and the keys (by partition) it could not answer."""

    rows: dict[str, CachedRow]
    freshness: list[dict[str, Any]]
    missing: dict[int, list[str]]
    skipped: bool = False  # the lookup did not look (`GatewayCache.holds`): read it all

    def of(self, keys_of: Mapping[int, Sequence[str]]) -> CacheHits:
        """What these hits answer of `keys_of`, whose partitions' keys are among those
        looked up (a partition missing here is missing whole)."""
        if self.skipped:
            return self
        missing = {p: list(keys) for p, keys in keys_of.items() if p in self.missing}
        rows = {k: self.rows[k] for p, keys in keys_of.items() if p not in missing for k in keys}
        freshness = [e for e in self.freshness if e.get("partition") in keys_of]
        return CacheHits(rows, freshness, missing)


# what a request that does not look in the cache has of it: every key is read from a node
SKIPPED = CacheHits({}, [], {}, skipped=True)


@dataclass(frozen=True)
class ReadOptions:
    """How one read may be answered: from a standby at most `max_lag` records behind when
    the active copy cannot answer (None = the gateway's default, 0 = active only), and only
    by copies that have applied `at_least`; `caller` is the subject of the principal it is
    made for, named to the nodes (`statefed-caller`, runtime.trust)."""

    max_lag: int | None = None
    at_least: AppliedAtLeast | None = None
    caller: str = ANONYMOUS.subject

    def accepts_no_lag(self, default_max_lag: int) -> bool:
        """Whether the read asked `maxLag: 0` (or left it to a default of 0): every copy
        that answers must prove itself current, and the cache answers none of it."""
        max_lag = default_max_lag if self.max_lag is None else self.max_lag
        return max_lag == 0


# the gateway's configured max lag, no atLeast token
DEFAULT_READ = ReadOptions()


@dataclass(frozen=True)
class LookupResult:
    """Rows in the order of the keys asked (None = unknown or unavailable)."""

    rows: list[Row | Event | None]
    partitions: list[int]  # the partition of each key
    failures: dict[int, RoutingError] = field(default_factory=dict)
    freshness: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class TopResult:
    rows: list[Ranked]
    failures: dict[int, RoutingError] = field(default_factory=dict)
    freshness: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ScanAsk:
    """One page of a whole-view scan as the client asked for it: forwards with `first`
    after `after`, or backwards with `last` before `before` (cursors, gateway.model.cursors), in
    `order` (gateway.model.cursors.KEY_ORDER, or COUNT_ORDER for count views)."""

    scan_filter: ScanFilter
    first: int | None = None
    after: str | None = None
    last: int | None = None
    before: str | None = None
    order: str = KEY_ORDER


@dataclass(frozen=True)
class ScanResult:
    """A page of a scan; `failures` are the partitions it could not read (its cursors keep
    their old positions)."""

    page: ScanPage
    failures: dict[int, RoutingError] = field(default_factory=dict)
    freshness: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class TotalsResult:
    """The totals of the partitions read (per window for windowed views); `failures` are
    the partitions that could not be, whose rows the totals then lack."""

    partials: list[PartialTotal]
    failures: dict[int, RoutingError] = field(default_factory=dict)
    freshness: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class KeyRead(Generic[T]):
    """What the owner of `key` answered (None when its partition could not be read)."""

    key: str
    partition: int
    value: T | None
    failure: RoutingError | None = None
    freshness: list[dict[str, Any]] = field(default_factory=list)


class Reads(Protocol):
    """The reads a request's resolvers ask for (implemented by `gateway.reads.planner.Planner`)."""

    def suspects(self, table: RoutingTable, now: float | None = None) -> set[str]:
        """The nodes of `table` reads avoid now: missed heartbeats or calls left without an
        answer."""

    def check_keys(self, view: View, keys: Sequence[str], *, counted: bool = True) -> None:
        """Reject what no node could answer; lookups take keys checked here (`counted`: no
        more than one lookup field takes)."""

    def check_representations(self, count: int) -> None:
        """Reject an `_entities` call with more representations than the gateway takes."""

    def check_limit(self, view: View, limit: int) -> None:
        """Reject a top-N `limit` out of bounds (`top` checks it too)."""

    def check_scan(self, view: View, ask: ScanAsk) -> None:
        """Reject a scan page no node could answer: its size, cursors and bounds (`scan`
        checks them too, before it reads)."""

    def check_top(self, view: View, limit: int, window: datetime | None) -> datetime | None:
        """Reject a top-N no node could answer: its limit and window (`top` checks them
        too); the window's start."""

    def check_windows(
        self, view: View, key: str, since: datetime | None, until: datetime | None
    ) -> TimeRange:
        """Reject a read of a key's windows no node could answer (`windows` checks it
        too); its time range."""

    def check_history(
        self,
        view: View,
        key: str,
        since: datetime | None,
        until: datetime | None,
        first: int,
        after: str | None,
    ) -> TimeRange:
        """Reject a page of a key's history no node could answer (`history` checks it
        too); its time range."""

    async def lookup(
        self,
        view: View,
        keys: Sequence[str],
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
        looked: CacheHits | None = None,
    ) -> LookupResult: ...

    async def top(
        self,
        view: View,
        limit: int,
        deadline: float,
        window: datetime | None = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult: ...

    async def windows(
        self,
        view: View,
        key: str,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> KeyRead[list[WindowCount]]: ...

    async def history(
        self,
        view: View,
        key: str,
        since: datetime | None,
        until: datetime | None,
        first: int,
        after: str | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
        newest_first: bool = False,
    ) -> KeyRead[Page]: ...

    async def scan(
        self, view: View, ask: ScanAsk, deadline: float, options: ReadOptions = DEFAULT_READ
    ) -> ScanResult: ...

    async def totals(
        self,
        view: View,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> TotalsResult: ...
