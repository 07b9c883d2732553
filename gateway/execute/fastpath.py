"""The lookup fast path: a query of lookups answered from the gateway cache, or from the
planner's reads, without executing its document, when the answer is provably the one
execution gives. Its plans are derived once per document (`gateway.execute.plans`).

Per request (`FastPath.answer`), after everything the endpoint does before it runs an
operation (CORS, authentication, the query limits, validation), each root field's arguments
are bound and checked (`gateway.execute.asked`) and, when the cache holds an entry of every
key asked (`GatewayCache.holds`), every key is looked up in it once (`GatewayCache.look`,
the same test of currency as a lookup's). When the cache is off or cannot answer every key,
each root field's keys are read as its resolver reads them (`Reads.lookup` with the same
`ReadOptions`, concurrently, so the coalescer sends them as execution's), from what the cache
answered (`looked`: it is not asked again), and a partition that could not be read becomes
the same PARTITION_UNAVAILABLE error with the field's path, recorded in the order the reads
complete, as the resolvers record it. A row's leaves are read from its entity's values
(`Entity.values`) where the plan proved each is a plain attribute read by getattr, else from
the object the lookup field returns (each view's entity type) by the fields' own resolvers,
and serialized by their own types. What a root field makes of a row depends on the row's
value alone, so it is kept for hashable rows (count rows; a latest view's events are made
each time) in one bounded memo.

A top-N is answered from the cache when every top-N of the request is kept there
(`GatewayCache.top`, the planner's own test of a kept top; only count views' are kept),
its freshness added before the lookups', as its resolver, answering from memory, adds it
before theirs complete. Otherwise (a top not kept, the cache off, a field accepting no lag)
each top-N is read as its resolver reads it (`Planner.top` with the same options and `by`:
from the cache if kept, else merged from every partition's top, which the cache may keep
for the next request), concurrently with the lookups, and a partition it could not read is
the resolver's PARTITION_UNAVAILABLE error with the field's path. The windows of a key, a
view's totals, a page of a key's events and a page of a scan are read as their resolvers
read them (`Planner.windows`, `Planner.totals`, `Planner.history`, `Planner.scan`), never
from the cache; pages, and the totals of aggregate and windowed views, become the objects
their resolvers make of them, written by the root's compiled writer.

`_entities` is read as its resolver reads it (`gateway.api.fields.entities`): every
representation parsed and its view's scope checked (a doubt: execution reports it), then one
lookup per entity type, concurrently, through the cache; each item is the object of its
representation's type (null for an unknown key), and a partition that could not be read is
the resolver's own PARTITION_UNAVAILABLE error at the first of its representations.

When anything is in doubt (a variable or argument that does not coerce, a check that fails,
a key the cache cannot answer now, a null or a value that does not serialize where the type
forbids it) `answer` returns None having changed nothing, and the document is executed: its
errors, node reads and cache bookkeeping are the full path's own. A doubt that arises only
once the nodes were read returns the reads made (`gateway.execute.replay`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import strawberry
from graphql import GraphQLError, Undefined

from gateway.api.fields.entities import record_missing
from gateway.api.request import RequestContext, per_key
from gateway.cluster.routing import group_keys
from gateway.execute.asked import Asked, Doubt, entities_asked, roots_asked
from gateway.execute.binding import Unbound
from gateway.execute.plans import Plan, Plans, Root
from gateway.execute.replay import Replay, Result
from gateway.execute.writer import Doubt as WriterDoubt
from gateway.model.errors import GatewayError
from gateway.model.rows import Event, Page, Row, WindowCount
from gateway.reads.protocol import (
    SKIPPED,
    CachedRow,
    CacheHits,
    KeyRead,
    LookupResult,
    ScanResult,
    TopResult,
    TotalsResult,
)
from runtime.tracing import Span
from schema import View

__all__ = ["FastPath"]

_MEMO_ROWS = 16_384  # (root field, row) -> its leaves, kept until the memo is full
# (root field ident, key, count) -> the object execution makes of that count row
_Made = dict[tuple[int, str, int], dict[str, Any]]
# what a request whose keys the cache does not all hold has of it: nothing, so the read of
# each view decides for itself whether to look (`Planner.lookup`; see `_not_held`)
_NOT_LOOKED: Mapping[str, CacheHits] = {}
_NOT_READ = LookupResult([], [])  # a read not made yet
# the top-N a request asked, from the cache: by the id of its `Asked`, its value, view and
# freshness
_Kept = dict[int, tuple[list[Any], View, list[dict[str, Any]]]]


class FastPath:
    """Plans and answers lookups of `catalogue`'s cached views over `schema` (the one
    `gateway.api.schema.build_schema` made for that catalogue)."""

    def __init__(self, schema: strawberry.Schema, catalogue: Iterable[View]) -> None:
        self._plans = Plans(schema, catalogue)
        self.plan = self._plans.plan  # an operation's plan, derived once per document
        self.answered = 0  # requests answered here
        self._made: _Made = {}  # see _object

    async def answer(
        self, plan: Plan, variables: Mapping[str, Any] | None, context: RequestContext
    ) -> dict[str, Any] | Replay | None:
        """The `data` of `plan` for `variables`, from the cache when it answers every key,
        else from the planner's reads, with the freshness of the partitions read (and the
        partitions that could not be) added to `context`; None when execution must answer
        instead (nothing is then changed), a `Replay` of the reads made when execution must
        answer from them."""
        if plan.roots[0].entities is not None:  # alone in its plan
            return await self._entities_answer(plan, variables, context)
        try:
            asked = roots_asked(plan, variables, context)
        except (Doubt, Unbound, GraphQLError, GatewayError, TypeError, ValueError):
            return None
        cache = context.cache
        if any(a.options.accepts_no_lag(context.config.max_lag) for a in asked):
            cache = None  # a read accepting no lag is proved by a node, never from memory
        kept = self._kept_tops(asked, cache, context)
        looked: Mapping[str, CacheHits] = {}
        if cache is not None and kept is not None and not any(_read_only(a.root) for a in asked):
            data, looked = self._hit(asked, cache, context, kept)
            if data is not None:
                self.answered += 1
                return data
        return await self._read(asked, context, looked, {} if kept is None else kept)

    def _hit(
        self, asked: list[Asked], cache: Any, context: RequestContext, kept: _Kept
    ) -> tuple[Any, Mapping[str, CacheHits]]:
        """The data of `asked` (its top-N `kept` already) when the cache answers every key
        (counted as hits), else None having changed nothing, with what the cache answered
        of each view (by name): the reads of the rest start from it instead of asking the
        cache again."""
        for a in asked:  # a key not held: no look answers it whole
            view = a.root.view
            if view is not None and not a.root.top and not cache.holds(view, a.keys):
                return None, _not_held(asked, view)
        looked: dict[str, CacheHits] = {}
        try:
            wanted = _by_view(asked)
            for name, (view, keys) in wanted.items():
                looked[name] = cache.look(view, _keys_of(view, keys, context))
            if any(hits.missing for hits in looked.values()):
                return None, looked
            made = self._made
            data = {
                a.root.key: kept[id(a)][0] if a.root.top else _value(a.root, _rows(a, looked), made)
                for a in asked
            }
        except (Doubt, GraphQLError, GatewayError, TypeError, ValueError):
            return None, looked
        _add_tops(kept, context)
        for name, (view, keys) in wanted.items():
            cache.took(view, keys)
            context.add_freshness(view, looked[name].freshness)
        return data, looked

    def _kept_tops(self, asked: list[Asked], cache: Any, context: RequestContext) -> _Kept | None:
        """The value and freshness of each top-N of `asked` (by the id of its `Asked`), all
        from tops the cache keeps (as `Planner.top` finds them); None when one is not kept
        (or there is no cache): each is then read as its resolver reads it."""
        kept: _Kept = {}
        for a in asked:
            root = a.root
            if not root.top:
                continue
            assert root.view is not None
            if cache is None or a.by is not None or a.window is not None:  # never kept
                return None
            try:
                partitions = context.feed.current.partition_count(root.view)
            except GatewayError:  # not read yet: its resolver reads it, and says so
                return None
            found = cache.top(root.view, a.limit, partitions, a.options, counted=False)
            if found is None:
                return None
            try:
                value = [_object(root, row, self._made) for row in found.rows]
            except (Doubt, GraphQLError, GatewayError, TypeError, ValueError):
                return None  # read, and counted, as its resolver reads it
            kept[id(a)] = (value, root.view, found.freshness)
        return kept

    async def _read(
        self,
        asked: list[Asked],
        context: RequestContext,
        looked: Mapping[str, CacheHits],
        kept: _Kept,
    ) -> Any:
        """The data of `asked` (its top-N `kept` already, or none of them) read through the
        planner, as the resolvers of its fields read it, from what the cache answered of
        each view (`looked`, by view name) and the nodes."""
        reads = [a for a in asked if a.root.view is not None and id(a) not in kept]
        done: list[int] = []  # the reads in the order they completed
        results: list[Result] = [_NOT_READ] * len(reads)

        async def read(index: int) -> None:
            one = reads[index]
            try:
                if one.root.top:
                    results[index] = await _top(one, context)
                elif one.root.windows:
                    results[index] = await _windows(one, context)
                elif one.root.totals:
                    results[index] = await _totals(one, context)
                elif one.root.history:
                    results[index] = await _history(one, context)
                elif one.root.scan is not None:
                    results[index] = await _scan(one, context)
                else:
                    results[index] = await _lookup(one, context, looked)
            except Exception as exc:  # execution reports it, from this very read
                results[index] = exc
            done.append(index)

        with Span("plan"):  # the node calls' parent span, as under execution
            if len(reads) == 1:
                await read(0)
            elif reads:  # concurrently, in field order, as execution resolves root fields
                await asyncio.gather(*(read(i) for i in range(len(reads))))
        by_root = {id(a): r for a, r in zip(reads, results, strict=True)}
        try:
            data = {}
            for a in asked:
                if id(a) in kept:
                    data[a.root.key] = kept[id(a)][0]
                    continue
                result = by_root.get(id(a))
                if isinstance(result, Exception):
                    return Replay(list(zip(reads, results, strict=True)))
                if a.root.write is not None:
                    data[a.root.key] = _written(a.root, result)
                    continue
                rows = None if result is None else _read_rows(result)
                data[a.root.key] = _value(a.root, rows, self._made)
        except (Doubt, WriterDoubt, GraphQLError, GatewayError, TypeError, ValueError):
            return Replay(list(zip(reads, results, strict=True)))
        _add_tops(kept, context)  # before the reads': a resolver from memory adds it first
        for index in done:
            result = results[index]
            assert not isinstance(result, Exception)
            view = reads[index].root.view
            assert view is not None
            context.add_freshness(view, result.freshness)
            _record_missing(context, reads[index], result)
        self.answered += 1
        return data

    async def _entities_answer(
        self, plan: Plan, variables: Mapping[str, Any] | None, context: RequestContext
    ) -> dict[str, Any] | Replay | None:
        """`_entities` read as its resolver reads it (`gateway.api.fields.entities`: one
        lookup per entity type, concurrently, each through the cache), its items made
        without execution."""
        root = plan.roots[0]
        try:
            bound = plan.variables.bind(variables)
            wanted = entities_asked(root, bound, context, self._plans.cached_entities)
        except (Doubt, Unbound, GraphQLError, GatewayError, TypeError, ValueError):
            return None
        asked = [a for a, _ in wanted]
        results: list[LookupResult | Exception] = [_NOT_READ] * len(asked)
        done: list[int] = []

        async def read(index: int) -> None:
            one = asked[index]
            assert one.root.view is not None
            try:
                results[index] = await context.planner.lookup(
                    one.root.view, one.keys, context.deadline, one.options
                )
            except Exception as exc:  # execution reports it, from this very read
                results[index] = exc
            done.append(index)

        with Span("plan"):
            await asyncio.gather(*(read(i) for i in range(len(asked))))
        count = sum(len(indexes) for _, indexes in wanted)
        items: list[Any] = [None] * count
        try:
            for (one, indexes), result in zip(wanted, results, strict=True):
                if isinstance(result, Exception):
                    raise Doubt
                for index, row in zip(indexes, result.rows, strict=True):
                    items[index] = _object(one.root, row, self._made)
        except (Doubt, GraphQLError, GatewayError, TypeError, ValueError):
            return Replay(list(zip(asked, results, strict=True)))
        for index in done:
            result, view = results[index], asked[index].root.view
            assert isinstance(result, LookupResult) and view is not None
            context.add_freshness(view, result.freshness)
        for (one, indexes), result in zip(wanted, results, strict=True):
            assert isinstance(result, LookupResult)
            record_missing(context, [root.key], indexes, per_key(one.keys, result))
        self.answered += 1
        return {root.key: items}


def _add_tops(kept: _Kept, context: RequestContext) -> None:
    """The top-N answered from memory, once the whole answer is: their freshness, and the
    cache's hits (not counted when found: execution may yet answer them, and count them)."""
    for _, view, freshness in kept.values():
        context.add_freshness(view, freshness)
    if kept:
        assert context.cache is not None
        context.cache.top_answered(len(kept))


