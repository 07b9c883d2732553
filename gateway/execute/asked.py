"""What each root field of a planned request asks (`Asked`): its arguments bound as
graphql-core binds them (`gateway.execute.binding`) and checked as its resolver and the
planner check them before they read (the principal's scope for the view, the keys, the
limit, the window, time ranges, page sizes and cursors, a scan's bounds and order,
`maxLag`; an `atLeast` token is left to execution). Where a resolver would answer otherwise than by
reading, the request is left to execution: `Doubt` is raised, or the error the resolver's own
check raises (a GatewayError or GraphQLError) is let through for the caller to catch.
`Doubt` is also what the fast path raises wherever it cannot prove its answer equal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphql.execution.values import VariableValues

from gateway.api.fields.common import Entity, authorize_view
from gateway.api.fields.entities import parse_representation
from gateway.api.fields.keys import key_texts
from gateway.api.fields.scan import check_scan_bounds
from gateway.api.request import RequestContext
from gateway.execute.plans import Plan, Root
from gateway.model import inputs
from gateway.reads.protocol import ReadOptions, ScanAsk

__all__ = ["Asked", "Doubt", "entities_asked", "roots_asked"]

_TYPENAME_READ = ReadOptions()  # of `__typename`, which reads nothing


class Doubt(Exception):
    """Execution must answer: the fast path cannot prove its answer equal."""


@dataclass(frozen=True, slots=True)
class Asked:
    """A root field of a request: the keys it asks and the options it reads them with."""

    root: Root
    keys: list[str]
    options: ReadOptions
    limit: int = 0  # of a top-N
    by: str | None = None  # the result an aggregate view's top-N ranks by
    window: datetime | None = None  # the start of a windowed view's window
    # of a key's windows or events: `from` and `to`
    span: tuple[datetime | None, datetime | None] = (None, None)
    # of a key's events: `first`, `after` and `newestFirst`
    page: tuple[int, str | None, bool] = (0, None, False)
    scan: ScanAsk | None = None  # of a view's scan


def roots_asked(
    plan: Plan, variables: Mapping[str, Any] | None, context: RequestContext
) -> list[Asked]:
    """The keys each root field asks and its read options, checked as its resolver checks
    them."""
    bound = plan.variables.bind(variables)
    if bound is None:  # execution reports why
        raise Doubt
    asked = []
    for root in plan.roots:
        if root.arguments is None:
            asked.append(Asked(root, [], _TYPENAME_READ))
            continue
        arguments = root.arguments.bind(bound)
        _check_read(root, arguments, context)
        options = ReadOptions(arguments.get("maxLag"), caller=context.principal.subject)
        if root.top:
            limit = _limit(root, arguments, context)
            window = _window(root, arguments)
            asked.append(Asked(root, [], options, limit, _by(root, arguments), window))
        elif root.windows:
            keys, span = _keys(root, arguments, context), _span(root, arguments)
            asked.append(Asked(root, keys, options, span=span))
        elif root.totals:
            asked.append(Asked(root, [], options, span=_totals_span(root, arguments)))
        elif root.scan is not None:
            asked.append(Asked(root, [], options, scan=_scan(root, arguments, context)))
        elif root.as_of:  # the newest event at or before `at`: one, newest first
            keys, span = _keys(root, arguments, context), (None, _as_of_end(root, arguments))
            asked.append(Asked(root, keys, options, span=span, page=(1, None, True)))
        elif root.history:
            keys, span = _keys(root, arguments, context), _span(root, arguments)
            asked.append(Asked(root, keys, options, span=span, page=_page(root, arguments)))
        else:
            asked.append(Asked(root, _keys(root, arguments, context), options))
    return asked


def entities_asked(
    root: Root,
    bound: VariableValues | None,
    context: RequestContext,
    cached: Mapping[str, Entity],
) -> list[tuple[Asked, list[int]]]:
    """The lookup of each entity type `_entities` asks for (in the order the types first
    appear) and the indexes of its representations, checked as its resolver checks them;
    Doubt where it would answer an error."""
    assert root.entities is not None and root.arguments is not None
    if bound is None:
        raise Doubt
    representations = root.arguments.bind(bound).get("representations")
    if not isinstance(representations, list):
        raise Doubt
    context.planner.check_representations(len(representations))
    entities = root.entities
    wanted: dict[str, tuple[list[str], list[int]]] = {}
    for index, representation in enumerate(representations):
        name, key = parse_representation(cached, index, representation)
        one = entities[name]
        assert one.view is not None
        authorize_view(context, one.view)
        keys, indexes = wanted.setdefault(name, ([], []))
        keys.append(key)
        indexes.append(index)
    options = ReadOptions(caller=context.principal.subject)
    asked = []
    for name, (keys, indexes) in wanted.items():
        view = entities[name].view
        assert view is not None
        context.planner.check_keys(view, keys, counted=False)
        asked.append((Asked(entities[name], keys, options), indexes))
    return asked


def _check_read(root: Root, arguments: Mapping[str, Any], context: RequestContext) -> None:
    """Doubt where a field's resolver would not answer its coerced `arguments` from the
    cache (`gateway.api.fields.common`: the view's scope, `atLeast`, `maxLag`)."""
    view = root.view
    assert view is not None
    if view.scope is not None and view.scope not in context.principal.scopes:
        raise Doubt  # execution says FORBIDDEN for this field
    if arguments.get("atLeast") is not None:
        raise Doubt  # waits for the pipeline first
    max_lag = arguments.get("maxLag")
    if max_lag is not None and max_lag < 0:
        raise Doubt


def _by(root: Root, arguments: Mapping[str, Any]) -> str | None:
    """The result an aggregate view's top-N ranks by (its enum value's name of the result),
    None for a count view's, and for a top-N of one window asked without `by` (or `by:
    null`, its default), which ranks by the windows' counts as its resolver does."""
    if not root.ranked:
        return None
    by = arguments.get("by")
    if by is None and root.windowed:
        return None
    by = getattr(by, "value", by)  # the enum's member
    if not isinstance(by, str):
        raise Doubt
    return by


def _span(root: Root, arguments: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """The `from` and `to` of a key's windows or events, or of a windowed view's totals
    (each None when not given or null), checked as the planner checks them before it reads:
    a resolver failing before its first await makes execution drop its siblings' answers,
    so execution must answer it."""
    assert root.view is not None
    since, until = arguments.get("from"), arguments.get("to")
    if not all(t is None or isinstance(t, datetime) for t in (since, until)):
        raise Doubt
    inputs.time_range(root.view, since, until)  # a GatewayError: execution reports it
    return since, until


def _totals_span(
    root: Root, arguments: Mapping[str, Any]
) -> tuple[datetime | None, datetime | None]:
    """The `from` and `to` of a windowed view's totals, checked as `_span` checks them;
    none for another view's."""
    assert root.view is not None
    return (None, None) if root.view.window is None else _span(root, arguments)


def _scan(root: Root, arguments: Mapping[str, Any], context: RequestContext) -> ScanAsk:
    """The page a scan's coerced `arguments` ask, checked as its resolver and `Planner.scan`
    check it before they read (a GatewayError: execution reports it)."""
    assert root.view is not None and root.scan is not None
    ask = root.scan.ask(arguments)
    check_scan_bounds(root.view, ask.scan_filter)
    context.planner.check_scan(root.view, ask)
    return ask


def _as_of_end(root: Root, arguments: Mapping[str, Any]) -> datetime | None:
    """The end of the events an `asOf` field reads (after `at`), as its resolver finds it
    before it reads (a GatewayError: execution reports it)."""
    assert root.view is not None
    at = arguments.get("at")
    if not isinstance(at, datetime):
        raise Doubt
    return inputs.as_of_end(root.view, at)


def _page(root: Root, arguments: Mapping[str, Any]) -> tuple[int, str | None, bool]:
    """The `first`, `after` and `newestFirst` of a key's events, checked as
    `Planner.history` checks them before it reads (as `_span`)."""
    assert root.view is not None
    first, after = arguments.get("first"), arguments.get("after")
    newest_first = arguments.get("newestFirst")
    if not isinstance(first, int) or not isinstance(newest_first, bool):
        raise Doubt
    if after is not None and not isinstance(after, str):
        raise Doubt
    inputs.check_page_size(root.view, first)
    if after is not None:
        inputs.check_cursor(root.view, after)
    return first, after, newest_first


def _window(root: Root, arguments: Mapping[str, Any]) -> datetime | None:
    """The start of the window a windowed view's top-N asks (`WindowInput`, coerced to a
    dict), None for another view's."""
    if not root.windowed:
        return None
    assert root.view is not None
    window = arguments.get("window")
    start = window.get("start") if isinstance(window, dict) else None
    if not isinstance(start, datetime):
        raise Doubt
    inputs.top_window(root.view, start)  # as `_span`: a GatewayError, execution reports it
    return start


def _limit(root: Root, arguments: Mapping[str, Any], context: RequestContext) -> int:
    """The `limit` of a top-N's coerced `arguments`, checked as `Planner.top` checks it."""
    view = root.view
    assert view is not None
    limit = arguments.get("limit")
    if not isinstance(limit, int):
        raise Doubt
    context.planner.check_limit(view, limit)  # a GatewayError: execution reports it
    return limit


def _keys(root: Root, arguments: Mapping[str, Any], context: RequestContext) -> list[str]:
    """The keys of a lookup's coerced `arguments`, or Doubt where its resolver would not
    answer them (`gateway.api.fields.lookup`)."""
    view = root.view
    assert view is not None
    many = root.many and not root.windows  # a key's windows are a list too
    given = arguments[view.keys_arg] if many else [arguments[view.key_field]]
    if not isinstance(given, list) or any(k is None for k in given):
        raise Doubt
    texts = key_texts(view, given)  # a GatewayError: execution reports it
    context.planner.check_keys(view, texts)
    return texts
