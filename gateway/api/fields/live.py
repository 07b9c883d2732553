"""Subscription fields, generated from the catalogue like the query fields and named like
them: each kind's builder adds its own (count and latest: a key's row and several keys'
rows; windowed: a key's windows; history: a key's new events; count: the top-N).

```graphql
wordCount(word: String!, after: String, maxLag: Int): WordCountUpdate!
wordCounts(words: [String!]!, after: String, maxLag: Int): WordCountUpdate!
```

Every update carries its changelog `offset`, a resume `token` (pass the newest as `after`
to continue after a reconnect: every later change once, no gap, no repeat) and the
`freshness` of the copy it came from. Without `after`, a key's first update is its current
row (null fields: no row). The same scope checks as queries apply when subscribing.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, TypeVar

import strawberry

from gateway.api.fields.common import (
    FieldSpec,
    WindowInput,
    authorize_view,
    given,
    make,
    object_type,
)
from gateway.api.fields.keys import key_annotation, key_fields, key_texts, key_values
from gateway.api.request import RequestContext
from gateway.cluster.readtoken import ReadPositions, is_read_token
from gateway.model.errors import BadRequestError, GatewayError, SubscriptionsOffError
from gateway.model.inputs import check_limit, top_window
from gateway.model.timestamps import from_ms
from gateway.nodes.hub import FeedClosedError, FeedHub
from gateway.reads.protocol import ReadOptions
from gateway.subscriptions.tokens import ResumeToken
from gateway.subscriptions.top import TopUpdate, top_updates
from gateway.subscriptions.updates import KeyUpdate, key_updates
from runtime.valuetypes import Long
from schema import View, field_value

__all__ = [
    "After",
    "FollowLag",
    "Freshness",
    "KeySubscription",
    "event_values_of",
    "key_subscription_fields",
    "made",
    "start_subscription",
    "top_subscription_field",
    "top_type",
    "update_type",
]

T = TypeVar("T")

After = Annotated[
    str | None,
    strawberry.argument(
        description="The `token` of the newest update you received: continue right after it "
        "(every later change exactly once). Or a query's extensions.readToken: start right "
        "after what that answer reflected (every change since, none it held). Leave it out to "
        "start now: with the current rows where the field has them (a key's row or windows), "
        "else with the next change."
    ),
]

FollowLag = Annotated[
    int | None,
    strawberry.argument(
        name="maxLag",
        description="When no RUNNING active copy of a partition is there to follow, follow a "
        "standby at most this many changelog records behind (default: the gateway's "
        "STATEFED_GATEWAY_MAX_LAG); each update's freshness says which copy it came from.",
    ),
]


@strawberry.type(description="Which copy of a partition an update came from, and how current.")
class Freshness:
    partition: int
    node: str | None
    role: str | None
    applied_offset: Long | None = strawberry.field(
        description="The next changelog offset the copy had applied."
    )
    lag: Long | None = strawberry.field(description="Changelog records the copy was behind.")


def freshness_of(entry: Mapping[str, Any]) -> Freshness:
    return Freshness(
        partition=entry.get("partition", -1),
        node=entry.get("node"),
        role=entry.get("role"),
        applied_offset=entry.get("appliedOffset"),
        lag=entry.get("lag"),
    )


def update_type(view: View, fields: Sequence[FieldSpec], what: str) -> Any:
    """`<TypeName>Update`: the key, `fields` (null: unknown or deleted), `deleted`, offset,
    token, freshness."""
    return object_type(
        view,
        f"{view.type_name}Update",
        f"A change of {what} of view {view.name}, pushed as the node applies it.",
        [
            *key_fields(view),
            *fields,
            (
                "deleted",
                bool,
                "True when this change deleted what it is about (a tombstone deleted the "
                "key, or retention removed a window or an event): its other fields are null. "
                "A first row of a key that has none is not a deletion.",
            ),
            (
                "offset",
                Long,
                "The changelog offset of the change; for a first row, of the last record it "
                "can hold (-1: none).",
            ),
            ("token", str, "Pass as `after` to resume right after this update."),
            ("freshness", Freshness, None),
        ],
    )


def event_values_of(view: View, row: Mapping[str, Any] | None) -> dict[str, Any]:
    """A latest or history changelog row's value fields and event time (None: no row)."""
    fields = row.get("fields", {}) if row is not None else {}
    values = {}
    for spec in view.row_fields:
        value = fields.get(spec.name) if isinstance(fields, dict) else None
        values[spec.name] = field_value(spec.type, value)
    event_ms = row.get("event_ms") if row is not None else None
    values["eventTime"] = from_ms(event_ms) if isinstance(event_ms, int) else None
    return values