async def _lookup(
    asked: Asked, context: RequestContext, looked: Mapping[str, CacheHits]
) -> LookupResult:
    view = asked.root.view
    assert view is not None
    # looked up without atLeast: a read with it waits for the feed, then looks again
    hits = looked.get(view.name) if asked.options.at_least is None else None
    return await context.planner.lookup(view, asked.keys, context.deadline, asked.options, hits)


async def _windows(asked: Asked, context: RequestContext) -> KeyRead[list[WindowCount]]:
    """A key's windows, read as their resolver reads them (`gateway.api.fields.windowed`)."""
    view = asked.root.view
    assert view is not None
    since, until = asked.span
    key, deadline = asked.keys[0], context.deadline
    return await context.planner.windows(view, key, since, until, deadline, asked.options)


async def _history(asked: Asked, context: RequestContext) -> KeyRead[Page]:
    """A page of a key's events, read as its resolver reads it (`gateway.api.fields.history`)."""
    view = asked.root.view
    assert view is not None
    (since, until), (first, after, newest_first) = asked.span, asked.page
    key, deadline, options = asked.keys[0], context.deadline, asked.options
    return await context.planner.history(
        view, key, since, until, first, after, deadline, options, newest_first
    )


def _written(root: Root, result: Result | None) -> Any:
    """What execution makes of a read whose field's objects hold objects (a page of a key's
    events or its event as of a time, a page of a scan, an aggregate or windowed view's
    totals): the object its resolver makes of the read, written by the root's writer (Doubt
    where it cannot prove it)."""
    assert root.convert is not None and root.write is not None
    if isinstance(result, KeyRead):  # a page of a key's events
        return root.write(root.convert(result.value or Page.empty()))
    if isinstance(result, ScanResult):
        return root.write(root.convert(result.page))
    if not isinstance(result, TotalsResult):
        raise Doubt
    return root.write(root.convert(result))


