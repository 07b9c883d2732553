"""The public fields of a COUNT view: point lookup, multi-key lookup, global top-N; the
view's type is a federation entity keyed by the view's key field.

```graphql
type WordCount @key(fields: "word") { word: String!  count: Int! }
wordCount(word: String!): WordCount
wordCounts(words: [String!]!): [WordCount]!
topWords(limit: Int! = 10): [WordCount!]!
allWordCounts(first: Int, after: String, ...): WordCountConnection!  # gateway.api.fields.scan
```
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from typing import Any

import strawberry

from gateway.api.fields.common import (
    AtLeast,
    Entity,
    MaxLag,
    ViewFields,
    authorize_view,
    entity_key,
    object_type,
    read_options,
    record_failures,
)
from gateway.api.fields.keys import key_fields, key_values
from gateway.api.fields.live import (
    KeySubscription,
    key_subscription_fields,
    top_subscription_field,
    update_type,
)
from gateway.api.fields.lookup import lookup_fields
from gateway.api.fields.scan import scan_field
from gateway.api.fields.totals import count_totals_field
from gateway.api.request import RequestContext
from gateway.model.rows import Event, Ranked, Row
from schema import View

__all__ = ["count_fields"]


def count_fields(view: View) -> ViewFields:
    """Point lookup, multi-key lookup and top-N of a COUNT view, and its entity."""
    row_type = object_type(
        view,
        view.type_name,
        f"Events counted per {view.key_field} (view {view.name}, topic {view.topic}).",
        [*key_fields(view), ("count", int, None)],
        [entity_key(view)],
    )

    def values_of(row: Row | Event | Ranked) -> dict[str, Any]:
        assert isinstance(row, Row)
        values = key_values(view, row.key)
        values["count"] = row.count
        return values

    entity = Entity(view, row_type, values_of)
    to_type = entity.convert

    async def top(
        info: strawberry.Info,
        limit: int = 10,
        max_lag: MaxLag = strawberry.UNSET,
        at_least: AtLeast = strawberry.UNSET,
    ) -> list[row_type]:  # type: ignore[valid-type]
        context: RequestContext = info.context
        authorize_view(context, view)
        context.planner.check_top(view, limit, None)  # before atLeast's wait
        options = await read_options(context, view, max_lag, at_least)
        result = await context.planner.top(view, limit, context.deadline, options=options)
        context.add_freshness(view, result.freshness)
        record_failures(context, info, result.failures)
        return [to_type(r) for r in result.rows]

    noun = f"{view.key_field} of view {view.name}"
    fields = lookup_fields(
        view,
        row_type,
        to_type,
        f"The count of one {noun}; null if unknown.",
        f"Counts of several {view.keys_arg}, in the order asked; null if unknown.",
    )
    fields[view.top_field] = strawberry.field(
        resolver=top,
        name=view.top_field,
        description=f"The `limit` most counted {view.keys_arg} (count desc, then "
        f"{view.key_field} asc) of view {view.name}.",
    )
    scan = scan_field(view, row_type, to_type, counted=True)
    fields.update(scan.fields)
    totals = count_totals_field(view)
    fields.update(totals.fields)
    updates = KeySubscription(
        view,
        update_type(view, [("count", int | None, "Null: the key has no count.")], "a count"),
        lambda row, at: {"count": None if row is None else row.get("count")},
    )
    subscriptions = key_subscription_fields(view, updates, True, "The count")
    subscriptions[view.top_field] = top_subscription_field(view, row_type, to_type)
    return ViewFields(fields, entity, subscriptions, totals_type=totals.type, scan_type=scan.type)