async def made(
    updates: AsyncGenerator[T, None], make_one: Callable[[T], Any]
) -> AsyncGenerator[Any, None]:
    """Each of `updates` made into its GraphQL object by `make_one`, then the GatewayError
    that ended them, if one did: graphql-core makes a yielded exception the error of a last
    result (with its `extensions.code`), so the subscriber learns why its subscription
    ended, and the transport completes it. Closing it closes `updates` (their follows end)."""
    async with contextlib.aclosing(updates) as stream:
        try:
            async for update in stream:
                yield make_one(update)
        except FeedClosedError as exc:
            yield SubscriptionsOffError(str(exc))
        except GatewayError as exc:
            yield exc


def start_subscription(
    info: strawberry.Info, view: View, keys: Sequence[str], after: str | None, max_lag: int | None
) -> tuple[FeedHub, int, ResumeToken | None, int | None]:
    """Check a key subscription's arguments before it starts: the scope, the keys, the token,
    maxLag. The hub, P, the token and maxLag."""
    context: RequestContext = info.context
    authorize_view(context, view)
    context.planner.check_keys(view, keys)
    max_lag, after = given(max_lag), given(after)
    if max_lag is not None and max_lag < 0:
        raise BadRequestError(view.name, f"maxLag must be 0 or more, got {max_lag}")
    if context.hub is None:
        raise SubscriptionsOffError("this gateway serves no subscriptions (no feed hub)")
    partitions = context.feed.current.partition_count(view)
    token = None if after is None else _resume_token(view, after, partitions)
    return context.hub, partitions, token, max_lag


def _resume_token(view: View, after: str, partitions: int) -> ResumeToken:
    """The token `after` names: a resume token of the view, or a read token, whose changelog
    positions are where the subscription starts (a partition it has none for starts with
    its current rows)."""
    if not is_read_token(after):
        return ResumeToken.parse(view.name, after, partitions)
    applied = ReadPositions.parse(view, after).applied_at_least(view)
    offsets = {} if applied is None else dict(applied.offsets)
    beyond = [p for p in offsets if p >= partitions]
    if beyond:
        raise BadRequestError(
            view.name,
            f"`after` is a read token naming partition {beyond[0]}, but the view has "
            f"{partitions}: it is from another cluster",
        )
    return ResumeToken(view.name, offsets)