async def _scan(asked: Asked, context: RequestContext) -> ScanResult:
    """A page of a view's scan, read as its resolver reads it (`gateway.api.fields.scan`)."""
    view = asked.root.view
    assert view is not None and asked.scan is not None
    return await context.planner.scan(view, asked.scan, context.deadline, asked.options)


async def _totals(asked: Asked, context: RequestContext) -> TotalsResult:
    """A view's totals, read as their resolver reads them (`gateway.api.fields.totals`)."""
    view = asked.root.view
    assert view is not None
    since, until = asked.span
    return await context.planner.totals(view, since, until, context.deadline, asked.options)


async def _top(asked: Asked, context: RequestContext) -> TopResult:
    """A top-N, read as its resolver reads it (`gateway.api.fields.count`, `.ranked`,
    `.windowed`)."""
    view = asked.root.view
    assert view is not None
    deadline, options = context.deadline, asked.options
    return await context.planner.top(view, asked.limit, deadline, asked.window, options, asked.by)


def _not_held(asked: list[Asked], view: View) -> Mapping[str, CacheHits]:
    """What the reads of a request have of the cache when the keys of one lookup of `view`
    are not all held: when that lookup is the only one of `view`, its read reads every key
    without looking again (`SKIPPED`, as `Planner.lookup` would decide); otherwise each read
    decides for itself."""
    name = view.name
    lookups = sum(
        1 for a in asked if a.root.view is not None and a.root.view.name == name and not a.root.top
    )
    return {name: SKIPPED} if lookups == 1 else _NOT_LOOKED