class KeySubscription:
    """How a kind's key subscriptions read changes: `values` makes an update's fields
    (besides the key, offset, token, freshness) from a changelog row (None: deleted) and the
    entry it is at (a window's start, an event's position); `conflate` keeps only the newest
    row per entry for a subscriber behind (past STATEFED_GATEWAY_SUBSCRIPTION_MAX_WAIT_MS;
    else every update is kept, up to STATEFED_GATEWAY_SUBSCRIPTION_QUEUE); `snapshot`: a
    subscription without `after` starts with the current rows (`empty_snapshots`: also of
    keys without one)."""

    def __init__(
        self,
        view: View,
        kind_type: Any,
        values: Callable[[Mapping[str, Any] | None, tuple[int, ...]], dict[str, Any]],
        *,
        conflate: bool = True,
        snapshot: bool = True,
        empty_snapshots: bool = True,
    ) -> None:
        self.view = view
        self.kind_type = kind_type
        self._values = values
        self._conflate = conflate
        self._snapshot = snapshot
        self._empty_snapshots = empty_snapshots

    def make(self, update: KeyUpdate) -> Any:
        values = {
            **key_values(self.view, update.key),
            **self._values(update.row, update.at),
            "deleted": update.row is None and not update.snapshot,
            "offset": update.offset,
            "token": update.token,
            "freshness": freshness_of(update.freshness),
        }
        return make(self.kind_type, values)

    def updates(
        self, info: strawberry.Info, keys: Sequence[str], after: str | None, max_lag: int | None
    ) -> AsyncGenerator[Any, None]:
        """The subscription's updates, its arguments checked first: a bad one is an error
        of the subscribe request itself, before any update."""
        hub, partitions, token, lag = start_subscription(info, self.view, keys, after, max_lag)
        config = info.context.config
        bound, max_wait_s = config.subscription_queue, config.subscription_max_wait_ms / 1000
        updates = key_updates(
            hub,
            self.view,
            partitions,
            keys,
            token,
            lag,
            conflate=self._conflate,
            snapshot=self._snapshot,
            empty_snapshots=self._empty_snapshots,
            bound=bound,
            max_wait_s=max_wait_s,
        )
        return made(updates, self.make)


def key_subscription_fields(
    view: View, subscription: KeySubscription, many: bool, what: str
) -> dict[str, Any]:
    """`view.point_field` (one key) and, when `many`, `view.many_field` (several keys) as
    subscriptions of `subscription`'s updates."""
    kind_type = subscription.kind_type
    key_arg = key_annotation(view)

    async def point(
        info: strawberry.Info,
        key: Annotated[key_arg, strawberry.argument(name=view.key_field)],  # type: ignore[valid-type]
        after: After = strawberry.UNSET,
        max_lag: FollowLag = strawberry.UNSET,
    ) -> AsyncGenerator[kind_type, None]:  # type: ignore[valid-type]
        return subscription.updates(info, key_texts(view, [key]), after, max_lag)

    async def several(
        info: strawberry.Info,
        keys: Annotated[list[key_arg], strawberry.argument(name=view.keys_arg)],  # type: ignore[valid-type]
        after: After = strawberry.UNSET,
        max_lag: FollowLag = strawberry.UNSET,
    ) -> AsyncGenerator[kind_type, None]:  # type: ignore[valid-type]
        return subscription.updates(info, key_texts(view, keys), after, max_lag)

    fields = {
        view.point_field: strawberry.subscription(
            resolver=point,
            name=view.point_field,
            description=f"{what} of one {view.key_field} of view {view.name}, on every change.",
        )
    }
    if many:
        fields[view.many_field] = strawberry.subscription(
            resolver=several,
            name=view.many_field,
            description=f"{what} of several {view.keys_arg} of view {view.name}, on every "
            "change (one update per changed key).",
        )
    return fields


MIN_INTERVAL_MS = 100  # a top-N subscription's fastest rate


def top_type(view: View, row_type: Any) -> Any:
    """`<TypeName>Top`: the merged top-N rows, a token and the freshness of the read."""
    return object_type(
        view,
        f"{view.type_name}Top",
        f"The top-N of view {view.name}, pushed when it changes.",
        [
            ("rows", list[row_type], None),  # type: ignore[valid-type]
            ("token", str, "The changelog offsets per partition this top includes."),
            ("freshness", list[Freshness], "Which copies answered the read, per partition."),
        ],
    )


def top_updates_of(
    info: strawberry.Info,
    view: View,
    limit: int,
    window: datetime | None,
    interval: int,
    max_lag: int | None,
    by: str | None = None,
) -> AsyncGenerator[TopUpdate, None]:
    """The updates of a top-N subscription, its arguments checked first."""
    context: RequestContext = info.context
    authorize_view(context, view)
    max_lag = given(max_lag)
    check_limit(view, limit, context.config.max_top_limit)
    start = top_window(view, given(window))
    if not MIN_INTERVAL_MS <= interval <= 3_600_000:
        raise BadRequestError(
            view.name, f"interval must be in {MIN_INTERVAL_MS}..3600000 ms, got {interval}"
        )
    if max_lag is not None and max_lag < 0:
        raise BadRequestError(view.name, f"maxLag must be 0 or more, got {max_lag}")
    if context.hub is None:
        raise SubscriptionsOffError("this gateway serves no subscriptions (no feed hub)")
    partitions = context.feed.current.partition_count(view)
    options = ReadOptions(max_lag, caller=context.principal.subject)
    return top_updates(
        context.hub,
        context.planner,
        view,
        partitions,
        limit,
        start,
        interval / 1000,
        options,
        context.config.timeout_s,
        by,
    )


def top_subscription_field(
    view: View, row_type: Any, to_type: Callable[[Any], Any], ranking: Any = None
) -> Any:
    """`view.top_field` as a subscription: the merged top-N (of one window, for a windowed
    view; by the result `by`, one of the enum `ranking`, for an aggregate view, and, when
    given, for a windowed aggregate view), pushed when it changes, at most every
    `interval` ms."""
    kind_type = top_type(view, row_type)

    def make_top(update: TopUpdate) -> Any:
        values = {
            "rows": [to_type(row) for row in update.rows],
            "token": update.token,
            "freshness": [freshness_of(entry) for entry in update.freshness],
        }
        return make(kind_type, values)

    interval_argument = strawberry.argument(
        description=f"Push at most once per this many ms ({MIN_INTERVAL_MS}..3600000)."
    )

    async def top(
        info: strawberry.Info,
        limit: int = 10,
        interval: Annotated[int, interval_argument] = 1000,
        max_lag: FollowLag = strawberry.UNSET,
    ) -> AsyncGenerator[kind_type, None]:  # type: ignore[valid-type]
        return made(top_updates_of(info, view, limit, None, interval, max_lag), make_top)

    async def window_top(
        info: strawberry.Info,
        window: WindowInput,
        limit: int = 10,
        interval: Annotated[int, interval_argument] = 1000,
        max_lag: FollowLag = strawberry.UNSET,
    ) -> AsyncGenerator[kind_type, None]:  # type: ignore[valid-type]
        start = window.start
        return made(top_updates_of(info, view, limit, start, interval, max_lag), make_top)

    resolver: Callable[..., Any] = top if view.window is None else window_top
    if ranking is not None and view.window is not None:  # a windowed aggregate view's

        async def ranked_window_top(
            info: strawberry.Info,
            window: WindowInput,
            limit: int = 10,
            by: ranking | None = None,  # type: ignore[valid-type]
            interval: Annotated[int, interval_argument] = 1000,
            max_lag: FollowLag = strawberry.UNSET,
        ) -> AsyncGenerator[kind_type, None]:  # type: ignore[valid-type]
            field = None if by is None else by.value  # type: ignore[attr-defined]
            start = window.start
            return made(
                top_updates_of(info, view, limit, start, interval, max_lag, field), make_top
            )

        resolver = ranked_window_top
    elif ranking is not None:
        first = next(iter(ranking))

        async def ranked_top(
            info: strawberry.Info,
            limit: int = 10,
            by: ranking = first,  # type: ignore[valid-type]
            interval: Annotated[int, interval_argument] = 1000,
            max_lag: FollowLag = strawberry.UNSET,
        ) -> AsyncGenerator[kind_type, None]:  # type: ignore[valid-type]
            field: str = by.value  # type: ignore[attr-defined]
            return made(top_updates_of(info, view, limit, None, interval, max_lag, field), make_top)

        resolver = ranked_top

    return strawberry.subscription(
        resolver=resolver,
        name=view.top_field,
        description=f"The `limit` first rows of view {view.name} as its top field ranks them, "
        "now and whenever they change, at most every `interval` ms.",
    )