def _read_rows(result: Result) -> list[Any]:
    """What a read found: a lookup's rows, a top-N's (rows, events or windows), a key's
    windows, the totals read; each becomes its field's object by the root's `convert`."""
    if isinstance(result, Exception | ScanResult):
        raise Doubt  # read and written otherwise (`_written`)
    if isinstance(result, KeyRead):
        return cast(list[CachedRow], result.value or [])
    if isinstance(result, TotalsResult):
        return [result]
    return cast(list[CachedRow], result.rows)


def _read_only(root: Root) -> bool:
    """Whether the cache never answers `root`: a key's windows or events, a view's totals
    or scan."""
    return root.windows or root.totals or root.history or root.scan is not None


def _record_missing(
    context: RequestContext,
    asked: Asked,
    result: LookupResult | TopResult | KeyRead[Any] | TotalsResult | ScanResult,
) -> None:
    """The field's PARTITION_UNAVAILABLE errors, as its resolver records them."""
    if isinstance(result, KeyRead):  # `record_key_read`: the field's, of its key
        if result.failure is not None:
            path = [asked.root.key]
            context.add_missing(path, result.partition, result.failure, [result.key])
        return
    if not result.failures:
        return
    if isinstance(result, TopResult | TotalsResult | ScanResult):  # `record_failures`: of no key
        for partition, error in sorted(result.failures.items()):
            context.add_missing([asked.root.key], partition, error, ())
        return
    failures = result.failures
    keyed = zip(asked.keys, result.partitions, map(failures.get, result.partitions), strict=True)
    context.add_missing_keys([asked.root.key], keyed)


def _by_view(asked: Iterable[Asked]) -> dict[str, tuple[View, list[str]]]:
    """The keys asked of each view (by name), each once."""
    keys: dict[str, tuple[View, dict[str, None]]] = {}
    for a in asked:
        view = a.root.view
        if view is not None:
            keys.setdefault(view.name, (view, {}))[1].update(dict.fromkeys(a.keys))
    return {name: (view, list(unique)) for name, (view, unique) in keys.items()}


def _keys_of(view: View, keys: list[str], context: RequestContext) -> dict[int, list[str]]:
    """`keys` by partition, as the planner groups a lookup's keys."""
    return group_keys(keys, context.feed.current.partition_count(view), view)[1]


def _rows(asked: Asked, found: Mapping[str, Any]) -> list[CachedRow] | None:
    """The cached rows of the keys `asked`, in order (None for `__typename`)."""
    if asked.root.view is None:
        return None
    rows = found[asked.root.view.name].rows
    return [rows[key] for key in asked.keys]


def _value(root: Root, rows: Sequence[CachedRow] | None, made: _Made) -> Any:
    """What a root field answers: its rows' objects (one for a point lookup)."""
    if root.view is None or rows is None:
        return root.type_name
    if root.many:
        return [_object(root, row, made) for row in rows]
    return _object(root, rows[0], made)


def _object(root: Root, row: CachedRow, made: _Made) -> dict[str, Any] | None:
    """What execution makes of one row: the selected leaves, in order, serialized (the
    same dict for equal rows: nothing changes it once made)."""
    if row is None:
        if not root.nullable_rows:
            raise Doubt
        return None
    if not isinstance(row, Row):  # an event's values: made each time
        return _made(root, row)
    # atoms only, key and values: the collector untracks them, so a full memo adds nothing
    # to what a full garbage collection walks (a key holding the row object did: issue 31)
    key = (root.ident, row.key, row.count)
    values = made.get(key)
    if values is None:
        values = _made(root, row)
        if len(made) >= _MEMO_ROWS:
            made.clear()
        made[key] = values
    return values


def _made(root: Root, row: Row | Event) -> dict[str, Any]:
    """The response object of `row` (a row found) under `root`: its leaves by response key."""
    # each leaf is proved to read its field's value in `root.values` where it is set
    by_name = None if root.values is None else root.values(row)
    source = None
    if by_name is None:
        assert root.convert is not None
        source = root.convert(row)
    answer: dict[str, Any] = {}
    for leaf in root.leaves:
        if leaf.resolve is None:
            answer[leaf.key] = root.type_name
            continue
        value = leaf.resolve(source, None) if by_name is None else by_name[leaf.name]
        if value is None:
            if leaf.non_null:
                raise Doubt
            answer[leaf.key] = None
            continue
        assert leaf.serialize is not None
        serialized = leaf.serialize(value)
        if serialized is None or serialized is Undefined:
            raise Doubt
        answer[leaf.key] = serialized
    return answer
